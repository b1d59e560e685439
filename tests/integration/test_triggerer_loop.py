"""Nothing the provider does holds the triggerer's event loop: imports, configuration files, clients,
log floods and watch bursts run off it or in short turns.

Each test starts a fresh process (the first trigger in a triggerer pays every import) that runs the
triggers as ``airflow triggerer`` does, under Airflow's own detector (``TriggerRunner.block_watchdog``
at the triggerer's default threshold) and a sampler that says which stalls were the provider's
(tests/integration/loop_probe.py explains the rule). The test fails on any such stall.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from watch_support import Api, tfjob_manifest, unique

import airflow_tfjob

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(400)]

PROBE = Path(__file__).with_name("loop_probe.py")
#: ``[triggerer] blocked_main_thread_warning_threshold``'s default in Airflow 3.3.
THRESHOLD = 0.2
TRIGGER = "airflow_tfjob.triggers.deferral.KubeflowJobTrigger"
CONDITION_TRIGGER = "airflow_tfjob.triggers.deferral.KubeflowJobConditionTrigger"
#: A replica that writes as fast as it can: short lines, 10 KB lines, and a last line without newline.
FLOOD = (
    "import sys\n"
    "w = sys.stdout.write\n"
    "for i in range(60000): w(f'short line {i}\\n')\n"
    "for i in range(300): w('y' * 10000 + f' long {i}\\n')\n"
    "w('no newline at the end')\n"
)


def _probe(specs: list[list[Any]]) -> dict[str, Any]:
    # As installed (pip compiles a wheel's bytecode): a fresh checkout's first import would compile the
    # provider's modules on the loop, a cost of the checkout, not of a deployed triggerer.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(airflow_tfjob.__file__).parent)], check=True)
    done = subprocess.run(
        [sys.executable, str(PROBE), str(THRESHOLD), json.dumps(specs)],
        capture_output=True,
        text=True,
        timeout=360,
        env=dict(os.environ),
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def _verdict(result: dict[str, Any]) -> None:
    # Printed for whoever reads the run: the watchdog's warnings include the machine's own load.
    blocked = [w.split(" seconds")[0].rsplit(" ", 1)[-1] for w in result["watchdog"]]
    print(f"watchdog warnings (s): {blocked}; longest stall {result['longest_stall']:.2f} s")
    assert result["provider_stalls"] == [], json.dumps(result["provider_stalls"], indent=1)


async def test_first_triggers_in_a_fresh_triggerer_do_not_block_its_loop(k8s_conn: str, api: Api) -> None:
    """The very first triggers of a process (imports, kubeconfig, exec plugin, client) and a job whose
    replica floods its log, beside a quiet one and a sensor's condition trigger."""
    quiet, flood = unique("loop-quiet"), unique("loop-flood")
    await api.create(
        "default", tfjob_manifest(quiet, external=False, command=["python", "-c", "print('hello')"])
    )
    await api.create("default", tfjob_manifest(flood, external=False, command=["python", "-c", FLOOD]))
    specs = [
        [
            TRIGGER,
            {"name": quiet, "namespace": "default", "options": {"get_logs": True, "log_replicas": "all"}},
        ],
        [
            TRIGGER,
            {"name": flood, "namespace": "default", "options": {"get_logs": True, "log_replicas": "all"}},
        ],
        [CONDITION_TRIGGER, {"name": quiet, "namespace": "default", "target_condition": "Succeeded"}],
    ]
    result = await asyncio.to_thread(_probe, specs)
    assert [events[0]["event"] for events in result["events"]] == ["succeeded", "succeeded", "reached"]
    _verdict(result)
