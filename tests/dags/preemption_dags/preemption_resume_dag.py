"""A spot training task behind Kueue, synchronous and deferred (tests/dags/test_preemption_resume_runs.py
runs the DAG once and reads each task's tries, state, XComs and log).

Each task's job waits in the ``prio`` LocalQueue at low priority, with checkpoint= and
on_preemption="fail": its replica writes one checkpoint per epoch, starting after the newest one its
directory holds; try 1 holds after epoch 3. The test preempts it with a high-priority job then; the
retry policy retries (after a 1 s delay instead of the 60 s it suggests for a preemption) and try 2
resumes from the newest checkpoint and trains only the remaining epochs.
"""

from __future__ import annotations

import os
import sys
from datetime import timedelta

from airflow.sdk import DAG

from airflow_tfjob.operators.retry_policy import TrainingRetryPolicy
from airflow_tfjob.operators.tfjob import TFJobOperator

EPOCHS = 20
# Resumes after the newest epoch-N file of its CHECKPOINT_DIR (file://), then saves one per epoch in
# the line the provider reads. Try 1 trains no epoch past HOLD_AFTER: it holds before the next until it is
# stopped (for 300 s at most, then it goes on and the test fails on its tries), also when Kueue admits
# the evicted job again before the task has deleted it. The preemption is the test's to make, and on
# busy cores short epochs alone once outran it (try 1 finished all 20 before Kueue evicted it).
TRAINS = r"""
import os, time
directory = os.environ["CHECKPOINT_DIR"]
local = directory.removeprefix("file://")
os.makedirs(local, exist_ok=True)
done = sorted(int(name.split("-")[1]) for name in os.listdir(local) if name.startswith("epoch-"))
start = done[-1] if done else 0
print(f"try {os.environ['TRY']} starting after epoch {start}", flush=True)
trained = open(os.path.join(local, "trained"), "a")  # the test reads which try trained which epoch
for epoch in range(start + 1, int(os.environ["EPOCHS"]) + 1):
    if os.environ["TRY"] == "1" and epoch > int(os.environ["HOLD_AFTER"]):
        time.sleep(300)
    time.sleep(0.25)
    open(os.path.join(local, f"epoch-{epoch}"), "w").close()
    trained.write(f"{os.environ['TRY']} {epoch}\n")
    trained.flush()
    print(f"checkpoint saved: {directory}/epoch-{epoch} epoch={epoch}", flush=True)
print("trained", flush=True)
"""

# The test's tmp directory (a disk every local replica shares, like file:///shared/...).
STORE = "file://" + os.environ.get("PREEMPTION_CHECKPOINTS", "/tmp/preemption-checkpoints")

with DAG("preemption_resume", schedule=None, catchup=False, tags=["test"]):
    previous = None
    for mode, deferrable in (("sync", False), ("deferred", True)):
        task = TFJobOperator(
            task_id=f"spot_{mode}",
            namespace="default",
            worker=1,
            image="local/python",
            command=[sys.executable, "-c", TRAINS],
            env={"TRY": "{{ ti.try_number }}", "EPOCHS": str(EPOCHS), "HOLD_AFTER": "3"},
            container_resources={"cpu": "1"},
            kueue_queue="prio",
            labels={"kueue.x-k8s.io/priority-class": "low"},
            pod_labels={"preemption-test": mode},
            on_preemption="fail",
            checkpoint=STORE,
            retries=1,
            retry_delay=timedelta(seconds=0),
            retry_policy=TrainingRetryPolicy(delays={"Preempted": 1}),
            deferrable=deferrable,
            startup_timeout=120,
            # The deferred task runs even when the synchronous one failed: each shows its own mode.
            trigger_rule="all_done",
        )
        # One after the other: the queue's quota (1 CPU) holds one spot job and the preemptor at a time.
        if previous is not None:
            previous >> task
        previous = task
