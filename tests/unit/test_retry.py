"""The hooks' retry policy: what is retried, what is ambiguous, how long it waits and when it gives up."""

from __future__ import annotations

import email.utils
import time
from collections.abc import Callable
from typing import Any

import aiohttp
import pytest
import urllib3.exceptions
from kubernetes.client.rest import ApiException as SyncApiException
from kubernetes_asyncio.client.exceptions import ApiException as AsyncApiException

from airflow_tfjob.hooks.retry import (
    AmbiguousCreate,
    ApiCallFailed,
    RetryPolicy,
    classify,
    retry_after,
)


class Recorder:
    """A logger that keeps what it was asked to log."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.args: list[tuple[Any, ...]] = []

    def warning(self, msg: str, *args: Any) -> None:
        self.args.append(args)
        self.lines.append(msg % args)


def api_error(status: int, retry_after_value: str | None = None, *, sync: bool = True) -> Exception:
    cls = SyncApiException if sync else AsyncApiException
    exc = cls(status=status, reason={429: "Too Many Requests", 503: "Service Unavailable"}.get(status, "x"))
    exc.headers = {"Retry-After": retry_after_value} if retry_after_value is not None else {}
    return exc


def failing(errors: list[Exception], result: Any = "ok") -> tuple[Callable[[], Any], list[int]]:
    calls: list[int] = []

    def fn() -> Any:
        calls.append(1)
        if len(calls) <= len(errors):
            raise errors[len(calls) - 1]
        return result

    return fn, calls


def connector_error() -> aiohttp.ClientConnectorError:
    from aiohttp.client_reqrep import ConnectionKey

    key = ConnectionKey("127.0.0.1", 1, False, True, None, None, None)
    return aiohttp.ClientConnectorError(key, ConnectionRefusedError(111, "refused"))


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504])
@pytest.mark.parametrize("kind", ["read", "write"])
def test_throttling_and_server_errors_are_retried_for_repeatable_calls(status: int, kind: Any) -> None:
    assert classify(api_error(status), kind) == "retry"
    assert classify(api_error(status, sync=False), kind) == "retry"


@pytest.mark.parametrize("status", [400, 403, 404, 409, 410, 422])
@pytest.mark.parametrize("kind", ["read", "write", "create"])
def test_answers_of_the_server_are_raised_at_once(status: int, kind: Any) -> None:
    assert classify(api_error(status), kind) == "raise"


def test_a_throttled_create_is_sent_again_but_a_failed_one_is_ambiguous() -> None:
    assert classify(api_error(429), "create") == "retry"  # 429: the server did not act
    for status in (500, 502, 503, 504):
        assert classify(api_error(status), "create") == "ambiguous"
    lost = urllib3.exceptions.ProtocolError("Connection aborted.", ConnectionResetError(104, "reset"))
    assert classify(lost, "create") == "ambiguous"  # sent, then the reply was lost
    assert classify(aiohttp.ServerDisconnectedError(), "create") == "ambiguous"
    assert classify(TimeoutError(), "create") == "ambiguous"


def test_a_connection_never_made_is_safe_to_repeat_even_for_a_create() -> None:
    assert classify(connector_error(), "create") == "retry"
    refused = urllib3.exceptions.NewConnectionError(None, "refused")  # type: ignore[arg-type]
    assert classify(refused, "create") == "retry"
    assert classify(urllib3.exceptions.MaxRetryError(None, "/x", refused), "create") == "retry"  # type: ignore[arg-type]


def test_programming_errors_are_not_retried() -> None:
    assert classify(KeyError("x"), "read") == "raise"
    assert classify(ValueError("x"), "read") == "raise"


def test_retry_after_in_seconds_and_as_an_http_date() -> None:
    assert retry_after(api_error(429, "3")) == 3.0
    in_ten = email.utils.formatdate(time.time() + 10, usegmt=True)
    assert 8.0 <= (retry_after(api_error(503, in_ten)) or 0) <= 10.0
    assert retry_after(api_error(429)) is None
    assert retry_after(api_error(429, "soon")) is None


def test_transient_failures_are_retried_until_success_with_a_line_each() -> None:
    log = Recorder()
    fn, calls = failing([api_error(503), api_error(500)])
    assert RetryPolicy(timeout=30, initial=0.01).call("get TFJob ns/a", "read", fn, log) == "ok"
    assert len(calls) == 3
    assert len(log.lines) == 2
    assert log.lines[0].startswith("Kubernetes API get TFJob ns/a: 503 Service Unavailable; retry 1 in ")


def test_the_wait_honours_retry_after() -> None:
    log = Recorder()
    fn, _ = failing([api_error(429, "0.4")])
    RetryPolicy(timeout=30, initial=0.01).call("list TFJobs in ns", "read", fn, log)
    waited = log.args[0][-1]
    assert waited >= 0.4  # backoff alone would be at most 0.01 s


def test_gives_up_after_the_total_time_naming_the_call_and_the_last_status() -> None:
    log = Recorder()

    def always() -> None:
        raise api_error(503)

    with pytest.raises(ApiCallFailed) as info:
        RetryPolicy(timeout=0.3, initial=0.05, maximum=0.05).call("patch TFJob ns/job", "write", always, log)
    message = str(info.value)
    assert "patch TFJob ns/job" in message and "503 Service Unavailable" in message
    assert "api_retry_timeout" in message
    assert info.value.status == 503 and info.value.attempts >= 2


def test_no_retries_with_a_zero_timeout() -> None:
    fn, calls = failing([api_error(503)])
    with pytest.raises(ApiCallFailed):
        RetryPolicy(timeout=0).call("get TFJob ns/a", "read", fn, Recorder())
    assert len(calls) == 1


def test_an_ambiguous_create_is_not_repeated() -> None:
    fn, calls = failing([api_error(504)])
    with pytest.raises(AmbiguousCreate) as info:
        RetryPolicy(timeout=30, initial=0.01).call("create TFJob ns/a", "create", fn, Recorder())
    assert len(calls) == 1
    assert info.value.status == 504 and "create TFJob ns/a" in str(info.value)


def test_a_throttled_create_is_repeated() -> None:
    fn, calls = failing([api_error(429, "0")], result={"metadata": {"name": "a"}})
    assert RetryPolicy(timeout=30, initial=0.01).call("create TFJob ns/a", "create", fn, Recorder())
    assert len(calls) == 2


def test_a_decision_of_the_server_is_raised_unchanged() -> None:
    error = api_error(404)
    fn, calls = failing([error])
    with pytest.raises(SyncApiException) as info:
        RetryPolicy(timeout=30, initial=0.01).call("get TFJob ns/a", "read", fn, Recorder())
    assert info.value is error and len(calls) == 1


async def test_the_async_policy_is_the_same() -> None:
    log = Recorder()
    errors = [api_error(503, sync=False), aiohttp.ServerDisconnectedError()]
    calls: list[int] = []

    async def fn() -> str:
        calls.append(1)
        if len(calls) <= len(errors):
            raise errors[len(calls) - 1]
        return "ok"

    assert await RetryPolicy(timeout=30, initial=0.01).acall("list pods in ns", "read", fn, log) == "ok"
    assert len(calls) == 3 and len(log.lines) == 2

    async def create() -> None:
        raise aiohttp.ServerDisconnectedError()

    with pytest.raises(AmbiguousCreate):
        await RetryPolicy(timeout=30, initial=0.01).acall("create TFJob ns/a", "create", create, log)


def test_a_certificate_that_cannot_be_verified_is_not_retried() -> None:
    import ssl

    verify = ssl.SSLCertVerificationError(1, "certificate verify failed")
    assert classify(verify, "read") == "raise"
    assert classify(urllib3.exceptions.SSLError("certificate verify failed"), "read") == "raise"
    wrapped = urllib3.exceptions.MaxRetryError(None, "/x", urllib3.exceptions.SSLError("bad cert"))  # type: ignore[arg-type]
    assert classify(wrapped, "read") == "raise"
