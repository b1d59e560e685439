"""The deployment test's sweep (tests/e2e/test_failover.py): SWEEP deferred TFJobs, one mapped task each,
whose one worker counts numbered lines at a steady pace until the test creates the release file
(TFJOB_E2E_RELEASE), then TAIL more lines and a last one. A triggerer killed mid-sweep therefore holds
triggers that have written lines and have more to write, however slowly the machine starts the tasks."""

from __future__ import annotations

import os
import sys
from datetime import datetime

from airflow.sdk import DAG

from airflow_tfjob.operators.tfjob import TFJobOperator

SWEEP = 6
TAIL = 20
PACE = 0.2  # seconds between two lines
RELEASE = os.environ.get("TFJOB_E2E_RELEASE", "/nonexistent/release")
COUNTER = (
    "import os, sys, time\n"
    "trial, release, tail, pace = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])\n"
    "i, left = 0, None\n"
    "while left != 0:\n"
    "    print(f'sweep {trial} line {i}', flush=True)\n"
    "    i += 1\n"
    "    if left is None and os.path.exists(release):\n"
    "        left = tail\n"
    "    elif left is not None:\n"
    "        left -= 1\n"
    "    time.sleep(pace)\n"
    "print(f'sweep {trial} done after {i} lines', flush=True)\n"
)

with DAG("failover_sweep", schedule=None, start_date=datetime(2025, 1, 1), catchup=False):
    TFJobOperator.partial(
        task_id="train",
        image="local/python",
        worker=1,
        deferrable=True,
        on_finish_action="delete",
        startup_timeout=300,
    ).expand(
        command=[[sys.executable, "-c", COUNTER, str(k), RELEASE, str(TAIL), str(PACE)] for k in range(SWEEP)]
    )
