"""One task per failure cause, synchronous and deferred, all under TrainingRetryPolicy and retries=3
(tests/dags/test_retry_policy_runs.py runs the DAG once and reads each task's tries, state and XComs).

- node_lost_*: try 1 prints "ready" and waits; the test loses its node (LocalCluster.lose_node); the
  policy retries at once and try 2 succeeds.
- traceback_*: the replica raises ValueError: one try, failed, the traceback named.
- oom_*: the replica outgrows its 100Mi limit: one try, failed, naming worker-0 and 100Mi.
- oom_raise_*: the same with raise_memory=True: try 2 runs with 200Mi and succeeds.
- unpullable_*: the image's registry cannot be resolved: one try, failed at once.
"""

from __future__ import annotations

import sys
from datetime import timedelta

from airflow.sdk import DAG

from airflow_tfjob.operators.retry_policy import TrainingRetryPolicy
from airflow_tfjob.operators.tfjob import TFJobOperator

WAITS_ON_TRY_1 = (
    "import os, time\n"
    "print('ready on try', os.environ['TRY'], flush=True)\n"
    "time.sleep(120 if os.environ['TRY'] == '1' else 0)\n"
    "print('accuracy=0.9', flush=True)\n"
)
RAISES = "print('epoch 1 loss=0.5', flush=True)\nraise ValueError('learning rate must be positive')\n"
GROWS = (
    "import time\n"
    "data = b'x' * (150 << 20)\n"
    "print('holding 150 MB', flush=True)\n"
    "time.sleep(1)\n"
    "print('accuracy=0.9', flush=True)\n"
)

POLICY = TrainingRetryPolicy(delays={"NodeLost": 0, "PodDeleted": 0})
RAISING = TrainingRetryPolicy(raise_memory=True, memory_ceiling="1Gi")

with DAG("retry_policy", schedule=None, catchup=False, tags=["test"]):
    for mode, deferrable in (("sync", False), ("deferred", True)):
        common = dict(
            namespace="default",
            worker=1,
            image="local/python",
            retries=3,
            # A policy that left a decision to Airflow would retry at once: the tries counted show it.
            retry_delay=timedelta(seconds=0),
            deferrable=deferrable,
            env={"TRY": "{{ ti.try_number }}"},
            metrics=["accuracy"],
            startup_timeout=120,
        )
        TFJobOperator(
            task_id=f"node_lost_{mode}",
            command=[sys.executable, "-c", WAITS_ON_TRY_1],
            pod_labels={"retry-test": f"node-lost-{mode}"},
            retry_policy=POLICY,
            **common,
        )
        TFJobOperator(
            task_id=f"traceback_{mode}", command=[sys.executable, "-c", RAISES], retry_policy=POLICY, **common
        )
        TFJobOperator(
            task_id=f"oom_{mode}",
            command=[sys.executable, "-c", GROWS],
            container_resources={"memory": "100Mi"},
            retry_policy=POLICY,
            **common,
        )
        TFJobOperator(
            task_id=f"oom_raise_{mode}",
            command=[sys.executable, "-c", GROWS],
            container_resources={"memory": "100Mi"},
            retry_policy=RAISING,
            **common,
        )
        TFJobOperator(
            task_id=f"unpullable_{mode}",
            command=[sys.executable, "-c", "print('never runs')"],
            retry_policy=POLICY,
            **{**common, "image": "registry.invalid/team/trainer:1.0"},
        )
