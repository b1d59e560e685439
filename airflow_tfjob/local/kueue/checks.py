"""Admission checks on the Workload side (Kueue v0.19.2 pkg/controller/core/workload_controller.go
reconcileSyncAdmissionChecks and reconcileCheckBasedEviction, pkg/workload/admissionchecks.go
SyncAdmittedCondition, pkg/workload/evict/evict.go): a Workload whose ClusterQueue names admission checks
carries one `status.admissionChecks` entry per check (`Pending` when added), is `Admitted` only once it
holds quota and every check is `Ready`, and is evicted (reason `AdmissionCheck`) when a check turns
`Retry`, which resets the checks to `Pending` and forgets the cluster it was dispatched to.

Why apart from the scheduler: the checks change outside a scheduling decision (MultiKueue's controller
writes their state), so their consequences are drawn on every cycle, before the scheduler looks at the
queues, as Kueue's workload controller draws them on every Workload change. The check controllers
themselves (MultiKueue: mkworkloads.py) only write check states.

Not reproduced: `onFlavors` (every check applies to every flavor), a `Rejected` check's deactivation of
the Workload (the state is written; nothing here acts on it), `requeueAfterSeconds`, and
`podSetUpdates`."""

from __future__ import annotations

from airflow_tfjob.local.kueue.reasons import Reasons
from airflow_tfjob.local.kueue.workloads import (
    condition,
    count_eviction,
    has_reservation,
    is_true,
    seconds_since,
    set_condition,
)
from airflow_tfjob.local.kueue.writes import event, write_status
from airflow_tfjob.local.model.resources import JsonDict, clone, now_rfc3339
from airflow_tfjob.local.store.core import Store

PENDING = "Pending"
READY = "Ready"
RETRY = "Retry"
REJECTED = "Rejected"
EVICTED_BY_CHECK = "AdmissionCheck"
#: SyncAdmittedCondition's words for a reservation whose checks are not all Ready (the fallback reason
#: with UnadmittedWorkloadsObservability off, v0.19's default).
UNSATISFIED = ("UnsatisfiedAdmissionChecks", "UnsatisfiedChecks", "The workload has not all checks ready")


def cq_checks(cq: JsonDict | None) -> list[str]:
    """The admission checks a ClusterQueue names (admissionChecksStrategy), sorted as Kueue sorts states."""
    strategy = ((cq or {}).get("spec") or {}).get("admissionChecksStrategy") or {}
    return sorted({str(c.get("name")) for c in strategy.get("admissionChecks") or [] if isinstance(c, dict)})


def states(wl: JsonDict) -> list[JsonDict]:
    return list((wl.get("status") or {}).get("admissionChecks") or [])


def find_state(wl: JsonDict, name: str) -> JsonDict | None:
    return next((s for s in states(wl) if s.get("name") == name), None)


def all_ready(wl: JsonDict) -> bool:
    """HasAllChecksReady (no checks at all: ready)."""
    return all(s.get("state") == READY for s in states(wl))


def set_state(status: JsonDict, name: str, state: str, message: str) -> None:
    """One check's state in `status` (SetAdmissionCheckState: the transition time moves with the state)."""
    checks = status.setdefault("admissionChecks", [])
    entry = next((s for s in checks if s.get("name") == name), None)
    if entry is None:
        entry = {"name": name}
        checks.append(entry)
        checks.sort(key=lambda s: str(s.get("name")))
    if entry.get("state") != state or not entry.get("lastTransitionTime"):
        entry["lastTransitionTime"] = now_rfc3339()
    entry.update(state=state, message=message)


def admitted_on_reservation(status: JsonDict, names: list[str], reasons: Reasons, generation: int | None) -> bool:
    """The scheduler's prepareWorkload for a ClusterQueue with checks: with every check's state present,
    Admitted is synced (False until they are all Ready); without them, it is left for the next sync.
    True when the Workload is admitted now."""
    present = {str(s.get("name")) for s in status.get("admissionChecks") or []}
    if not set(names) <= present:
        return False
    if all(s.get("state") == READY for s in status.get("admissionChecks") or []):
        set_condition(status, "Admitted", "True", "Admitted", "The workload is admitted", generation)
        return True
    set_condition(status, "Admitted", "False", reasons.pick(UNSATISFIED[0], UNSATISFIED[1]), UNSATISFIED[2],
                  generation)
    return False


