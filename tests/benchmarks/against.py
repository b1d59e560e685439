"""One benchmark, run on the working tree and on an earlier commit, alternating, in one run.

A reshaping that must change nothing (issue 21, the house's second edition) is judged by the benchmarks
beside the commit before it, measured on the same machine in the same minutes, so that a busy machine
shows in both columns and not as a regression. Each tree runs its own copy of the benchmark script
against its own code: the earlier commit is checked out into a temporary git worktree and put first on
``PYTHONPATH`` (the benchmark's own subprocesses, the local cluster among them, inherit it), in this
checkout's ``.venv``. The rounds alternate (baseline, current, baseline, current...) and each round's
output is printed in full, labelled; the script's last lines are the benchmark's own figures for both.

    .venv/bin/python tests/benchmarks/against.py --baseline 015e832 [--rounds 2] \
        bench_import.py [its arguments...]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(tree: Path, script: str, args: list[str]) -> tuple[int, str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree), "PATH": f"{ROOT / '.venv' / 'bin'}:{os.environ['PATH']}"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(tree / "tests" / "benchmarks" / script), *args],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
    )
    return done.returncode, done.stdout + done.stderr, time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--baseline", required=True, help="the commit to measure beside the working tree")
    parser.add_argument("--rounds", type=int, default=1, help="how many times each tree runs, alternating")
    parser.add_argument("script", help="a benchmark under tests/benchmarks/, e.g. bench_import.py")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the benchmark's own arguments")
    options = parser.parse_args()
    commit = subprocess.run(
        ["git", "rev-parse", "--short", options.baseline],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    with tempfile.TemporaryDirectory(prefix="bench-baseline-") as scratch:
        baseline = Path(scratch) / "tree"
        subprocess.run(
            ["git", "worktree", "add", "--detach", "--quiet", str(baseline), commit], cwd=ROOT, check=True
        )
        failed = False
        try:
            for round_ in range(1, options.rounds + 1):
                for label, tree in (
                    (f"baseline {commit}", baseline),
                    (f"current {head} + working tree", ROOT),
                ):
                    code, output, seconds = run(tree, options.script, options.args)
                    print(f"===== round {round_}: {label}: {options.script} ({seconds:.0f} s, exit {code})")
                    print(output.rstrip(), flush=True)
                    failed = failed or code != 0
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(baseline)], cwd=ROOT, check=False)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
