"""A follow part added as the contract promises (follow/parts.py): one new class and one registry line.

The part below is written here, against ``FollowPart`` alone, and registered by one line (the test's
``monkeypatch`` of ``integrations.parts.PARTS``, the registry the operator and the trigger read). With
nothing else changed, it sees the master's lines in both modes, its section travels in the trigger's
event, a drain restores it from there, the operator's ``result_from_outcome`` reads it, and its own
option (declared by the part, not by FollowOptions) reaches it.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from typing import Any

import pytest
from logs_support import ListSink, job, replica
from operator_support import TaskInstance, context_for, defer, fire
from watch_support import unique

from airflow_tfjob.follow.core import follow_job
from airflow_tfjob.follow.outcome import FollowOptions, FollowOutcome
from airflow_tfjob.follow.parts import Follow, FollowPart
from airflow_tfjob.hooks.kubeflow_job import AsyncKubeflowJobHook
from airflow_tfjob.integrations import parts as registry
from airflow_tfjob.operators.tfjob import TFJobOperator

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240), pytest.mark.usefixtures("k8s_conn")]

LINES = 7
PROGRAM = f"for i in range({LINES}): print(f'step {{i}}', flush=True)"


@dataclass(frozen=True)
class LineOptions:
    count_only: str = ""  # count only the lines that contain it


class LineCounter(FollowPart):
    """Counts the master's lines; says so at the end; a drain continues the earlier count."""

    section = "test_lines"
    options_type = LineOptions
    reads_master_lines = True

    def __init__(self, follow: Follow, count: int) -> None:
        self.sink = follow.sink
        self.count = count
        self.only = follow.options.read(LineOptions).count_only

    @classmethod
    def start(cls, follow: Follow) -> LineCounter:
        earlier = cls.earlier_section(follow) or {}
        return cls(follow, int(earlier.get("count", 0)))

    def on_master_line(self, ts: int, text: str, *, shown: bool) -> None:
        self.count += self.only in text

    def finish(self, outcome: FollowOutcome) -> None:
        self.sink(f"[lines] {self.count} master lines")

    def save(self) -> dict[str, Any]:
        return {"count": self.count}


class CountingOperator(TFJobOperator):
    def result_from_outcome(self, outcome: FollowOutcome, context: Any) -> Any:
        return outcome.part("test_lines")


@pytest.fixture(autouse=True)
def registered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "PARTS", (*registry.PARTS, LineCounter))  # the one registry line


def make(**kwargs: Any) -> CountingOperator:
    params: dict[str, Any] = {
        "task_id": "counts",
        "image": "local/python",
        "command": [sys.executable, "-c", PROGRAM],
        "namespace": "default",
        "worker": 1,
        "startup_timeout": 60,
    }
    return CountingOperator(**{**params, **kwargs})


def test_sync_the_part_sees_the_master_lines_and_its_section_is_the_result(
    capfd: pytest.CaptureFixture[str],
) -> None:
    assert make().execute(context_for(TaskInstance())) == {"count": LINES}
    assert f"[lines] {LINES} master lines" in "".join(capfd.readouterr())


def test_deferred_its_section_travels_in_the_event_and_a_drain_restores_it() -> None:
    ti = TaskInstance()
    op = make(deferrable=True)
    event = fire(defer(op, ti))
    assert event["event"] == "succeeded"
    assert event["parts"]["test_lines"] == {"count": LINES}
    assert FollowOutcome.from_dict(event).part("test_lines") == {"count": LINES}
    assert op.execute_complete(context_for(ti), event) == {"count": LINES}

    # A drain continues from the section the trigger saved: nothing is left to read after its cursors,
    # so the count it ends with is the saved one (made different here to tell them apart).
    again = TaskInstance()
    op = make(deferrable=True)
    event = fire(defer(op, again))
    event["parts"]["test_lines"] = {"count": 100}
    event["logs_read"] = False
    assert op.execute_complete(context_for(again), event) == {"count": 100}


def test_the_part_is_not_made_without_the_registry_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "PARTS", tuple(p for p in registry.PARTS if p is not LineCounter))
    assert make().execute(context_for(TaskInstance())) is None


def test_the_options_know_no_part() -> None:
    """The part needed no option field: FollowOptions is unchanged by it (its sections travel generically)."""
    assert "test_lines" not in FollowOptions.__dataclass_fields__
    assert "test_lines" not in FollowOutcome.__dataclass_fields__


def test_its_own_option_reaches_it_through_the_trigger_s_wire_form(k8s_conn: str) -> None:
    """The option travels flat, as the trigger's kwargs carry options, and the part alone reads it."""
    options = FollowOptions.from_dict(FollowOptions.of(count_only="step 3").to_dict())
    hook = AsyncKubeflowJobHook(conn_id=k8s_conn)
    body = job(unique("parts"), {"Worker": replica(PROGRAM)})
    name = body["metadata"]["name"]

    async def run() -> FollowOutcome:
        await hook.create_job("TFJob", body, "default")
        try:
            return await follow_job(hook, name, "default", options, ListSink(), parts=registry.PARTS)
        finally:
            await hook.delete_job("TFJob", name, "default")

    outcome = asyncio.run(run())
    assert outcome.event == "succeeded" and outcome.part("test_lines") == {"count": 1}
