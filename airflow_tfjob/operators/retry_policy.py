"""A retry policy that knows the cluster's failures from the user's: ``retry_policy=TrainingRetryPolicy()``.

Airflow 3.3 asks a task's ``retry_policy`` what to do with each failure (``evaluate`` runs in the task's
process, after the exception, with the task's context). Before 3.3 the provider's operators apply it
themselves, in part (:mod:`airflow_tfjob.operators.retry_fallback`): a failure it would fail at once
fails without a retry; the rest is left to ``retries``. This one reads the provider's own diagnosis of a
failed training job (:class:`~airflow_tfjob.follow.failure.TrainingJobFailed` and its cause) and decides:

- the cluster's doing (preempted or evicted, a node or a MultiKueue worker cluster lost, pods deleted by someone else, the API
  unreachable after the hooks' retries, an exit code the restart policy calls retryable): **retry**,
  after the delay the cause suggests (``delays`` overrides it per reason);
- the user's (a Python traceback, a non-retryable exit code, a spec the cluster refused, an image that
  cannot be pulled, a parameter the provider refused before submitting): **fail now**, naming why: a
  retry would cost a GPU run and fail the same way;
- out of memory: **fail**, naming the replica and its limit; with ``raise_memory=True``, **retry**
  with that replica type's memory limit multiplied by ``memory_factor``, up to ``memory_ceiling``
  (the raised limit is kept in the task's ``task_state_store``, which the next try reads);
- anything else (an exception that is not the provider's, a cause it cannot tell): Airflow's default
  (the task's ``retries`` and ``retry_delay``).

A policy cannot grant more tries than ``retries`` allows (Airflow's rule): give a training task the
retries its infrastructure needs; a user's failure no longer spends them.

Every decision is one line in the task log (the task runner's "Retry policy decision" line carries
its reason) and is pushed to the XCom ``retry_decision``; the decisions of earlier tries are kept in
the ``task_state_store`` and pushed as ``retry_decisions`` when the next try starts.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from datetime import timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from airflow_tfjob.build.checker import JobValidationError, parse_quantity
from airflow_tfjob.hooks.retry import ApiCallFailed
from airflow_tfjob.jobs.adapter import adapter_of
from airflow_tfjob.version_compat import AIRFLOW_V_3_3_PLUS

if AIRFLOW_V_3_3_PLUS:
    from airflow.sdk.definitions.retry_policy import RetryAction, RetryDecision, RetryPolicy
else:  # the same shapes, applied by the operator itself (operators/retry_fallback.py)
    from airflow_tfjob.operators.retry_fallback import (  # type: ignore[assignment]
        RetryAction,
        RetryDecision,
        RetryPolicy,
    )

from airflow_tfjob.follow.failure import (
    INFRASTRUCTURE,
    OUT_OF_MEMORY,
    RETRY_AFTER,
    USER,
    FailureCause,
    TrainingJobFailed,
    api_unavailable,
    user,
)

if TYPE_CHECKING:
    from airflow.sdk.definitions.context import Context

log = logging.getLogger(__name__)

#: The task_state_store key of the policy's memory: raised memory limits and earlier decisions.
STATE_KEY = "tfjob_retry"
#: XCom keys: this try's decision, and (pushed when a try starts) the earlier tries' decisions.
XCOM_DECISION = "retry_decision"
XCOM_HISTORY = "retry_decisions"
_KEPT_DECISIONS = 20


def cause_of(exception: BaseException) -> FailureCause | None:
    """The provider's diagnosis of ``exception``, or None if it is not the provider's to diagnose."""
    seen: set[int] = set()
    error: BaseException | None = exception
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, TrainingJobFailed):
            return error.cause
        if isinstance(error, ApiCallFailed):
            return api_unavailable(error)
        if isinstance(error, JobValidationError):
            return user("InvalidSpec", f"the provider refused the job before submitting it: {error}")
        error = error.__cause__ or error.__context__
    return None


def _quantity(value: Any, field: str) -> Decimal:
    parsed = parse_quantity(value)
    if parsed is None or parsed <= 0:
        raise ValueError(
            f"TrainingRetryPolicy {field}={value!r} is not a memory quantity. "
            'Fix: write a Kubernetes quantity such as "16Gi" or "512Mi"'
        )
    return parsed


def memory_text(size: Decimal) -> str:
    """Bytes as a limit a person would write: whole Gi when it is one, else Mi rounded up."""
    gib = Decimal(1 << 30)
    if size % gib == 0:
        return f"{int(size / gib)}Gi"
    return f"{math.ceil(size / Decimal(1 << 20))}Mi"


class TrainingRetryPolicy(RetryPolicy):
    """Retry what the cluster did, fail what the user must fix (see the module's description).

    :param raise_memory: after an OOM kill, retry with the replica type's memory limit raised instead of
        failing.
    :param memory_factor: how much each such retry multiplies the limit by (more than 1).
    :param memory_ceiling: the largest limit it raises to; a replica already there fails.
    :param delays: seconds to wait before retrying, by cause reason (``Preempted``, ``Evicted``,
        ``NodeLost``, ``WorkerLost``, ``PodDeleted``, ``ApiUnavailable``, ``RetryableExitCode``), over the
        defaults.
    """

    def __init__(
        self,
        *,
        raise_memory: bool = False,
        memory_factor: float = 2.0,
        memory_ceiling: str = "64Gi",
        delays: Mapping[str, float] | None = None,
    ) -> None:
        if not isinstance(raise_memory, bool):
            raise TypeError(f"TrainingRetryPolicy raise_memory must be True or False, got {raise_memory!r}")
        if (
            isinstance(memory_factor, bool)
            or not isinstance(memory_factor, (int, float))
            or not memory_factor > 1
        ):
            raise ValueError(
                f"TrainingRetryPolicy memory_factor={memory_factor!r}: it multiplies the memory limit on "
                "each retry. Fix: a number above 1, such as 1.5 or 2"
            )
        _quantity(memory_ceiling, "memory_ceiling")
        unknown = sorted(set(delays or {}) - set(RETRY_AFTER))
        if unknown:
            raise ValueError(
                f"TrainingRetryPolicy delays: unknown reason(s) {unknown}. Fix: use among {sorted(RETRY_AFTER)}"
            )
        for reason, seconds in (delays or {}).items():
            if (
                isinstance(seconds, bool)
                or not isinstance(seconds, (int, float))
                or not 0 <= seconds < math.inf
            ):
                raise ValueError(
                    f"TrainingRetryPolicy delays[{reason!r}]={seconds!r}. Fix: seconds, 0 or more (e.g. 30)"
                )
        self.raise_memory = raise_memory
        self.memory_factor = float(memory_factor)
        self.memory_ceiling = str(memory_ceiling)
        self.delays = {str(k): float(v) for k, v in (delays or {}).items()}

    def __repr__(self) -> str:
        return f"TrainingRetryPolicy({self.serialize()!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TrainingRetryPolicy) and self.serialize() == other.serialize()

    def __hash__(self) -> int:
        return hash(repr(self))

    # -- Airflow's interface -------------------------------------------------------------------------

    def serialize(self) -> dict[str, Any]:
        return {
            "__type": f"{type(self).__module__}.{type(self).__qualname__}",
            "raise_memory": self.raise_memory,
            "memory_factor": self.memory_factor,
            "memory_ceiling": self.memory_ceiling,
            "delays": dict(self.delays),
        }

    @classmethod
    def deserialize(cls, data: dict[str, Any]) -> TrainingRetryPolicy:
        return cls(
            raise_memory=bool(data.get("raise_memory", False)),
            memory_factor=float(data.get("memory_factor", 2.0)),
            memory_ceiling=str(data.get("memory_ceiling", "64Gi")),
            delays=data.get("delays") or None,
        )

    def evaluate(
        self,
        exception: BaseException,
        try_number: int,
        max_tries: int,
        context: Context | None = None,
    ) -> RetryDecision:
        cause = cause_of(exception)
        store = context.get("task_state_store") if context is not None else None
        raised: dict[str, str] = {}
        decision = self.decide(cause, exception, try_number, max_tries, store, raised)
        _record(context, store, decision, cause, try_number, max_tries, raised)
        return decision

    # -- the decision table --------------------------------------------------------------------------

    def decide(
        self,
        cause: FailureCause | None,
        exception: BaseException,
        try_number: int,
        max_tries: int,
        store: Any = None,
        raised: dict[str, str] | None = None,
    ) -> RetryDecision:
        """The decision for ``cause`` (None: not the provider's failure). ``store`` (the task_state_store)
        keeps a raised memory limit for the next try; ``raised`` gets it too, for the record."""
        name = type(self).__name__
        tries = f"try {try_number} of {max_tries + 1}"
        if cause is None:
            return RetryDecision(
                RetryAction.DEFAULT,
                reason=f"{name}: not a training job's failure ({type(exception).__name__}); "
                f"the task's retries decide ({tries})",
            )
        left = try_number <= max_tries
        if cause.category == INFRASTRUCTURE:
            delay = self.delays.get(cause.reason, cause.retry_after if cause.retry_after is not None else 0.0)
            then = f"retry in {delay:g} s ({tries})" if left else f"retry, but no tries are left ({tries})"
            return RetryDecision.retry(
                timedelta(seconds=delay),
                f"{name}: infrastructure ({cause.reason}): {cause.summary} -> {then}",
            )
        if cause.category == USER:
            return RetryDecision.fail(
                f"{name}: the job's own failure ({cause.reason}): {cause.summary} -> fail now, "
                f"a retry would fail the same way ({tries})"
            )
        if cause.category == OUT_OF_MEMORY:
            return self._out_of_memory(cause, name, tries, left, store, raised)
        return RetryDecision(
            RetryAction.DEFAULT,
            reason=f"{name}: cause not known ({cause.summary}); the task's retries decide ({tries})",
        )

    def _out_of_memory(
        self,
        cause: FailureCause,
        name: str,
        tries: str,
        left: bool,
        store: Any,
        raised: dict[str, str] | None,
    ) -> RetryDecision:
        head = f"{name}: out of memory: {cause.summary}"
        if not self.raise_memory:
            return RetryDecision.fail(
                f"{head} -> fail now; raise its memory limit, or set TrainingRetryPolicy(raise_memory=True) "
                f"({tries})"
            )
        if not cause.memory_limit or not cause.replica_type:
            return RetryDecision.fail(f"{head} -> fail now: no memory limit to raise ({tries})")
        ceiling = _quantity(self.memory_ceiling, "memory_ceiling")
        current = _quantity(cause.memory_limit, "memory limit")
        if current >= ceiling:
            return RetryDecision.fail(
                f"{head} -> fail now: the limit is at memory_ceiling {self.memory_ceiling} ({tries})"
            )
        if not left:
            return RetryDecision.retry(
                timedelta(0), f"{head} -> no tries are left to raise the limit ({tries})"
            )
        if store is None:
            return RetryDecision.fail(
                f"{head} -> fail now: no task_state_store to hand a raised limit on ({tries})"
            )
        new = memory_text(min(current * Decimal(str(self.memory_factor)), ceiling))
        state = _state(store)
        state.setdefault("memory", {})[cause.replica_type] = new
        store.set(STATE_KEY, state)
        if raised is not None:
            raised[cause.replica_type] = new
        return RetryDecision.retry(
            timedelta(0),
            f"{head} -> retry with {cause.replica_type}'s memory limit raised to {new} "
            f"(x{self.memory_factor:g}, ceiling {self.memory_ceiling}; {tries})",
        )


def _state(store: Any) -> dict[str, Any]:
    try:
        value = store.get(STATE_KEY)
    except Exception:  # a store that cannot answer has nothing to hand on
        return {}
    return dict(value) if isinstance(value, dict) else {}


def _record(
    context: Context | None,
    store: Any,
    decision: RetryDecision,
    cause: FailureCause | None,
    try_number: int,
    max_tries: int,
    raised: Mapping[str, str],
) -> None:
    """The decision in XCom (this try's) and in the task's durable state (for the next try's XCom)."""
    record = {
        "try_number": try_number,
        "max_tries": max_tries,
        "action": decision.action.value,
        "delay_seconds": decision.retry_delay.total_seconds() if decision.retry_delay is not None else None,
        "reason": decision.reason,
        "cause": cause.to_dict() if cause is not None else None,
        "memory_limits": dict(raised),
    }
    ti = context.get("ti") if context is not None else None
    try:
        if ti is not None:
            ti.xcom_push(key=XCOM_DECISION, value=record)
        if store is not None:
            state = _state(store)
            state["decisions"] = [*state.get("decisions", []), record][-_KEPT_DECISIONS:]
            store.set(STATE_KEY, state)
    except Exception:  # the record must never change the decision
        log.warning("Could not record the retry decision", exc_info=True)


def apply_to_manifest(manifest: dict[str, Any], context: Any, log: Any) -> dict[str, Any]:
    """What the earlier tries' decisions hand to this one: the raised memory limits applied to
    ``manifest`` (in place) and logged, and the decisions pushed to XCom ``retry_decisions``."""
    store = context.get("task_state_store") if isinstance(context, Mapping) else None
    if store is None:
        return manifest
    state = _state(store)
    if not state:
        return manifest
    adapter = adapter_of(manifest)
    for rtype, limit in sorted((state.get("memory") or {}).items()):
        if adapter.set_memory_limit(manifest, rtype, limit):
            log.info(
                "Retry policy: %s's memory limit is %s on this try (raised after an OOM kill)", rtype, limit
            )
    ti = context.get("ti")
    if ti is not None and state.get("decisions"):
        ti.xcom_push(key=XCOM_HISTORY, value=list(state["decisions"]))
    return manifest


__all__ = [
    "STATE_KEY",
    "XCOM_DECISION",
    "XCOM_HISTORY",
    "TrainingRetryPolicy",
    "apply_to_manifest",
    "cause_of",
]
