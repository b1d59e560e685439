"""One retry policy for every call the hooks make to the Kubernetes API.

Busy API servers throttle (429 with Retry-After), fail for a moment (500, 502, 503, 504) and drop
connections. None of that may decide a task's outcome, so every plain call of ``KubeflowJobHook`` and
``AsyncKubeflowJobHook`` runs under :class:`RetryPolicy`: jittered exponential backoff that waits at least
what Retry-After asks, bounded by a total time (the operator's ``api_retry_timeout``).

What is repeated depends on what a repeat could do:

- reads (GET, LIST), merge patches (they set absolute values) and deletes (404 means done) are safe
  to send again after any transient failure, even one where the server may have acted;
- a create is sent again only when the server certainly did not act on it: a 429, or a connection
  that was never made. Any other failure of a create (a 5xx, a reply lost after sending, a timeout)
  is *ambiguous*: the job may exist. It is raised as :class:`AmbiguousCreate` for the caller to read
  the object back and adopt it (see ``operators/submit.py``), never blindly repeated.

Other answers (400, 403, 404, 409, 422...) are decisions of the server and are raised at once.
401 is handled by the hooks themselves (credentials rebuilt once), not here.

Streams (watches, followed logs) are long-lived and reconnect through ``watching.reconnect_forever``;
only the request that opens them runs under this policy.
"""

from __future__ import annotations

import asyncio
import http.client
import logging
import random
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from types import ModuleType
from typing import Any, Literal, TypeVar

import tenacity

T = TypeVar("T")

#: Status codes that mean "try again later": throttling and passing server trouble.
RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
#: Seconds of retrying before a call gives up (the operator's ``api_retry_timeout`` default).
DEFAULT_RETRY_TIMEOUT = 240.0

Kind = Literal["read", "write", "create"]


class ApiCallFailed(Exception):
    """A call still failed after the retry policy's time: names the call, the object and the last error."""

    def __init__(self, call: str, attempts: int, elapsed: float, last: BaseException) -> None:
        status = api_status_code(last)
        reason = _reason(last)
        shown = f"{status} {reason}".strip() if status else repr(last)
        super().__init__(
            f"Kubernetes API call {call} still failing after {attempts} attempts in {elapsed:.0f} s "
            f"(api_retry_timeout): last error {shown}"
        )
        self.call = call
        self.attempts = attempts
        self.status = status
        self.last = last


class AmbiguousCreate(Exception):
    """A create failed in a way that leaves it unknown whether the object was created."""

    def __init__(self, call: str, error: BaseException) -> None:
        status = api_status_code(error)
        shown = f"{status} {_reason(error)}".strip() if status else repr(error)
        super().__init__(f"{call}: no clear answer ({shown}); the object may or may not exist")
        self.call = call
        self.status = status
        self.error = error


def api_status_code(exc: BaseException) -> int | None:
    """The HTTP status of an API error from either client (or of ApiCallFailed), None otherwise."""
    status = getattr(exc, "status", None)
    if isinstance(status, int) and not isinstance(status, bool):
        return status
    return None


def _reason(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None)
    return str(reason) if reason else ""


def _header(exc: BaseException, name: str) -> str | None:
    headers = getattr(exc, "headers", None)
    if not headers:
        return None
    try:
        value = headers.get(name)
    except AttributeError:
        return None
    return str(value) if value is not None else None


def retry_after(exc: BaseException) -> float | None:
    """Seconds the server asked us to wait (Retry-After as seconds or an HTTP date), if it did."""
    value = _header(exc, "Retry-After")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def client_errors() -> tuple[ModuleType, ModuleType]:
    """aiohttp and urllib3's exceptions, whose errors the two hooks' clients raise: the hooks' one place
    that imports them, when a failure is told apart, because a DAG file's parse imports the hooks'
    modules (the operators' ``DEFAULT_RETRY_TIMEOUT``) and must load neither client (the
    light-dag-parse contract)."""
    import aiohttp  # the asynchronous client: not at a DAG file's parse
    import urllib3.exceptions  # the synchronous client's: likewise

    return aiohttp, urllib3.exceptions


def _never_sent(exc: BaseException) -> bool:
    """True when the request certainly never reached the server (nothing to be ambiguous about)."""
    aiohttp, urllib3_errors = client_errors()
    if isinstance(exc, (aiohttp.ClientConnectorError, urllib3_errors.NewConnectionError)):
        return True
    if isinstance(exc, urllib3_errors.MaxRetryError):
        return isinstance(exc.reason, urllib3_errors.NewConnectionError)
    return isinstance(exc, ConnectionRefusedError)


