"""How much importing the operator module adds to a DAG file's parse: wall time and memory.

Each measurement runs in a fresh interpreter (nothing cached in sys.modules): it imports
``airflow.sdk`` (every DAG file does), then the module under test, and reports the extra wall time
and the extra peak RSS. The median of several repetitions is printed, beside the cncf.kubernetes
KubernetesJobOperator's module for comparison. Targets for ours: <= 50 ms and <= 5 MB.

    .venv/bin/python tests/benchmarks/bench_import.py [--repeat N]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

MODULES = {
    "airflow_tfjob.operators.tfjob (TFJobOperator)": "airflow_tfjob.operators.tfjob",
    "airflow_tfjob.sensors.tfjob (TFJobSensor)": "airflow_tfjob.sensors.tfjob",
    "airflow_tfjob.operators.generic (KubeflowJobOperator)": "airflow_tfjob.operators.generic",
    "airflow_tfjob.operators.pytorchjob (PyTorchJobOperator)": "airflow_tfjob.operators.pytorchjob",
    "airflow_tfjob.operators.xgboostjob (XGBoostJobOperator)": "airflow_tfjob.operators.xgboostjob",
    "airflow_tfjob.operators.jaxjob (JAXJobOperator)": "airflow_tfjob.operators.jaxjob",
    "airflow_tfjob.operators.paddlejob (PaddleJobOperator)": "airflow_tfjob.operators.paddlejob",
    "airflow_tfjob.sensors.pytorchjob (PyTorchJobSensor)": "airflow_tfjob.sensors.pytorchjob",
    "cncf.kubernetes KubernetesJobOperator": "airflow.providers.cncf.kubernetes.operators.job",
}

PROBE = r"""
import json, resource, sys, time
def rss_kb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0
import airflow.sdk
from airflow.sdk import BaseOperator  # resolve the lazy attribute, as a DAG file does
t0 = time.perf_counter(); r0 = rss_kb(); n0 = len(sys.modules)
__import__(sys.argv[1])
t1 = time.perf_counter(); r1 = rss_kb()
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("kubernetes", "kubernetes_asyncio"))
print(json.dumps({"ms": (t1 - t0) * 1000, "mb": (r1 - r0) / 1024, "modules": len(sys.modules) - n0,
                  "kubernetes_loaded": bool(heavy)}))
"""


def measure(module: str, env: dict[str, str]) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, module],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=True,
    )
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=7)
    options = parser.parse_args()
    home = tempfile.mkdtemp(prefix="bench-import-airflow-")
    env = {**os.environ, "AIRFLOW_HOME": home, "AIRFLOW__CORE__LOAD_EXAMPLES": "False"}
    # A deployed Airflow imports DAG files with bytecode cached; without it every probe would compile
    # the modules again (PYTHONDONTWRITEBYTECODE in the environment makes 24 ms look like 80-100 ms).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    for module in MODULES.values():  # warm the OS file cache and the bytecode: no probe pays for it
        measure(module, env)
    print(f"extra cost of the import after `import airflow.sdk` (median of {options.repeat} fresh processes)")
    print(f"{'module':48} {'wall ms':>9} {'RSS MB':>8} {'modules':>8}  kubernetes loaded")
    for label, module in MODULES.items():
        runs = [measure(module, env) for _ in range(options.repeat)]
        ms = statistics.median(r["ms"] for r in runs)
        mb = statistics.median(r["mb"] for r in runs)
        count = statistics.median(r["modules"] for r in runs)
        loaded = any(r["kubernetes_loaded"] for r in runs)
        print(f"{label:48} {ms:9.1f} {mb:8.1f} {count:8.0f}  {loaded}")


if __name__ == "__main__":
    main()
