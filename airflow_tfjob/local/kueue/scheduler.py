"""Kueue's scheduler over the store (pkg/scheduler/scheduler.go, preemption/preemption.go): per
ClusterQueue, pending Workloads in queue order get a flavor assignment against the quota left; a fit is
admitted (status.admission, QuotaReserved, Admitted in one write), a StrictFIFO head that does not fit
blocks its queue, a BestEffortFIFO one is passed over; with `withinClusterQueue` preemption the
lowest-priority, most recently admitted Workloads are evicted until the head would fit.
docs/reference/kueue-behaviour.md §5, §7."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

from airflow_tfjob.local.kueue import quota
from airflow_tfjob.local.kueue.checks import CheckSync, admitted_on_reservation, cq_checks
from airflow_tfjob.local.kueue.queues import (
    Snapshot,
    blocker,
    cq_active,
    drained_by,
    is_pending,
    namespace_matches,
    pending_in,
    stop_policy,
)
from airflow_tfjob.local.kueue.reasons import (
    INADMISSIBLE,
    MISCONFIGURED,
    NO_RESERVATION,
    PENDING,
    WAITING_FOR_PREEMPTED,
    WAITING_FOR_QUOTA,
    Reasons,
)
from airflow_tfjob.local.kueue.workloads import (
    JOB_UID_LABEL,
    condition,
    count_eviction,
    has_reservation,
    is_true,
    key,
    priority,
    reset_to_previously,
    seconds_since,
    set_condition,
)
from airflow_tfjob.local.kueue.writes import event, write_status
from airflow_tfjob.local.model.resources import ApiError, JsonDict, clone, now_rfc3339
from airflow_tfjob.local.store.core import Store

_WHY = {"InClusterQueue": "prioritization in the ClusterQueue"}


def snapshot(store: Store) -> Snapshot:
    snap = Snapshot()
    snap.flavors = {o["metadata"]["name"]: o for o in store.list("resourceflavors")[0]}
    snap.cluster_queues = {o["metadata"]["name"]: o for o in store.list("clusterqueues")[0]}
    snap.local_queues = {key(o): o for o in store.list("localqueues")[0]}
    snap.workloads = store.list("workloads")[0]
    snap.namespaces = {o["metadata"]["name"]: o for o in store.list("namespaces")[0]}
    return snap


class Scheduler:
    """One `cycle()` admits what fits and preempts what must; the controller calls it after every change."""

    def __init__(self, store: Store, reasons: Reasons | None = None) -> None:
        self.store = store
        self.reasons = reasons or Reasons()  # which QuotaReserved=False reasons the profile's Kueue writes
        # A preemptor waiting for its victims stays at the head of its ClusterQueue: cq -> workload uid.
        self.sticky: dict[str, str] = {}
        # Workload uid -> the order the controller saw them created in (ties within a second).
        self.arrival: dict[str, int] = {}
        self.checks = CheckSync(store, self.reasons)

    def arrived(self, uid: str, gone: bool = False) -> None:
        if gone:
            self.arrival.pop(uid, None)
        elif uid not in self.arrival:
            self.arrival[uid] = len(self.arrival) and max(self.arrival.values()) + 1

    def ordered(self, snap: Snapshot, cq: str) -> list[JsonDict]:
        sticky = self.sticky.get(cq)
        return pending_in(snap, cq, [sticky] if sticky else [], self.arrival)

    def cycle(self) -> None:
        snap = snapshot(self.store)
        for wl in snap.workloads:
            self.checks.sync(wl, snap.cluster_queues.get(snap.cluster_queue_of(wl) or ""))
        snap = snapshot(self.store)
        for wl in snap.workloads:
            if is_pending(wl):
                blocked = blocker(snap, wl)
                if blocked is not None:
                    granular, message = blocked
                    self._pending(wl, self.reasons.pick(granular, INADMISSIBLE), message, event=False)
            elif has_reservation(wl) and not is_true(wl, "Finished") and not is_true(wl, "Evicted"):
                drained = drained_by(snap, wl)
                if drained is not None:
                    self._evict(wl, *drained)
        for name, cq in snap.cluster_queues.items():
            if cq_active(snap, cq):
                self._schedule_queue(snap, name, cq)
        self._write_queue_statuses(snapshot(self.store))

    # ---- one ClusterQueue

    def _schedule_queue(self, snap: Snapshot, name: str, cq: JsonDict) -> None:
        strict = (cq.get("spec") or {}).get("queueingStrategy") == "StrictFIFO"
        used: quota.Usage = {}
        admitted = [wl for wl in snap.workloads if has_reservation(wl) and not is_true(wl, "Finished")
                    and (wl["status"]["admission"].get("clusterQueue") == name)]
        for wl in admitted:
            quota.add(used, quota.workload_usage(wl))
        parked: set[tuple[object, ...]] = set()
        for wl in self.ordered(snap, name):
            shape = _shape(wl)
            if shape in parked:
                continue  # equivalence hashing: parked with an identical head, not evaluated
            ns = snap.namespaces.get(wl["metadata"].get("namespace", ""))
            if not namespace_matches(cq, ns):
                # ValidateAdmissibility's ErrNamespaceMismatch (scheduler.go nominate): Misconfigured.
                self._pending(wl, self.reasons.pick(MISCONFIGURED, PENDING),
                              "workload namespace doesn't match ClusterQueue selector")
                continue
            result = quota.assign(cq, quota.effective_podsets(wl), used, snap.flavors)
            if result.mode == quota.FIT:
                self._admit(wl, name, result)
                quota.add(used, result.usage)
                if self.sticky.get(name) == wl["metadata"]["uid"]:
                    del self.sticky[name]
                continue
            victims = self._victims(cq, wl, admitted, used, snap) if result.mode == quota.PREEMPT else None
            if victims:
                self._preempt(wl, name, victims)
                self.sticky[name] = wl["metadata"]["uid"]
                n = len(victims)
                self._pending(wl, self.reasons.pick(WAITING_FOR_PREEMPTED, PENDING),
                              f"{result.message}. Pending the preemption of {n} workload(s)")
                return  # the sticky head waits for its victims' quota
            if self.sticky.get(name) == wl["metadata"]["uid"]:
                del self.sticky[name]
            # NoFit: the assignment's reason; Preempt without candidates: WaitingForQuota (scheduler.go).
            granular = result.no_fit_reason if result.mode == quota.NO_FIT else WAITING_FOR_QUOTA
            self._pending(wl, self.reasons.pick(granular or WAITING_FOR_QUOTA, PENDING), result.message)
            if strict:
                return
            parked.add(shape)

    # ---- admission

    def _admit(self, wl: JsonDict, cq: str, result: quota.Assignment) -> None:
        status = clone(wl.get("status") or {})
        generation = wl["metadata"].get("generation")
        status["admission"] = {"clusterQueue": cq, "podSetAssignments": result.podsets}
        set_condition(status, "QuotaReserved", "True", "QuotaReserved", f"Quota reserved in ClusterQueue {cq}",
                      generation)
        checks = cq_checks(self.store_cq(cq))
        # With admission checks, the reservation alone does not admit: the checks' controllers decide.
        admitted = (admitted_on_reservation(status, checks, self.reasons, generation) if checks else True)
        if not checks:
            set_condition(status, "Admitted", "True", "Admitted", "The workload is admitted", generation)
        reset_to_previously(status, "Evicted", generation)
        reset_to_previously(status, "Preempted", generation)
        requeued = condition(wl, "Requeued")
        since = requeued.get("lastTransitionTime") if requeued else wl["metadata"].get("creationTimestamp")
        if not self._write(wl, status):
            return
        self._event(wl, "QuotaReserved",
                    f"Quota reserved in ClusterQueue {cq}, wait time since queued was {seconds_since(since)}s")
        if admitted:
            self._event(wl, "Admitted", f"Admitted by ClusterQueue {cq}, wait time since reservation was 0s")

    def store_cq(self, name: str) -> JsonDict | None:
        try:
            return self.store.get("clusterqueues", None, name)
        except ApiError:
            return None

    def _pending(self, wl: JsonDict, reason: str, message: str, event: bool = True) -> None:
        """QuotaReserved=False with `reason`; the scheduler's verdicts (`event`) also get requeueAndUpdate's
        Warning event, whose reason is the condition's (``Pending``, or the granular one on 0.20); the
        workload controller's queue blockers write no event."""
        current = condition(wl, "QuotaReserved")
        written = condition(wl, "Admitted") or {}
        # SyncAdmittedCondition with UnadmittedWorkloadsObservability on (0.20): a Workload without a
        # reservation also carries Admitted=False NoReservation; with it off (0.19) Admitted is written
        # only when it changes, so a Workload never admitted has none.
        no_reservation = self.reasons.granular and written.get("reason") != NO_RESERVATION[0]
        if not no_reservation and current and (
                current.get("status"), current.get("reason"), current.get("message")) == ("False", reason, message):
            return
        status = clone(wl.get("status") or {})
        generation = wl["metadata"].get("generation")
        set_condition(status, "QuotaReserved", "False", reason, message, generation)
        if no_reservation:
            set_condition(status, "Admitted", "False", *NO_RESERVATION, generation)
        if self._write(wl, status) and event:
            self._event(wl, reason, message, "Warning")

    def _evict(self, wl: JsonDict, reason: str, message: str) -> None:
        """workloadevict.Evict for a stopped queue (HoldAndDrain): the job reconciler then suspends the
        job and requeues the Workload, which the stopped queue then holds (Inadmissible)."""
        status = clone(wl.get("status") or {})
        set_condition(status, "Evicted", "True", reason, message, wl["metadata"].get("generation"))
        count_eviction(status, reason)
        if self._write(wl, status):
            self._event(wl, f"EvictedDueTo{reason}", message)  # patching.ReasonWithCause

    # ---- preemption (withinClusterQueue only: a standalone ClusterQueue has no cohort)

    def _victims(self, cq: JsonDict, wl: JsonDict, admitted: list[JsonDict], used: quota.Usage,
                 snap: Snapshot) -> list[JsonDict]:
        policy = ((cq.get("spec") or {}).get("preemption") or {}).get("withinClusterQueue", "Never")
        mine = priority(wl)

        def allowed(other: JsonDict) -> bool:
            theirs = priority(other)
            if policy == "LowerPriority":
                return theirs < mine
            if policy == "LowerOrNewerEqualPriority":
                newer = other["metadata"].get("creationTimestamp", "") > wl["metadata"].get("creationTimestamp", "")
                return theirs < mine or (theirs == mine and newer)
            return False

        def reserved_at(other: JsonDict) -> str:
            cond = condition(other, "QuotaReserved")
            return str(cond.get("lastTransitionTime", "")) if cond else ""

        candidates = [c for c in admitted if allowed(c)]
        # CandidatesOrdering: evicted first, lowest priority, most recently reserved, UID.
        candidates.sort(key=lambda c: (not is_true(c, "Evicted"), priority(c),
                                       _negated(reserved_at(c)), c["metadata"].get("uid", "")))
        podsets = quota.effective_podsets(wl)
        cq_obj = snap.cluster_queues[wl_cq(wl, snap)]
        remaining = dict(used)
        chosen: list[JsonDict] = []
        for candidate in candidates:
            quota.add(remaining, quota.workload_usage(candidate), -1)
            chosen.append(candidate)
            if quota.assign(cq_obj, podsets, remaining, snap.flavors).mode == quota.FIT:
                break
        else:
            return []
        # fillBackWorkloads: keep a victim out of the set if the Workload still fits with it back.
        for victim in reversed(chosen[:-1]):
            trial = dict(remaining)
            quota.add(trial, quota.workload_usage(victim))
            if quota.assign(cq_obj, podsets, trial, snap.flavors).mode == quota.FIT:
                remaining = trial
                chosen.remove(victim)
        return chosen

    def _preempt(self, preemptor: JsonDict, cq: str, victims: list[JsonDict]) -> None:
        uid = preemptor["metadata"]["uid"]
        job_uid = (preemptor["metadata"].get("labels") or {}).get(JOB_UID_LABEL) or "UNKNOWN"
        message = (f"Preempted to accommodate a workload (UID: {uid}, JobUID: {job_uid}) due to "
                   f"{_WHY['InClusterQueue']}; preemptor path: /{cq}; preemptee path: /{cq}")
        for victim in victims:
            if is_true(victim, "Evicted"):
                continue  # being evicted already: counted, not evicted twice
            status = clone(victim.get("status") or {})
            generation = victim["metadata"].get("generation")
            set_condition(status, "Evicted", "True", "Preempted", message, generation)
            set_condition(status, "Preempted", "True", "InClusterQueue", message, generation)
            count_eviction(status, "Preempted")
            if not self._write(victim, status):
                continue
            self._event(victim, "EvictedDueToPreempted", message)
            priorities = (f"; preemptor effective priority: {priority(preemptor)} (base: {priority(preemptor)}, "
                          f"boost: 0); preemptee effective priority: {priority(victim)} (base: {priority(victim)}, "
                          "boost: 0)")
            self._event(victim, "Preempted", message + priorities)
            ns, name = key(victim)
            self._event(preemptor, "PreemptedWorkload",
                        f"Preempted workload {ns}/{name} (UID: {victim['metadata']['uid']}) in ClusterQueue "
                        f"{cq}{priorities}")

    # ---- ClusterQueue and LocalQueue status

    def _write_queue_statuses(self, snap: Snapshot) -> None:
        for name, cq in snap.cluster_queues.items():
            missing = snap.missing_flavors(cq)
            status = clone(cq.get("status") or {})
            status.update(_counts(snap, lambda wl: _counted_in(snap, wl, name)))  # noqa: B023
            status.update(_usage(snap, name))
            if missing or stop_policy(cq) != "None":
                # inactiveReason: the first reason, every message (stopped first, as Kueue lists them).
                reasons = (["Stopped"] if stop_policy(cq) != "None" else []) + (["FlavorNotFound"] if missing else [])
                messages = (["is stopped"] if stop_policy(cq) != "None" else []) + (
                    [f"references missing ResourceFlavor(s): {','.join(missing)}"] if missing else [])
                set_condition(status, "Active", "False", reasons[0],
                              f"Can't admit new workloads: {', '.join(messages)}.", cq["metadata"].get("generation"))
            else:
                set_condition(status, "Active", "True", "Ready", "Can admit new workloads",
                              cq["metadata"].get("generation"))
            self._write_status("clusterqueues", cq, status)
        for (ns, name), lq in snap.local_queues.items():
            status = clone(lq.get("status") or {})
            status.update(_counts(snap, lambda wl: key(wl)[0] == ns  # noqa: B023 (called at once)
                                  and (wl.get("spec") or {}).get("queueName") == name))  # noqa: B023
            cq_name = (lq.get("spec") or {}).get("clusterQueue", "")
            target = snap.cluster_queues.get(cq_name)
            if stop_policy(lq) != "None":
                set_condition(status, "Active", "False", "Stopped", "LocalQueue is stopped",
                              lq["metadata"].get("generation"))
            elif target is None:
                set_condition(status, "Active", "False", "ClusterQueueDoesNotExist",
                              "Can't submit new workloads to clusterQueue", lq["metadata"].get("generation"))
            elif not cq_active(snap, target):
                set_condition(status, "Active", "False", "ClusterQueueIsInactive",
                              "Can't submit new workloads to clusterQueue", lq["metadata"].get("generation"))
            else:
                set_condition(status, "Active", "True", "Ready", "Can submit new workloads to localQueue",
                              lq["metadata"].get("generation"))
            self._write_status("localqueues", lq, status)

    def _write_status(self, rtype: str, obj: JsonDict, status: JsonDict) -> None:
        if status != obj.get("status"):
            write_status(self.store, rtype, obj, status)

    def _write(self, wl: JsonDict, status: JsonDict) -> bool:
        return write_status(self.store, "workloads", wl, status)

    def _event(self, wl: JsonDict, reason: str, message: str, type_: str = "Normal") -> None:
        event(self.store, wl, reason, message, type_)


