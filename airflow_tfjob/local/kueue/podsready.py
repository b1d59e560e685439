"""WaitForPodsReady's timeout (pkg/controller/core/workload_controller.go reconcileNotReadyTimeout,
admittedNotReadyWorkload; pkg/workload/workload.go UpdateRequeueState; docs/reference/kueue-behaviour.md
§6): an admitted Workload whose job is not running `timeout` seconds after admission (or after it
stopped running: recovery) is evicted with reason PodsReadyTimeout and requeued after a backoff of
base·2^(n-1) seconds (capped), with `Requeued=True/BackoffFinished` when the backoff ends. Off unless
the cluster's Kueue options give a timeout (v0.19's default, 30 min, would never fire in a test)."""

from __future__ import annotations

import datetime as dt

from airflow_tfjob.local.kueue.queues import backing_off
from airflow_tfjob.local.kueue.workloads import (
    condition,
    count_eviction,
    is_true,
    key,
    set_condition,
)
from airflow_tfjob.local.kueue.writes import event, write_status
from airflow_tfjob.local.model.resources import JsonDict, clone, parse_rfc3339
from airflow_tfjob.local.store.core import Store

REASON = "PodsReadyTimeout"


def _rfc3339(when: dt.datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


class PodsReadyTimeout:
    def __init__(self, store: Store, timeout: float | None, backoff_base: float, backoff_max: float = 3600.0) -> None:
        self.store = store
        self.timeout = timeout
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max

    def sweep(self, workloads: list[JsonDict]) -> float | None:
        """Evict what timed out and end the backoffs that are over; seconds until the next deadline."""
        if self.timeout is None:
            return None
        now = dt.datetime.now(dt.timezone.utc)
        waits = [w for w in (self._timeout(wl, now) for wl in workloads) if w is not None]
        waits += [w for w in (self._backoff(wl, now) for wl in workloads) if w is not None]
        return min(waits) if waits else None

    def _timeout(self, wl: JsonDict, now: dt.datetime) -> float | None:
        assert self.timeout is not None
        if (is_true(wl, "Finished") or is_true(wl, "Evicted") or not is_true(wl, "Admitted")
                or (wl.get("spec") or {}).get("active") is False):
            return None
        ready = condition(wl, "PodsReady")
        if ready is not None and ready.get("status") == "True":
            return None
        if ready is None or ready.get("reason") in ("WaitForStart", "PodsReady"):
            since, cause = (condition(wl, "Admitted") or {}).get("lastTransitionTime"), "WaitForStart"
        elif ready.get("reason") == "WaitForRecovery":
            since, cause = ready.get("lastTransitionTime"), "WaitForRecovery"
        else:
            return None
        start = parse_rfc3339(since)
        if start is None:
            return None
        remaining = self.timeout - (now - start).total_seconds()
        if remaining > 0:
            return remaining
        ns, name = key(wl)
        message = f"Exceeded the PodsReady timeout {ns}/{name}"
        status = clone(wl.get("status") or {})
        set_condition(status, "Evicted", "True", REASON, message, wl["metadata"].get("generation"))
        count_eviction(status, REASON, cause)
        requeue = status.setdefault("requeueState", {})
        count = int(requeue.get("count") or 0) + 1
        wait = min(self.backoff_base * 2 ** (count - 1), self.backoff_max)
        requeue.update(count=count, requeueAt=_rfc3339(now + dt.timedelta(seconds=wait)))
        if write_status(self.store, "workloads", wl, status):
            event(self.store, wl, f"EvictedDueTo{REASON}", message)
        return None

    def _backoff(self, wl: JsonDict, now: dt.datetime) -> float | None:
        if not backing_off(wl):
            return None
        requeue_at = parse_rfc3339(((wl.get("status") or {}).get("requeueState") or {}).get("requeueAt"))
        if requeue_at is not None and requeue_at > now:
            return (requeue_at - now).total_seconds()
        status = clone(wl.get("status") or {})
        status.get("requeueState", {}).pop("requeueAt", None)
        set_condition(status, "Requeued", "True", "BackoffFinished", "The workload backoff was finished",
                      wl["metadata"].get("generation"))
        write_status(self.store, "workloads", wl, status)
        return None

