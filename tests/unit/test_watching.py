"""The list-and-watch layers on their own: what each does with a stream's end, a 410, a cut, a refusal.

The list and stream functions here are plain coroutines that play back what a server answers; the
layers over the real API server are covered by tests/integration/test_watch.py and test_hook.py.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest
from kubernetes_asyncio.client.exceptions import ApiException

from airflow_tfjob.hooks.watching import (
    Backoff,
    ListWatch,
    Next,
    WatchError,
    WatchExpired,
    as_watch_error,
    is_permanent,
    is_transient,
    reconnect_forever,
    reflect,
)


def _obj(uid: str, rv: str) -> dict:
    return {"metadata": {"uid": uid, "name": uid, "resourceVersion": rv}}


class _Server:
    """Answers to LIST and WATCH in order; each stream answer is a list of events or an exception."""

    def __init__(self, lists: list[object], streams: list[object]) -> None:
        self.lists = lists
        self.streams = streams
        self.watched_from: list[str] = []

    async def list_objects(self) -> tuple[list[dict], str]:
        answer = self.lists.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        assert isinstance(answer, tuple)
        return answer

    async def stream(self, rv: str) -> AsyncIterator[tuple[str, dict]]:
        self.watched_from.append(rv)
        if not self.streams:
            raise WatchError(403, "Forbidden", "end of the script")
        answer = self.streams.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        assert isinstance(answer, list)
        for event in answer:
            yield event


def _list_watch(server: _Server, resource: str) -> ListWatch:
    return ListWatch(
        list_objects=server.list_objects,
        stream_events=server.stream,
        on_list=lambda items: None,
        on_event=lambda etype, obj: None,
        resource=resource,
    )


async def _no_pause(_: float) -> None:
    return None


async def test_stream_end_resumes_from_the_last_resource_version_and_410_relists() -> None:
    server = _Server(
        lists=[([_obj("a", "1")], "10"), ([_obj("b", "30")], "30")],
        streams=[
            [("MODIFIED", _obj("a", "11")), ("BOOKMARK", {"metadata": {"resourceVersion": "20"}})],
            WatchExpired(410, "Expired", "too old"),
        ],
    )
    seen: list[tuple[str, str]] = []
    with pytest.raises(WatchError):
        await reflect(
            server.list_objects,
            server.stream,
            lambda etype, obj: seen.append((etype, obj["metadata"]["uid"])),
            resource="things",
        )
    # First stream from the list's version; after a normal end from the bookmark's; after 410 a relist.
    assert server.watched_from == ["10", "20", "30"]
    assert seen == [("ADDED", "a"), ("MODIFIED", "a"), ("ADDED", "b"), ("DELETED", "a")]


async def test_transient_errors_are_retried_without_relisting() -> None:
    server = _Server(
        lists=[([], "5")],
        streams=[
            ConnectionResetError("cut"),
            WatchError(500, "InternalError", "busy"),
            [("ADDED", _obj("x", "6"))],
        ],
    )
    errors: list[BaseException] = []
    lw = _list_watch(server, "things")
    with pytest.raises(WatchError) as refused:
        await lw.run_forever(on_error=errors.append, pause=_no_pause)
    assert refused.value.code == 403
    assert [type(e) for e in errors] == [ConnectionResetError, WatchError]
    assert server.watched_from == ["5", "5", "5", "6"]


@pytest.mark.parametrize("code", [401, 403, 404])
async def test_permanent_errors_are_logged_at_warning_with_verb_and_resource(
    code: int, caplog: pytest.LogCaptureFixture
) -> None:
    server = _Server(lists=[ApiException(status=code, reason="No")], streams=[])
    lw = _list_watch(server, "pods of TFJob ns/job")
    with caplog.at_level(logging.WARNING, logger="airflow_tfjob.hooks.watching"), pytest.raises(ApiException):
        await lw.run_forever(pause=_no_pause)
    (record,) = [r for r in caplog.records if r.name == "airflow_tfjob.hooks.watching"]
    assert record.levelno == logging.WARNING
    assert "watch of pods of TFJob ns/job" in record.getMessage()
    assert str(code) in record.getMessage()


async def test_a_bug_in_a_consumer_is_raised_not_retried() -> None:
    calls = 0

    async def attempt() -> Next:
        nonlocal calls
        calls += 1
        raise KeyError("bug")

    with pytest.raises(KeyError):
        await reconnect_forever(attempt, verb="watch", resource="things", backoff=Backoff(), pause=_no_pause)
    assert calls == 1


async def test_outcomes_drive_the_delay() -> None:
    waits: list[float] = []
    steps = iter(
        [Next.BACK_OFF, Next.BACK_OFF, Next.RESET_BACK_OFF, Next.IDLE, Next.FRESH, Next.BACK_OFF, Next.STOP]
    )

    async def attempt() -> Next:
        return next(steps)

    async def pause(delay: float) -> None:
        waits.append(delay)

    await reconnect_forever(
        attempt,
        verb="log stream",
        resource="r",
        backoff=Backoff(start=0.2, cap=0.5, jitter=False),
        pause=pause,
    )
    assert waits == [0.2, 0.4, 0.2, 0.4, 0.2]


def test_backoff_doubles_to_its_cap_and_jitter_stays_in_the_upper_half() -> None:
    plain = Backoff(start=1.0, cap=4.0, jitter=False)
    assert [plain.next() for _ in range(4)] == [1.0, 2.0, 4.0, 4.0]
    jittered = Backoff(start=2.0, cap=2.0)
    assert all(1.0 <= jittered.next() <= 2.0 for _ in range(50))


def test_error_classes() -> None:
    assert is_permanent(WatchError(403, "Forbidden", ""))
    assert is_permanent(ApiException(status=401))
    assert not is_permanent(WatchExpired(410, "Expired", ""))
    assert is_transient(WatchError(0, "", "stream torn"))
    assert is_transient(ApiException(status=503))
    assert is_transient(TimeoutError())
    assert not is_transient(KeyError("bug"))


def test_a_refused_list_reaches_subscribers_as_a_watch_error_with_the_servers_reason() -> None:
    refused = ApiException(status=403, reason="Forbidden")
    refused.body = '{"kind": "Status", "reason": "Forbidden", "message": "tfjobs is forbidden"}'
    error = as_watch_error(refused)
    assert (error.code, error.reason, error.message) == (403, "Forbidden", "tfjobs is forbidden")
    already = WatchError(404, "NotFound", "no such resource")
    assert as_watch_error(already) is already
    assert as_watch_error(KeyError("bug")).code == 0


# -- the shared job watch's cache (hooks/jobwatch.py): what a waiting job costs while it waits ----------


async def test_a_cached_job_is_compact_json_without_managed_fields_and_each_reader_gets_its_own_copy() -> None:
    from airflow_tfjob.hooks.jobwatch import Subscription, decode, encode

    job = {
        "metadata": {"name": "a", "resourceVersion": "7", "managedFields": [{"manager": "kubectl"}]},
        "status": {"conditions": [{"type": "Running", "status": "True"}]},
    }
    raw = encode(job)
    assert isinstance(raw, bytes) and b" " not in raw and b"managedFields" not in raw
    assert "managedFields" in job["metadata"]  # the decoded object it came from is not changed
    first, second = Subscription("a"), Subscription("a")
    for sub in (first, second):
        sub._deliver(raw)
    mine = await first.next()
    assert mine == {k: v for k, v in job.items() if k != "metadata"} | {
        "metadata": {"name": "a", "resourceVersion": "7"}
    }
    mine["status"]["conditions"].clear()  # one reader changing its copy changes nobody else's
    assert (await second.next())["status"]["conditions"] == [{"type": "Running", "status": "True"}]
    assert first.latest == decode(raw) and first.latest is not first.latest
    assert first.latest_encoded is raw
