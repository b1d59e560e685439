"""The follow options of a task: built once from its checked parameters, sent to the trigger whole (the
deadline once, the start-up clock relative from the deferral), read back from the previous release's
kwargs in one place, and continued by the drain; ``log_replicas`` parsed once on the way."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from airflow_tfjob.follow.logs_parsing import LogSelection
from airflow_tfjob.follow.outcome import FollowOptions
from airflow_tfjob.operators import follow_runs
from airflow_tfjob.operators.runs import TaskTry
from airflow_tfjob.operators.tfjob import TFJobOperator
from airflow_tfjob.triggers import runs
from airflow_tfjob.triggers.deferral import KubeflowJobTrigger

RECORDED = Path(__file__).parents[1] / "integration" / "recorded" / "triggers_0.1.0_015e832.json"
OPERATOR_CASES = ("tfjob", "pytorchjob", "tfjob_on_trainjob")
CONNECTION = {"kubernetes_conn_id": "k8s", "cluster_context": None, "config_file": None, "in_cluster": None}


def _recorded(case: str) -> dict[str, Any]:
    return dict(json.loads(RECORDED.read_text())[case]["kwargs"])


@pytest.mark.parametrize("case", OPERATOR_CASES)
def test_the_previous_releases_kwargs_are_read_into_the_options(case: str) -> None:
    kwargs = _recorded(case)
    kwargs["deadline"] = kwargs["deferred_at"] + 3600.0  # 0.1.0 sent it beside the options' own
    trigger = KubeflowJobTrigger(**kwargs)
    options = FollowOptions.from_dict(trigger.options)
    assert options.deadline == trigger.deadline == kwargs["deferred_at"] + 3600.0
    # 0.1.0's absolute start-up deadline says when the relative clock started: at the deferral.
    assert options.startup_timeout == kwargs["options"]["startup_timeout"] == 60
    assert options.startup_from == pytest.approx(kwargs["deferred_at"])
    assert options.selection == LogSelection.parse(kwargs["options"]["log_replicas"])
    assert trigger.kind.kind == kwargs["options"]["kind"]
    # Written again in this release's form, it reads back to the same trigger.
    _, written = trigger.serialize()
    assert "deadline" not in written and "startup_deadline" not in written
    again = KubeflowJobTrigger(**json.loads(json.dumps(written)))
    assert FollowOptions.from_dict(again.options) == options and again.serialize() == trigger.serialize()


def _operator(**kwargs: Any) -> TFJobOperator:
    return TFJobOperator(task_id="once", image="x", worker=2, **kwargs)


def test_the_task_builds_its_options_once_and_the_trigger_carries_them_whole(monkeypatch: Any) -> None:
    op = _operator(log_replicas="worker:1", startup_timeout=90, queue_timeout=30,
                   execution_timeout=timedelta(hours=1))  # fmt: skip
    parsed: list[Any] = []
    parse = LogSelection.parse.__func__  # type: ignore[attr-defined]
    monkeypatch.setattr(
        LogSelection, "parse", classmethod(lambda cls, spec: parsed.append(spec) or parse(cls, spec))
    )
    task_try = TaskTry(op)
    task_try.started = 1_000.0
    options = op.follow_options()
    assert op.follow_options() is options  # the build manifest's check and the follow read the same
    assert task_try.follow_options() is options  # the operator's steps are its current try's
    assert options.selection == LogSelection(replicas=frozenset({("worker", 1)}))
    assert (options.deadline, options.startup_timeout, options.parts["queue_timeout"]) == (4_600.0, 90, 30)
    trigger, _ = follow_runs.trigger_for(
        "j", "ns", options, CONNECTION, delete_on_kill=True, kill_grace_period=1
    )
    assert parsed == ["worker:1"], "log_replicas is parsed once on the worker"
    _, kwargs = trigger.serialize()
    assert "deadline" not in kwargs and "startup_deadline" not in kwargs
    sent = kwargs["options"]
    assert sent["deadline"] == 4_600.0 and sent["startup_timeout"] == 90 and sent["startup_from"] is None
    assert sent["log_replicas"] == "worker:1" and sent["report_missing_metrics"] is False
    # The drain continues with the trigger's options (in its event), holding the ended job to no clock.
    drained = FollowOptions.from_dict(runs.payload(trigger, "succeeded", "")["options"]).for_drain()
    assert (drained.deadline, drained.startup_timeout) == (None, None)
    assert drained.selection == options.selection and drained.parts["queue_timeout"] == 30


def test_a_bad_follow_parameter_is_refused_when_the_options_are_built() -> None:
    from airflow_tfjob.build.validation import JobValidationError

    op = _operator(progress={"metric": "epoch", "total": "epochs"})  # no such hyperparameter
    with pytest.raises(JobValidationError, match=r"progress\.total"):
        op.follow_options()


def test_log_selection_travels_as_text_that_parses_back_to_it() -> None:
    for text in ("master", "all", "worker", "chief,worker:0", "ps:1,master,evaluator"):
        selection = LogSelection.parse(text)
        assert LogSelection.parse(selection.spec) == selection
        assert FollowOptions.from_dict(FollowOptions(log_replicas=selection).to_dict()).selection == selection


def test_the_drain_continues_with_the_options_the_trigger_sent(monkeypatch: Any) -> None:
    from airflow_tfjob.follow.outcome import FollowOutcome

    drained: list[FollowOptions] = []

    def drain(hook: Any, name: str, namespace: str, options: FollowOptions, log: Any, outcome: Any) -> Any:
        drained.append(options)
        return outcome

    monkeypatch.setattr(follow_runs, "drain", drain)
    op = _operator(log_replicas="worker:1")
    monkeypatch.setattr(op, "get_async_hook", lambda: None)
    outcome = FollowOutcome("succeeded")
    sent = FollowOptions.of(log_replicas="all", report_missing_metrics=False).to_dict()
    TaskTry(op).drain("j", "ns", {"options": sent}, outcome)
    # An event of the previous release carries no options: the task builds its own.
    TaskTry(op).drain("j", "ns", {}, outcome)
    assert [options.selection.spec for options in drained] == ["all", "worker:1"]
