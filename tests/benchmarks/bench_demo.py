"""`make demo` on fresh clones: wall time and where it goes, with and without the bytecode warm-up.

Each run clones the checkout's committed HEAD into a new directory and runs ``make demo`` there, so
the ``.venv`` is new (installed from uv's cache, as on a machine that has installed the project once)
and has no bytecode yet. Runs alternate between the demo as shipped and its baseline,
``WARM_IMPORTS=0`` (the replicas compile TensorFlow's bytecode themselves), so that other work on
the machine falls on both alike. Printed: each run's wall time split into phases read from the
demo's own output, the load average when it started, and the median per variant beside the
issue's 60 s target.

    python3 tests/benchmarks/bench_demo.py [--pairs N] [--source CHECKOUT]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

TARGET_S = 60.0
ROOT = Path(__file__).resolve().parents[2]

# (phase name, the output line that ends it); each phase starts where the previous one ended.
MARKS = (
    ("install", "==> .venv ready"),
    ("airflow start", "Creating TFJob "),
    ("replicas start", "replica(s) in sync"),
    ("training", "==> final metrics"),
    ("rest", "==> demo finished"),
)


@dataclass
class Run:
    variant: str
    load: float
    wall: float = 0.0
    phases: dict[str, float] = field(default_factory=dict)


def run_demo(source: Path, variant: str, warm: bool) -> Run:
    run = Run(variant, os.getloadavg()[0])
    workdir = Path(tempfile.mkdtemp(prefix="bench-demo-"))
    try:
        subprocess.run(["git", "clone", "-q", str(source), str(workdir / "repo")], check=True)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "VIRTUAL_ENV")}
        env["WARM_IMPORTS"] = "1" if warm else "0"
        started = time.monotonic()
        seen: dict[str, float] = {}
        tail: list[str] = []
        with subprocess.Popen(
            ["make", "demo"],
            cwd=workdir / "repo",
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        ) as proc:
            assert proc.stdout is not None
            for line in proc.stdout:
                tail = [*tail[-40:], line]
                for name, mark in MARKS:
                    if name not in seen and mark in line:
                        seen[name] = time.monotonic() - started
        run.wall = time.monotonic() - started
        if proc.returncode != 0 or len(seen) != len(MARKS):
            sys.exit(f"make demo ({variant}) failed with {proc.returncode}:\n{''.join(tail)}")
        previous = 0.0
        for name, _ in MARKS:
            run.phases[name] = seen[name] - previous
            previous = seen[name]
        return run
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--pairs", type=int, default=2, help="runs of each variant, alternating")
    parser.add_argument("--source", type=Path, default=ROOT, help="the checkout to clone (its HEAD)")
    args = parser.parse_args()
    variants = (("baseline: WARM_IMPORTS=0", False), ("shipped: warm-up import", True))
    runs = [run_demo(args.source, name, warm) for _ in range(args.pairs) for name, warm in variants]
    names = [name for name, _ in MARKS]
    print(f"{'variant':26} {'load':>5} {'wall':>6}  " + "  ".join(f"{n:>14}" for n in names))
    for r in runs:
        cells = "  ".join(f"{r.phases[n]:13.1f}s" for n in names)
        print(f"{r.variant:26} {r.load:5.2f} {r.wall:5.1f}s  {cells}")
    print()
    for name, _ in variants:
        walls = [r.wall for r in runs if r.variant == name]
        print(
            f"{name:26} median {statistics.median(walls):5.1f} s over {len(walls)} run(s) (target {TARGET_S:.0f} s)"
        )


if __name__ == "__main__":
    main()
