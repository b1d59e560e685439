"""The same job in synchronous and in deferrable mode gives the same result and the same task log.

Deferrable mode runs as Airflow runs it, in-process: the operator defers, the trigger (rebuilt from its
serialized kwargs) runs to its one event, and a fresh operator instance resumes in execute_complete.
Everything either mode writes to the task log (the operator's lines in the worker, the trigger's in
the triggerer) is recorded, so the two logs can be compared line by line.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import sys
from typing import Any

import pytest
from airflow_compat import AirflowException, TaskDeferred
from operator_support import TaskInstance, context_for, replica_command

from airflow_tfjob.operators.tfjob import TFJobOperator
from airflow_tfjob.triggers.deferral import KubeflowJobTrigger

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240)]

# The chief reports its metrics and ends the job after a second, while the trigger follows it; the
# worker is still training then (the job's first succeeded status counts it active) and ends later.
JOB: dict[str, Any] = {
    "chief": 1,
    "worker": 1,
    "image": "local/python",
    "command": replica_command(),
    "env": {"SLEEP_CHIEF": "1", "SLEEP_WORKER": "3"},
    "metrics": ["accuracy", "loss"],
    "log_replicas": "all",
    "namespace": "default",
    "startup_timeout": 60,
}
# What necessarily differs between two runs: identity and times.
PER_RUN_FIELDS = ("name", "uid", "start_time", "completion_time")
# The cost's figures that are times (and hours): what the job requested is compared, not how long it took.
COST_TIMINGS = ("queued_seconds", "running_seconds", "hours")


class TaskLog(logging.Handler):
    """The task log as a reader sees it (INFO and above, Airflow's default): one entry per line, in order."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.extend(record.getMessage().split("\n"))

    def attach(self, obj: TFJobOperator | KubeflowJobTrigger) -> None:
        logger = logging.getLogger(f"test.parity.{id(self)}")
        logger.setLevel(logging.INFO)
        logger.propagate = False
        if self not in logger.handlers:
            logger.addHandler(self)
        if isinstance(obj, TFJobOperator):
            obj._cached_logger = logger  # type: ignore[assignment]
        else:
            obj._log = logger  # type: ignore[assignment]

    def operator_lines(self, job_name: str) -> list[str]:
        """The lines outside replica output and events; the job's name as <job>. An event's repeat
        count (" (x2)") is dropped: how often the cluster repeated an event before the diagnosis read
        it is timing, not mode (a failed replica's event was seen once in one run, twice in another);
        so are the figures of the cost line (its words stay compared)."""
        lines: list[str] = []
        for line in self.lines:
            if not line.startswith("["):
                line = re.sub(r" \(x\d+\)", "", line.replace(job_name, "<job>"))
                if line.startswith("Cost of "):
                    line = re.sub(r"\d+(\.\d+)?(e-?\d+)?", "<n>", line)
                lines.append(line)
        return lines

    def replica_lines(self) -> dict[str, list[str]]:
        by_replica: dict[str, list[str]] = {}
        for line in self.lines:
            found = re.match(r"^\[((?:chief|worker|ps|master|evaluator)-\d+)\] (.*)$", line)
            if found:
                by_replica.setdefault(found.group(1), []).append(found.group(2))
        return by_replica


def _operator(log: TaskLog, **kwargs: Any) -> TFJobOperator:
    op = TFJobOperator(task_id="parity", **{**JOB, **kwargs})
    log.attach(op)
    return op


def run_sync(ti: TaskInstance, log: TaskLog, **kwargs: Any) -> Any:
    return _operator(log, **kwargs).execute(context_for(ti))


def run_deferred(ti: TaskInstance, log: TaskLog, **kwargs: Any) -> Any:
    with pytest.raises(TaskDeferred) as deferred:
        _operator(log, deferrable=True, **kwargs).execute(context_for(ti))
    classpath, serialized = deferred.value.trigger.serialize()
    assert classpath.endswith(".KubeflowJobTrigger")
    trigger = KubeflowJobTrigger(**serialized)  # what the triggerer runs: rebuilt from the database's kwargs
    log.attach(trigger)

    async def first_event() -> dict[str, Any]:
        async for event in trigger.run():
            return dict(event.payload)
        raise AssertionError("the trigger ended without an event")

    event = asyncio.run(first_event())
    # The worker that resumes the task has a fresh operator, without the deferring one's state.
    return _operator(log, deferrable=True, **kwargs).execute_complete(context_for(ti), event)


def _comparable(result: dict[str, Any]) -> dict[str, Any]:
    """The result without what differs between two runs of one job (the job's name in messages too)."""
    comparable = {k: v for k, v in result.items() if k not in PER_RUN_FIELDS}
    if comparable.get("cost"):
        cost = comparable["cost"]
        comparable["cost"] = {k: v for k, v in cost.items() if not any(t in k for t in COST_TIMINGS)}
    text = json.dumps(comparable)
    return dict(json.loads(text.replace(result["name"], "<job>")))


def test_deferred_result_and_task_log_are_the_synchronous_ones(k8s_conn: str) -> None:
    sync_ti, sync_log = TaskInstance(dag_id="parity_sync"), TaskLog()
    deferred_ti, deferred_log = TaskInstance(dag_id="parity_deferred"), TaskLog()
    sync = run_sync(sync_ti, sync_log)
    deferred = run_deferred(deferred_ti, deferred_log)

    assert sync["state"] == "succeeded"
    assert sync["metrics"] == {"accuracy": 0.875, "loss": 0.25, "missing": []}
    ended = {"active": 0, "succeeded": 1, "failed": 0}
    assert sync["replica_statuses"] == {"Chief": ended, "Worker": ended}
    sync_fields, deferred_fields = _comparable(sync), _comparable(deferred)
    differing = {
        key: {"deferred": deferred_fields.get(key), "sync": sync_fields.get(key)}
        for key in {*sync_fields, *deferred_fields}
        if deferred_fields.get(key) != sync_fields.get(key)
    }
    assert differing == {}
    assert deferred_ti.xcoms["metrics"] == sync_ti.xcoms["metrics"]

    # Every replica line once, in the replica's order, and nothing else under a replica's prefix
    # (no resumption marker: an ordinary resumption repeats nothing).
    assert deferred_log.replica_lines() == sync_log.replica_lines()
    assert set(sync_log.replica_lines()) == {"chief-0", "worker-0"}
    _assert_same_operator_lines(sync_log, sync["name"], deferred_log, deferred["name"])
    # The submitted job in one line (the manifest is at DEBUG, below what the task log shows).
    assert sync_log.operator_lines(sync["name"])[0] == (
        "Creating TFJob default/<job>: 1 Chief, 1 Worker; image local/python (cleanPodPolicy None and TTL "
        "None applied by this task once logs are read; the manifest is logged at DEBUG)"
    )
    for log in (sync_log, deferred_log):
        assert not [line for line in log.lines if "never reported" in line or "may appear again" in line]
        assert not [line for line in log.lines if "triggerer restarted" in line]


def _assert_same_operator_lines(sync_log: TaskLog, sync_name: str, deferred_log: TaskLog, deferred_name: str) -> None:
    """The operator's own lines (and the diagnosis): the same, but for the one saying the task deferred."""
    deferred_lines = deferred_log.operator_lines(deferred_name)
    assert deferred_lines[1].startswith("Deferring while TFJob default/<job> runs")
    assert deferred_lines[:1] + deferred_lines[2:] == sync_log.operator_lines(sync_name)


def test_a_failed_job_fails_the_task_alike_in_both_modes(k8s_conn: str) -> None:
    """The same failure message and diagnosis, the metrics pushed, and the warning that the metrics
    were never reported written once (the trigger leaves it to the drain, which has the final view)."""
    failing: dict[str, Any] = {"env": {"FAIL_TYPE": "worker", "SLEEP_CHIEF": "60"}, "on_finish_action": "delete"}
    sync_ti, sync_log = TaskInstance(dag_id="parity_sync"), TaskLog()
    deferred_ti, deferred_log = TaskInstance(dag_id="parity_deferred"), TaskLog()
    with pytest.raises(AirflowException) as sync_error:
        run_sync(sync_ti, sync_log, **failing)
    with pytest.raises(AirflowException) as deferred_error:
        run_deferred(deferred_ti, deferred_log, **failing)

    names = [re.search(r"TFJob default/(\S+) failed", str(e.value)) for e in (sync_error, deferred_error)]
    assert names[0] and names[1], (sync_error.value, deferred_error.value)
    sync_name, deferred_name = names[0].group(1), names[1].group(1)
    assert "failing replicas: Worker" in str(sync_error.value)
    shapes = [re.sub(r" \(x\d+\)", "", str(e.value).replace(n, "<job>"))
              for e, n in ((sync_error, sync_name), (deferred_error, deferred_name))]
    assert shapes[1] == shapes[0]
    assert deferred_ti.xcoms["metrics"] == sync_ti.xcoms["metrics"] == {"missing": ["accuracy", "loss"]}
    assert deferred_log.replica_lines() == sync_log.replica_lines()
    _assert_same_operator_lines(sync_log, sync_name, deferred_log, deferred_name)
    for log in (sync_log, deferred_log):
        assert log.lines.count("metrics never reported by the master replica: accuracy, loss") == 1
        # The diagnosis once (the follow core sank a copy before the operator logged it at ERROR).
        headers = [line for line in log.lines if line.startswith("=== ")]
        assert headers == ["=== worker-0 failed: Error, exit code 1 ==="], log.lines


# Prints `epoch=N` for N up to --epochs (the hyperparameter), as the training examples do.
EPOCHS_PROGRAM = r"""
import sys, time
epochs = int(next(a for a in sys.argv if a.startswith("--epochs=")).split("=", 1)[1])
for epoch in range(1, epochs + 1):
    time.sleep(0.2)
    print(f"epoch={epoch} loss={1 / epoch:.4f}", flush=True)
"""


def test_progress_lines_and_timeline_alike_in_both_modes(k8s_conn: str) -> None:
    """The total read from a hyperparameter; one line per fifth (each a tenth crossed), whichever
    process (triggerer or worker) read the epoch; the result's timeline holds every epoch once."""
    job: dict[str, Any] = {
        "command": [sys.executable, "-c", EPOCHS_PROGRAM],
        "hyperparameters": {"epochs": 5},
        "progress": {"metric": "epoch", "total": "epochs"},
        "env": {},
        "metrics": [],
    }
    results, logs = [], []
    for run, dag_id in ((run_sync, "progress_sync"), (run_deferred, "progress_deferred")):
        log = TaskLog()
        results.append(run(TaskInstance(dag_id=dag_id), log, **job))
        logs.append(log)
    for result, log in zip(results, logs, strict=True):
        shown = [line for line in log.lines if line.startswith("[progress] ")]
        assert [re.sub(r"\)(, .*)?$", ")", line) for line in shown] == [
            f"[progress] progress: epoch {n}/5 ({n * 20}%)" for n in range(1, 6)
        ]
        assert shown[-1].endswith(", done")
        progress = result["progress"]
        assert [value for _, value in progress["timeline"]] == [1.0, 2.0, 3.0, 4.0, 5.0]
        assert (progress["metric"], progress["total"], progress["percent"]) == ("epoch", 5.0, 100.0)
        assert progress["eta_seconds"] == 0.0 and progress["rate_per_second"] > 0
