"""TFJobOperator against the local cluster over HTTP: outcomes, retries, kill, startup timeout, cleanup."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from operator_support import (
    TaskInstance,
    context_for,
    replica_command,
    wait_for,
)

from airflow_tfjob.build.naming import identity_selector
from airflow_tfjob.constants import (
    ANNOTATION_INTENDED_CLEAN_POD_POLICY,
    ANNOTATION_RESULT_REPORTED,
    LABEL_HANDLED,
    LABEL_TRY_NUMBER,
)
from airflow_tfjob.operators.tfjob import TFJobOperator
from airflow_tfjob.version_compat import AirflowException

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240)]


def make_operator(**kwargs: Any) -> TFJobOperator:
    params: dict[str, Any] = {
        "task_id": "train",
        "image": "local/python",
        "command": replica_command(),
        "namespace": "default",
        "startup_timeout": 60,
    }
    params.update(kwargs)
    return TFJobOperator(**params)


def jobs_of(hook: Any, ti: TaskInstance, include_handled: bool = True) -> list[dict[str, Any]]:
    selector = identity_selector(
        ti.dag_id, ti.task_id, ti.run_id, ti.map_index, include_handled=include_handled
    )
    return list(hook.list_jobs("TFJob", "default", selector))


def test_success_returns_result_applies_cleanup_and_marks_reported(
    hook: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    ti = TaskInstance()
    op = make_operator(
        chief=1,
        worker=1,
        env={"SLEEP": "0.5"},
        metrics=["loss", "accuracy"],
        clean_pod_policy="All",
        log_replicas="all",
    )
    result = op.execute(context_for(ti))
    logged = "".join(capfd.readouterr())
    assert result["state"] == "succeeded"
    assert result["reason"] == "TFJobSucceeded"
    assert result["namespace"] == "default" and result["uid"]
    assert result["start_time"] and result["completion_time"]
    assert set(result["replica_statuses"]) == {"Chief", "Worker"}
    assert float(result["metrics"]["loss"]) == 0.25
    assert ti.xcoms["metrics"] == result["metrics"]
    job = hook.get_job("TFJob", result["name"], "default")
    annotations = job["metadata"]["annotations"]
    assert annotations[ANNOTATION_RESULT_REPORTED] == "true"
    assert annotations[ANNOTATION_INTENDED_CLEAN_POD_POLICY] == "All"
    # Submitted without a cleanup policy; the task applied "All" itself once the logs were read.
    assert job["spec"]["runPolicy"]["cleanPodPolicy"] == "None"
    wait_for(lambda: not hook.list_job_pods(result["name"], "default"), 30, "pods deleted by cleanup")
    assert "replica chief done" in logged


@pytest.mark.parametrize(
    ("replicas", "failing"),
    [
        ({"chief": 1, "worker": 1}, "chief"),
        ({"chief": 1, "ps": 1, "worker": 1}, "ps"),
        ({"chief": 1, "worker": 2}, "worker"),
        ({"chief": 1, "worker": 1, "evaluator": 1}, "evaluator"),
    ],
)
def test_failure_of_each_replica_type_fails_the_task(
    hook: Any, replicas: dict[str, int], failing: str
) -> None:
    ti = TaskInstance()
    op = make_operator(**replicas, env={"FAIL_TYPE": failing, "SLEEP": "30"}, on_finish_action="delete")
    with pytest.raises(AirflowException) as raised:
        op.execute(context_for(ti))
    canonical = {"chief": "Chief", "ps": "PS", "worker": "Worker", "evaluator": "Evaluator"}[failing]
    message = str(raised.value)
    assert "TFJobFailed" in message
    assert f"failing replicas: {canonical}" in message
    # on_finish_action="delete": nothing of the failed job is left running.
    wait_for(lambda: not jobs_of(hook, ti), 60, "failed job deleted")


def test_restart_then_success_with_on_failure(hook: Any, tmp_path: Path) -> None:
    ti = TaskInstance()
    op = make_operator(
        worker=1, restart_policy="OnFailure", env={"FAIL_ONCE_MARKER": str(tmp_path / "failed-once")}
    )
    result = op.execute(context_for(ti))
    assert result["state"] == "succeeded"
    pods = hook.list_job_pods(result["name"], "default")
    restarts = [cs.get("restartCount", 0) for p in pods for cs in p["status"].get("containerStatuses", [])]
    assert max(restarts) >= 1


def test_startup_timeout_fails_with_scheduling_reason_and_deletes_job(hook: Any) -> None:
    ti = TaskInstance()
    op = make_operator(worker=1, gpus=64, startup_timeout=5)
    with pytest.raises(AirflowException) as raised:
        op.execute(context_for(ti))
    message = str(raised.value)
    assert "startup_timeout" in message
    assert "Unschedulable" in message or "nvidia.com/gpu" in message
    wait_for(lambda: not jobs_of(hook, ti), 60, "unschedulable job deleted")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still answers kill(0); its state letter says it is gone.
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split(") ")[-1][0] != "Z"


def test_kill_deletes_job_pods_and_processes(hook: Any, tmp_path: Path) -> None:
    ti = TaskInstance()
    op = make_operator(chief=1, worker=1, env={"SLEEP": "120", "PID_DIR": str(tmp_path)})
    errors: list[BaseException] = []

    def run() -> None:
        try:
            op.execute(context_for(ti))
        except BaseException as error:
            errors.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    pids = wait_for(
        lambda: (
            [int(p.read_text()) for p in tmp_path.glob("*.pid")]
            if len(list(tmp_path.glob("*.pid"))) == 2
            else []
        ),
        60,
        "both replicas running",
    )
    job = jobs_of(hook, ti)[0]
    op.on_kill()
    assert hook.find_job("TFJob", job["metadata"]["name"], "default") is None
    assert hook.list_job_pods(job["metadata"]["name"], "default") == []
    wait_for(lambda: not any(_alive(pid) for pid in pids), 30, "replica processes stopped")
    thread.join(60)
    assert not thread.is_alive()
    assert errors, "execute must not succeed once its job was deleted"


def test_retry_after_worker_crash_reattaches_to_the_same_job(hook: Any) -> None:
    first = TaskInstance()
    op = make_operator(worker=1, env={"SLEEP": "2"})
    context = context_for(first)
    # The first try creates the job, then its worker "dies" before following it.
    created = op.find_or_create(hook, op.build_manifest(context), context)
    second = first.next_try()
    result = make_operator(worker=1, env={"SLEEP": "2"}).execute(context_for(second))
    assert result["name"] == created["metadata"]["name"]
    assert result["uid"] == created["metadata"]["uid"]
    assert result["state"] == "succeeded"
    assert len(jobs_of(hook, first)) == 1


def test_retry_after_a_reported_failure_trains_again(hook: Any) -> None:
    first = TaskInstance()
    with pytest.raises(AirflowException):
        make_operator(worker=1, env={"FAIL_TYPE": "worker"}).execute(context_for(first))
    failed = jobs_of(hook, first)
    assert len(failed) == 1
    assert failed[0]["metadata"]["annotations"][ANNOTATION_RESULT_REPORTED] == "true"
    result = make_operator(worker=1).execute(context_for(first.next_try()))
    assert result["state"] == "succeeded"
    jobs = {j["metadata"]["name"]: j for j in jobs_of(hook, first)}
    assert len(jobs) == 2
    old = jobs[failed[0]["metadata"]["name"]]
    assert old["metadata"]["labels"][LABEL_HANDLED] == "true"
    assert jobs[result["name"]]["metadata"]["labels"][LABEL_TRY_NUMBER] == "2"


def test_a_foreign_job_with_the_same_name_is_refused_before_anything_is_created(hook: Any) -> None:
    name = f"foreign-{TaskInstance().run_id[-8:]}"
    foreign = make_operator(worker=1, name=name, render_only=True).execute(context_for(TaskInstance()))
    body = foreign["manifest"]
    body["metadata"]["labels"] = {"team": "someone-else"}
    body["metadata"]["annotations"] = {}
    body["spec"]["runPolicy"] = {"managedBy": "kueue.x-k8s.io/multikueue"}  # never runs
    hook.create_job("TFJob", body, "default")
    ti = TaskInstance()
    try:
        with pytest.raises(AirflowException, match="already exists and was not created by this task"):
            make_operator(worker=1, name=name).execute(context_for(ti))
        assert jobs_of(hook, ti) == []
        assert hook.get_job("TFJob", name, "default")["metadata"]["labels"] == {"team": "someone-else"}
    finally:
        hook.delete_job("TFJob", name, "default")


def test_render_only_submits_nothing_and_redacts_secrets(
    hook: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    ti = TaskInstance()
    op = make_operator(
        worker=2,
        ps=1,
        secret_env={"API_TOKEN": "s3cr3t-value"},
        args=["--config=conf.yaml"],
        render_only=True,
    )
    result = op.execute(context_for(ti))
    logged = "".join(capfd.readouterr())
    assert result["rendered_only"] is True
    text = json.dumps(result)
    assert "s3cr3t-value" not in text and "s3cr3t-value" not in logged
    container = result["manifest"]["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]
    assert container["args"] == ["--config=conf.yaml"]
    assert jobs_of(hook, ti) == []


def test_secrets_never_reach_logs_or_xcom_of_a_real_run(hook: Any, capfd: pytest.CaptureFixture[str]) -> None:
    ti = TaskInstance()
    op = make_operator(worker=1, secret_env={"API_TOKEN": "s3cr3t-value"}, args=["--config=conf.yaml"])
    result = op.execute(context_for(ti))
    logged = "".join(capfd.readouterr())
    assert "s3cr3t-value" not in logged
    assert "s3cr3t-value" not in json.dumps(result) + json.dumps(ti.xcoms)
    # The templated argument ending in .yaml reached the replica as the string it is.
    assert "argv=['--config=conf.yaml']" in logged


def test_ttl_zero_deletes_the_job_after_logs_are_read(hook: Any) -> None:
    ti = TaskInstance()
    result = make_operator(worker=1, ttl_seconds_after_finished=0).execute(context_for(ti))
    assert result["state"] == "succeeded"
    wait_for(lambda: not jobs_of(hook, ti), 60, "job deleted by TTL 0")


def test_positive_ttl_is_handed_to_the_controller(hook: Any) -> None:
    ti = TaskInstance()
    result = make_operator(worker=1, ttl_seconds_after_finished=3600).execute(context_for(ti))
    job = hook.get_job("TFJob", result["name"], "default")
    assert job["spec"]["runPolicy"]["ttlSecondsAfterFinished"] == 3600


@pytest.mark.parametrize("deferrable", [False, True])
def test_every_line_not_shown_is_counted_in_the_task_log_and_the_xcom(
    hook: Any, deferrable: bool, capfd: pytest.CaptureFixture[str]
) -> None:
    """A replica printing faster than the task log takes: the lines dropped are announced where they
    were dropped, and the same counts reach XCom ``log_lines_dropped``, in both modes."""
    import re
    import sys

    from operator_support import defer, fire

    script = "import sys\nfor i in range(3000): sys.stdout.write(f'fast {i}\\n')\n"
    ti = TaskInstance()
    op = make_operator(
        command=[sys.executable, "-c", script],
        log_replicas="all",
        log_rate_per_replica=50,
        deferrable=deferrable,
    )
    context = context_for(ti)
    if deferrable:
        result = op.execute_complete(context, fire(defer(op, ti, context)))
    else:
        result = op.execute(context)
    logged = "".join(capfd.readouterr())
    assert result["state"] == "succeeded"
    dropped = ti.xcoms["log_lines_dropped"]
    assert set(dropped) == {"worker-0"} and dropped["worker-0"]["rate"] > 0
    noticed = sum(int(n) for n in re.findall(r"--- (\d+) lines dropped \(rate limit 50 lines/s\)", logged))
    shown = len(set(re.findall(r"\[worker-0\] fast (\d+)", logged)))
    assert noticed == sum(dropped["worker-0"].values())
    assert shown + noticed == 3000
