"""A trigger's requests to the triggerer's supervisor: on the loop, through the channel's async send, each
finished even when its caller is cancelled (an answer left unread would be read by the next send, the
failure apache/airflow#64620 describes). The channel here stands in for the triggerer's: it answers
each request in the order sent, as the real one does, and records what it got."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest
from airflow.sdk.execution_time import task_runner
from airflow.sdk.execution_time.comms import GetTaskStates, MaskSecret

from airflow_tfjob.hooks import supervisor


class Channel:
    """One request at a time (the real channel's lock); the answer comes after ``gate`` opens."""

    def __init__(self, answers: dict[str, Any] | None = None) -> None:
        self.lock = asyncio.Lock()
        self.sent: list[Any] = []
        self.answered: list[Any] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.got = asyncio.Event()
        self.answers = answers or {}

    async def asend(self, message: Any) -> Any:
        async with self.lock:
            self.sent.append(message)
            self.got.set()
            await self.gate.wait()
            answer = self.answers.get(type(message).__name__)
            self.answered.append(message)
            return answer


@pytest.fixture
def channel(monkeypatch: pytest.MonkeyPatch) -> Channel:
    made = Channel()
    monkeypatch.setattr(task_runner, "SUPERVISOR_COMMS", made, raising=False)
    return made


async def test_a_secret_is_masked_here_and_sent_to_the_supervisor(channel: Channel) -> None:
    from airflow_tfjob.build.secrets import masked

    await supervisor.mask("trigger-secret-4711")
    assert [type(m) for m in channel.sent] == [MaskSecret]
    assert channel.sent[0].value == "trigger-secret-4711"
    assert masked("token trigger-secret-4711 seen") == "token *** seen"


async def test_a_cancelled_caller_does_not_cut_its_send_short(channel: Channel) -> None:
    channel.gate.clear()
    caller = asyncio.create_task(supervisor.mask("cancelled-secret-0815"))
    await asyncio.wait_for(channel.got.wait(), 5)
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    channel.gate.set()
    # The send still reads its answer: the next request gets its own, not the cancelled one's.
    later = asyncio.create_task(supervisor.send(GetTaskStates(dag_id="d", task_ids=["t"], run_ids=["r"])))
    await asyncio.wait_for(later, 5)
    assert [type(m) for m in channel.answered] == [MaskSecret, GetTaskStates]


@pytest.mark.parametrize(("map_index", "key"), [(-1, "train"), (None, "train"), (3, "train_3")])
async def test_the_task_state_is_read_under_the_answers_key(
    monkeypatch: pytest.MonkeyPatch, map_index: int | None, key: str
) -> None:
    answer = SimpleNamespace(task_states={"run-1": {key: "failed", "other": "running"}})
    channel = Channel({"GetTaskStates": answer})
    monkeypatch.setattr(task_runner, "SUPERVISOR_COMMS", channel, raising=False)
    ti = SimpleNamespace(dag_id="dag", task_id="train", run_id="run-1", map_index=map_index)
    assert await supervisor.task_state(ti) == "failed"
    sent = channel.sent[0]
    assert (sent.dag_id, sent.task_ids, sent.run_ids) == ("dag", ["train"], ["run-1"])
    assert sent.map_index == (-1 if map_index is None else map_index)


async def test_an_answer_without_the_task_and_no_channel_say_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    ti = SimpleNamespace(dag_id="dag", task_id="train", run_id="run-1", map_index=-1)
    monkeypatch.setattr(task_runner, "SUPERVISOR_COMMS", Channel({"GetTaskStates": None}), raising=False)
    assert await supervisor.task_state(ti) is None
    monkeypatch.setattr(task_runner, "SUPERVISOR_COMMS", None, raising=False)
    assert await supervisor.task_state(ti) is None
    await supervisor.mask("no-channel-secret-1234")  # masked here only, and no error

