"""``retry_policy=`` on an Airflow release without retry policies (before 3.3): what is kept of it.

Airflow 3.3 asks a task's ``retry_policy`` what to do with each failure; earlier releases know no such
argument (``BaseOperator`` refuses it). So that one DAG file runs on every supported release, the
provider's operators declare ``retry_policy`` themselves (so ``partial`` and the task decorators take it
on every release) and, below 3.3, apply it themselves in the one
way an older task runner allows: a failure the policy would fail at once is raised as
``AirflowFailException`` (the task fails without spending its retries); anything else is raised as it
came, and the task's ``retries`` and ``retry_delay`` decide. What is lost (a delay chosen per cause, a
raised memory limit) is said once per task in its log (:mod:`airflow_tfjob.version_compat`).

The stand-ins below mirror the shape of Airflow 3.3's ``RetryAction``, ``RetryDecision`` and
``RetryPolicy`` so that :class:`~airflow_tfjob.operators.retry_policy.TrainingRetryPolicy` is one class
on every release.
"""

from __future__ import annotations

import abc
import functools
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from enum import Enum
from typing import TYPE_CHECKING, Any, TypeVar

from airflow_tfjob.version_compat import AIRFLOW_V_3_3_PLUS, AirflowFailException

if TYPE_CHECKING:
    from airflow.sdk.definitions.context import Context


class RetryAction(Enum):
    """What Airflow 3.3 does after a failure, as its ``RetryAction`` names it."""

    RETRY = "retry"
    FAIL = "fail"
    DEFAULT = "default"


@dataclass(frozen=True)
class RetryDecision:
    """A policy's answer, with the fields and constructors of Airflow 3.3's ``RetryDecision``."""

    action: RetryAction = RetryAction.DEFAULT
    retry_delay: timedelta | None = None
    reason: str | None = None

    @classmethod
    def fail(cls, reason: str | None = None) -> RetryDecision:
        return cls(action=RetryAction.FAIL, reason=reason)

    @classmethod
    def retry(cls, delay: timedelta | None = None, reason: str | None = None) -> RetryDecision:
        return cls(action=RetryAction.RETRY, retry_delay=delay, reason=reason)

    @classmethod
    def default(cls) -> RetryDecision:
        return cls(action=RetryAction.DEFAULT)


class RetryPolicy(abc.ABC):
    """The base class of a policy where Airflow has none (before 3.3)."""

    @abc.abstractmethod
    def evaluate(
        self, exception: BaseException, try_number: int, max_tries: int, context: Context | None = None
    ) -> RetryDecision: ...


def passed_on(policy: Any) -> dict[str, Any]:
    """What an operator hands ``BaseOperator`` of its ``retry_policy``: the policy itself from Airflow
    3.3 on (its task runner applies it), nothing before (``BaseOperator`` knows no such argument; the
    operator keeps it as its ``retry_policy`` parameter and :func:`fail_fast` applies it)."""
    return {"retry_policy": policy} if AIRFLOW_V_3_3_PLUS and policy is not None else {}


def decide(policy: Any, error: BaseException, context: Any) -> BaseException | None:
    """The exception to raise instead of ``error`` when ``policy`` fails it at once (None: raise
    ``error`` as it is). The decision's reason is the new exception's message."""
    if policy is None or isinstance(error, AirflowFailException):
        return None
    ti = context.get("ti")
    try_number = int(getattr(ti, "try_number", 1) or 1)
    max_tries = int(getattr(ti, "max_tries", 0) or 0)
    decision = policy.evaluate(error, try_number, max_tries, context)
    if getattr(decision.action, "value", None) != RetryAction.FAIL.value:
        return None
    return AirflowFailException(f"{decision.reason or 'the retry policy fails the task'} ({error})")


_Method = TypeVar("_Method", bound=Callable[..., Any])


def fail_fast(method: _Method) -> _Method:
    """Wraps an operator's entry point (``execute``, ``resume_execution``): below 3.3, a failure its
    ``retry_policy`` would fail at once is raised as ``AirflowFailException``, from the failure."""

    @functools.wraps(method)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except Exception as error:
            context = kwargs.get("context", args[-1] if args else None)
            policy = None if AIRFLOW_V_3_3_PLUS else getattr(self, "retry_policy", None)
            instead = decide(policy, error, context or {})
            if instead is None:
                raise
            self.log.error("Retry policy: %s", instead)
            raise instead from error

    return wrapper  # type: ignore[return-value]