def wl_cq(wl: JsonDict, snap: Snapshot) -> str:
    return snap.cluster_queue_of(wl) or ""


def _counted_in(snap: Snapshot, wl: JsonDict, cq: str) -> bool:
    """Counted by the ClusterQueue: admitted in it, or waiting in it through a LocalQueue that is not held
    (the queue manager keeps a stopped LocalQueue's Workloads out of its ClusterQueue)."""
    if _admitted_in(wl) == cq:
        return True
    lq = snap.local_queues.get((key(wl)[0], (wl.get("spec") or {}).get("queueName", "")))
    return snap.cluster_queue_of(wl) == cq and stop_policy(lq) == "None"


def _admitted_in(wl: JsonDict) -> str | None:
    return ((wl.get("status") or {}).get("admission") or {}).get("clusterQueue")


def _negated(timestamp: str) -> tuple[int, ...]:
    """Sorts RFC 3339 timestamps newest first."""
    return tuple(-ord(c) for c in timestamp)


def _shape(wl: JsonDict) -> tuple[object, ...]:
    """The scheduling shape equivalence hashing compares (not commands, args or env)."""
    parts: list[object] = [priority(wl)]
    for ps in (wl.get("spec") or {}).get("podSets") or []:
        spec = (ps.get("template") or {}).get("spec") or {}
        requests = sorted((k, str(v)) for k, v in quota.podset_requests(ps).items())
        parts.append((ps.get("name"), ps.get("count"), tuple(requests),
                      tuple(sorted((spec.get("nodeSelector") or {}).items())),
                      repr(spec.get("tolerations") or [])))
    return tuple(parts)


