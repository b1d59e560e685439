"""keep_failed_for against the local cluster: a failed job's failed pods are listable (logs and all)
after the task has failed, for the window, and gone after it without any task running; a TFJob by
its own TTL (the local controller honours ttlSecondsAfterFinished as the training-operator does), a
TrainJob by the TTL of the batch Job it is made a dependent of. Pods still running when the job failed
go at once, and a succeeded job is cleaned up as before."""

from __future__ import annotations

import sys
import time
from datetime import datetime, timedelta
from typing import Any

import pytest
from operator_support import TaskInstance, context_for, replica_command, wait_for

from airflow_tfjob.build.checker import JobValidationError
from airflow_tfjob.build.naming import identity_selector
from airflow_tfjob.constants import ANNOTATION_KEEP_FAILED_UNTIL, LABEL_KEEPS_FAILED
from airflow_tfjob.jobs.kinds import TFJOB, TRAINJOB
from airflow_tfjob.operators.tfjob import TFJobOperator
from airflow_tfjob.operators.trainjob import TrainJobOperator
from airflow_tfjob.version_compat import AirflowException

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240)]

# Long enough for the task to drain, clean up and fail well inside it; short enough to wait out.
WINDOW = 20

NODE_PROGRAM = r"""
import os, sys, time
index = os.environ["JOB_COMPLETION_INDEX"]
print(f"node {index} starting", flush=True)
if index == os.environ.get("FAIL_INDEX"):
    print(f"node {index} is failing on purpose", flush=True)
    sys.exit(3)
time.sleep(float(os.environ.get("SLEEP", "0")))
"""


@pytest.fixture(scope="module", autouse=True)
def runtime(local_cluster: Any) -> None:
    """The TensorFlow runtime (restartPolicy Never: a failing node's pod stays Failed, where the
    torch runtime's OnFailure restarts it and the Job controller deletes it with its Job's failure)."""

    from airflow_tfjob.jobs.trainjob.runtimes import cluster_hook, install

    install(cluster_hook(str(local_cluster.kubeconfig_path)), log=lambda _: None)


def the_job(hook: Any, kind: Any, ti: TaskInstance) -> dict[str, Any]:
    selector = identity_selector(ti.dag_id, ti.task_id, ti.run_id, ti.map_index, include_handled=True)
    (job,) = hook.list_jobs(kind, "default", selector)
    return dict(job)


def phases(hook: Any, name: str, kind: Any) -> dict[str, str]:
    """The job's pods that are not being deleted, by name: their phase."""
    return {
        p["metadata"]["name"]: p["status"].get("phase")
        for p in hook.list_job_pods(name, "default", kind=kind)
        if not p["metadata"].get("deletionTimestamp")
    }


def epoch(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def gone_at(hook: Any, kind: Any, name: str) -> float:
    """When the job and every pod of it were seen gone (waited on, up to the window and a minute)."""
    wait_for(
        lambda: hook.find_job(kind, name, "default") is None
        and not hook.list_job_pods(name, "default", kind=kind),
        WINDOW + 60,
        f"{kind.kind} {name} and its pods deleted after the window",
    )
    return time.time()


def test_a_failed_tfjobs_failed_pod_stays_for_the_window_then_its_ttl_deletes_it(hook: Any) -> None:
    ti = TaskInstance()
    op = TFJobOperator(
        task_id="train", image="local/python", command=replica_command(), namespace="default",
        chief=1, worker=1, restart_policy="Never", startup_timeout=60, keep_failed_for=WINDOW,
        on_finish_action="delete",  # a failed job is kept anyway: keep_failed_for decides for it
        env={"FAIL_TYPE": "worker", "SLEEP_CHIEF": "120"},
    )  # fmt: skip
    with pytest.raises(AirflowException, match="failed"):
        op.execute(context_for(ti))

    job = the_job(hook, TFJOB, ti)
    name = job["metadata"]["name"]
    assert job["spec"]["runPolicy"]["ttlSecondsAfterFinished"] == WINDOW
    until = epoch(job["metadata"]["annotations"][ANNOTATION_KEEP_FAILED_UNTIL])
    assert until == epoch(job["status"]["completionTime"]) + WINDOW
    # The chief still ran when the worker failed: it holds a node, nobody debugs it; gone at once.
    wait_for(lambda: phases(hook, name, TFJOB) == {f"{name}-worker-0": "Failed"}, 30, "only the failed pod left")
    log = hook.read_pod_log(f"{name}-worker-0", "default", container="tensorflow")
    assert "worker is failing on purpose" in log  # kubectl logs works during the window
    assert time.time() < until

    assert gone_at(hook, TFJOB, name) >= until  # deleted by the TTL, not before the window ended
    assert "cost" in ti.xcoms  # a failed job's cost is reported too


def test_a_failed_trainjob_stays_for_the_window_then_a_batch_jobs_ttl_deletes_it(hook: Any) -> None:
    ti = TaskInstance()
    op = TrainJobOperator(
        task_id="train", runtime="tensorflow-distributed", image="x", num_nodes=2, namespace="default",
        command=[sys.executable, "-c", NODE_PROGRAM], env={"FAIL_INDEX": "1", "SLEEP": "120"},
        startup_timeout=60, keep_failed_for=timedelta(seconds=WINDOW),
    )  # fmt: skip
    with pytest.raises(AirflowException, match="failed"):
        op.execute(context_for(ti))

    job = the_job(hook, TRAINJOB, ti)
    name = job["metadata"]["name"]
    until = epoch(job["metadata"]["annotations"][ANNOTATION_KEEP_FAILED_UNTIL])
    (owner,) = job["metadata"]["ownerReferences"]
    assert (owner["apiVersion"], owner["kind"]) == ("batch/v1", "Job")
    expiry = hook.find_object("batch/v1", "jobs", owner["name"], "default")
    assert expiry["metadata"]["labels"][LABEL_KEEPS_FAILED] == name
    assert expiry["spec"]["completions"] == 0 and 0 < expiry["spec"]["ttlSecondsAfterFinished"] <= WINDOW
    wait_for(
        lambda: set(phases(hook, name, TRAINJOB).values()) == {"Failed"}, 30, "only the failed node's pod left"
    )
    (pod,) = phases(hook, name, TRAINJOB)
    assert "node 1 is failing on purpose" in hook.read_pod_log(pod, "default", container="node")
    assert time.time() < until

    # Nothing of the provider runs now: Kubernetes' TTL and garbage collection do it.
    assert gone_at(hook, TRAINJOB, name) >= until - 1  # the batch Job's TTL counts whole seconds
    assert hook.find_object("batch/v1", "jobs", owner["name"], "default") is None


def test_a_succeeded_job_is_cleaned_up_at_once_whatever_keep_failed_for_says(hook: Any) -> None:
    ti = TaskInstance()
    op = TFJobOperator(
        task_id="train", image="local/python", command=replica_command(), namespace="default",
        worker=1, startup_timeout=60, keep_failed_for=3600, on_finish_action="delete_succeeded",
    )  # fmt: skip
    result = op.execute(context_for(ti))
    assert result["state"] == "succeeded"
    assert hook.find_job(TFJOB, result["name"], "default") is None


@pytest.mark.parametrize("value", [0, -5, "1h", float("inf"), timedelta(0), 2**31])
def test_a_bad_window_is_refused_before_any_request(value: Any) -> None:
    with pytest.raises(JobValidationError, match="keep_failed_for"):
        TFJobOperator(task_id="t", image="x", worker=1, keep_failed_for=value)