def _certificate_error(exc: BaseException) -> bool:
    aiohttp, urllib3_errors = client_errors()
    if isinstance(exc, (aiohttp.ClientConnectorCertificateError, ssl.SSLCertVerificationError)):
        return True
    reason = getattr(exc, "reason", None)  # urllib3's MaxRetryError wraps its SSLError
    return isinstance(exc, urllib3_errors.SSLError) or isinstance(reason, urllib3_errors.SSLError)


def is_transient(exc: BaseException) -> bool:
    """A failure that may pass: a retryable status, or a connection-level fault or timeout."""
    aiohttp, urllib3_errors = client_errors()
    status = api_status_code(exc)
    if status is not None and not isinstance(exc, (ApiCallFailed, AmbiguousCreate)):
        return status in RETRYABLE_STATUS
    if _certificate_error(exc):  # a server we cannot trust stays so: fail at once
        return False
    return isinstance(
        exc,
        (
            aiohttp.ClientError,
            asyncio.TimeoutError,
            urllib3_errors.HTTPError,
            http.client.HTTPException,
            ConnectionError,
            TimeoutError,
        ),
    )


def classify(exc: BaseException, kind: Kind) -> Literal["retry", "ambiguous", "raise"]:
    """What to do after `exc` for a call of this kind."""
    if not is_transient(exc):
        return "raise"
    if kind != "create" or api_status_code(exc) == 429 or _never_sent(exc):
        return "retry"
    return "ambiguous"


@dataclass(frozen=True)
class RetryPolicy:
    """Backoff and total time for API calls; one instance per hook."""

    timeout: float = DEFAULT_RETRY_TIMEOUT
    initial: float = 0.5
    maximum: float = 15.0

    @classmethod
    def from_timeout(cls, timeout: float | None) -> RetryPolicy:
        return cls() if timeout is None else cls(timeout=max(0.0, float(timeout)))

    def _wait(self, state: tenacity.RetryCallState) -> float:
        backoff = min(self.maximum, self.initial * 2 ** (state.attempt_number - 1))
        delay = random.uniform(backoff / 2, backoff)
        outcome = state.outcome
        error = outcome.exception() if outcome is not None and outcome.failed else None
        asked = retry_after(error) if error is not None else None
        if asked is not None:
            delay = max(delay, asked)
        # Never sleep past the end of the policy: the last try happens at the deadline at the latest.
        remaining = self.timeout - (time.monotonic() - state.start_time)
        return max(0.0, min(delay, remaining))

    def _tenacity_kwargs(self, call: str, kind: Kind, log: logging.Logger | Any) -> dict[str, Any]:
        def should_retry(exc: BaseException) -> bool:
            return classify(exc, kind) == "retry"

        def before_sleep(state: tenacity.RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome is not None else None
            status = api_status_code(exc) if exc is not None else None
            shown = f"{status} {_reason(exc)}".strip() if exc is not None and status else repr(exc)
            wait = state.next_action.sleep if state.next_action is not None else 0.0
            log.warning("Kubernetes API %s: %s; retry %d in %.1f s", call, shown, state.attempt_number, wait)

        return {
            "retry": tenacity.retry_if_exception(should_retry),
            "wait": self._wait,
            "stop": tenacity.stop_after_delay(self.timeout),
            "before_sleep": before_sleep,
            "reraise": True,
        }

    def _final(
        self, call: str, kind: Kind, exc: BaseException, attempts: int, started: float
    ) -> BaseException:
        verdict = classify(exc, kind)
        if verdict == "ambiguous":
            return AmbiguousCreate(call, exc)
        if verdict == "retry":  # retryable, but out of time
            return ApiCallFailed(call, attempts, time.monotonic() - started, exc)
        return exc

    def call(self, call: str, kind: Kind, fn: Callable[[], T], log: logging.Logger | Any) -> T:
        """Run `fn` under the policy (synchronous hook)."""
        started = time.monotonic()
        retrying = tenacity.Retrying(**self._tenacity_kwargs(call, kind, log))
        try:
            return retrying(fn)
        except Exception as exc:
            final = self._final(call, kind, exc, retrying.statistics.get("attempt_number", 1), started)
            if final is exc:
                raise
            raise final from exc

    async def acall(
        self, call: str, kind: Kind, fn: Callable[[], Awaitable[T]], log: logging.Logger | Any
    ) -> T:
        """Run `fn` under the policy (asynchronous hook)."""
        started = time.monotonic()
        retrying = tenacity.AsyncRetrying(**self._tenacity_kwargs(call, kind, log))
        try:
            return await retrying(fn)
        except Exception as exc:
            final = self._final(call, kind, exc, retrying.statistics.get("attempt_number", 1), started)
            if final is exc:
                raise
            raise final from exc