class CheckSync:
    """One pass over the Workloads per scheduling cycle (`sync`): states, eviction on Retry, Admitted."""

    def __init__(self, store: Store, reasons: Reasons) -> None:
        self.store = store
        self.reasons = reasons

    def sync(self, wl: JsonDict, cq: JsonDict | None) -> None:
        if is_true(wl, "Finished") or wl["metadata"].get("deletionTimestamp"):
            return
        names = cq_checks(cq) if cq is not None else [str(s.get("name")) for s in states(wl)]
        status = clone(wl.get("status") or {})
        changed = self._sync_states(status, names)
        generation = wl["metadata"].get("generation")
        evicted = False
        if not is_true(wl, "Evicted") and any(s.get("state") == RETRY for s in status.get("admissionChecks") or []):
            evicted = self._evict(wl, status, generation)
            changed = True
        elif has_reservation(wl) and not is_true(wl, "Admitted"):
            before = clone(condition({"status": status}, "Admitted") or {})
            admitted = admitted_on_reservation(status, names, self.reasons, generation)
            changed = changed or before != (condition({"status": status}, "Admitted") or {})
            if admitted and changed and write_status(self.store, "workloads", wl, status):
                reserved = (condition(wl, "QuotaReserved") or {}).get("lastTransitionTime")
                event(self.store, wl, "Admitted",
                      f"Admitted by ClusterQueue {wl['status']['admission'].get('clusterQueue', '')}, wait time "
                      f"since reservation was {seconds_since(reserved)}s")
                return
        requeued = condition({"status": status}, "Requeued")
        if (not has_reservation(wl) and requeued is not None
                and (requeued.get("status"), requeued.get("reason")) == ("False", EVICTED_BY_CHECK)):
            # No requeueAfterSeconds here, so the backoff is over at once (workload_controller.go).
            set_condition(status, "Requeued", "True", "BackoffFinished", "The workload backoff was finished",
                          generation)
            changed = True
        if changed and write_status(self.store, "workloads", wl, status) and evicted:
            message = str((condition(wl, "Evicted") or {}).get("message", ""))
            event(self.store, wl, f"EvictedDueTo{EVICTED_BY_CHECK}", message)

    @staticmethod
    def _sync_states(status: JsonDict, names: list[str]) -> bool:
        """syncAdmissionCheckConditions: a Pending state for each check missing, none for a check the
        ClusterQueue no longer names, sorted by name."""
        have = list(status.get("admissionChecks") or [])
        kept = [s for s in have if s.get("name") in names]
        known = {s.get("name") for s in kept}
        kept += [{"name": n, "state": PENDING, "message": "", "lastTransitionTime": now_rfc3339()}
                 for n in names if n not in known]
        kept.sort(key=lambda s: str(s.get("name")))
        if kept == have:
            return False
        if kept:
            status["admissionChecks"] = kept
        else:
            status.pop("admissionChecks", None)
        return True

    @staticmethod
    def _evict(wl: JsonDict, status: JsonDict, generation: int | None) -> bool:
        """workloadevict.Evict for checks in Retry: Evicted (AdmissionCheck), the cluster nomination
        forgotten, every check not Pending reset to Pending (a Retry one counted in retryCount)."""
        retry = sorted((s for s in status.get("admissionChecks") or [] if s.get("state") == RETRY),
                       key=lambda s: str(s.get("name")))
        parts = [f'"{s["name"]}" ({s["message"]})' if s.get("message") else f'"{s["name"]}"' for s in retry]
        noun = "AdmissionChecks" if len(retry) > 1 else "AdmissionCheck"
        message = f"Evicted due to {noun} in {RETRY} state: {'; '.join(parts)}"
        set_condition(status, "Evicted", "True", EVICTED_BY_CHECK, message, generation)
        status.pop("clusterName", None)
        status.pop("nominatedClusterNames", None)
        for check in status.get("admissionChecks") or []:
            if check.get("state") == PENDING:
                continue
            previous = check.get("state")
            if previous == RETRY:
                check["retryCount"] = int(check.get("retryCount") or 0) + 1
            else:
                check.pop("retryCount", None)
            check.update(state=PENDING, message=f"Reset to Pending after eviction. Previously: {previous}",
                         lastTransitionTime=now_rfc3339())
        count_eviction(status, EVICTED_BY_CHECK)
        return bool((wl.get("status") or {}).get("admission"))