def _counts(snap: Snapshot, mine: Callable[[JsonDict], bool]) -> JsonDict:
    selected = [wl for wl in snap.workloads if mine(wl) and not is_true(wl, "Finished")]
    return {"pendingWorkloads": sum(1 for wl in selected if is_pending(wl)),
            "reservingWorkloads": sum(1 for wl in selected if has_reservation(wl)),
            "admittedWorkloads": sum(1 for wl in selected if has_reservation(wl) and is_true(wl, "Admitted"))}


def _usage(snap: Snapshot, cq_name: str) -> JsonDict:
    used: quota.Usage = {}
    for wl in snap.workloads:
        if has_reservation(wl) and not is_true(wl, "Finished") and _admitted_in(wl) == cq_name:
            quota.add(used, quota.workload_usage(wl))
    cq = snap.cluster_queues[cq_name]
    flavors = []
    for group in (cq.get("spec") or {}).get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            fname = flavor.get("name", "")
            flavors.append({"name": fname, "resources": [
                {"name": r.get("name"), "total": quota.render(r.get("name", ""),
                                                              used.get((fname, r.get("name", "")), Decimal(0))),
                 "borrowed": "0"} for r in flavor.get("resources") or []]})
    return {"flavorsReservation": flavors, "flavorsUsage": clone(flavors)}


__all__ = ["Scheduler", "now_rfc3339", "snapshot"]
