"""A job's place in Kueue, read from its Kueue Workload and its own status (pure).

The rules are those of docs/reference/kueue-behaviour.md §3.2 ("How a follower tells the states
apart") and §11:

- queued: the Workload is not finished and QuotaReserved is not True (False *or absent*: Kueue parks
  identical Workloads without writing any condition, §5.2); its reason and message are shown
  verbatim, whatever the reason (``Pending`` is deprecated in favour of granular reasons, §3.1);
- admitted: Admitted=True (Kueue then unsuspends the job);
- running: admitted and the job itself Running (or further);
- preempted: Evicted=True with reason ``Preempted`` (other reasons, such as ``PodsReadyTimeout``,
  are evictions too and are told as such); it stays True until the next admission, which resets it
  to False with ``Previously: ...``;
- resumed: admitted again after an eviction;
- finished: Finished=True.

A condition counts only when its status is the string ``"True"``.

:func:`never_admitted` tells a queued job that no admission will come (§3.1, §3.3, §5.3): Kueue's
words for a missing, inactive or stopped queue, a request above the ClusterQueue's maximum, no
flavor that could ever fit, a namespace the ClusterQueue does not select. Only a change by whoever
runs Kueue (a new queue, a larger quota) can admit such a job, so waiting out ``queue_timeout`` is waste.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any

from airflow_tfjob.constants import KUEUE_QUEUE_LABEL
from airflow_tfjob.hooks.kueue import owned_by
from airflow_tfjob.jobs.kinds import JobKind
from airflow_tfjob.jobs.status import JobState, JobStatus, epoch_seconds

#: Where Kueue's per-kind switch lives (§9.2).
CONFIG_MAP = "kueue-manager-config"
CONFIG_NAMESPACE = "kueue-system"

_RUN_STATES = frozenset({JobState.RUNNING, JobState.RESTARTING, JobState.SUCCEEDED, JobState.FAILED})


class QueueState(str, Enum):
    NO_WORKLOAD = "no_workload"
    QUEUED = "queued"
    ADMITTED = "admitted"
    RUNNING = "running"
    PREEMPTED = "preempted"  # evicted, quota not yet released (pods being deleted)
    FINISHED = "finished"


@dataclass(frozen=True)
class Condition:
    type: str
    status: str
    reason: str
    message: str
    since: float | None  # lastTransitionTime, epoch seconds

    @property
    def true(self) -> bool:
        return self.status == "True"


@dataclass(frozen=True)
class QueueView:
    """What the task log says about the job's place in Kueue at one moment."""

    state: QueueState
    queue: str | None  # the LocalQueue
    cluster_queue: str | None  # the ClusterQueue holding (or last holding) the reservation
    workload: str | None  # the Workload's name
    reason: str = ""
    message: str = ""
    eviction: Condition | None = None  # Evicted=True: why the job was stopped (until re-admission)
    queued_since: float | None = None  # when the current stay in the queue began (epoch s)
    reserved_at: float | None = None  # when the quota was reserved (QuotaReserved=True), if it is
    preemptions: int = 0  # Kueue's durable count (status.schedulingStats.evictions, reason Preempted)
    job_suspended: bool = False

    @property
    def waited(self) -> float | None:
        """Seconds the last stay in the queue lasted, once admitted (Kueue's QueuedWaitTime)."""
        if self.reserved_at is None or self.queued_since is None:
            return None
        return max(0.0, self.reserved_at - self.queued_since)


def conditions(obj: Mapping[str, Any]) -> dict[str, Condition]:
    """The object's conditions by type (the last entry of a type wins)."""
    found: dict[str, Condition] = {}
    for raw in (obj.get("status") or {}).get("conditions") or ():
        if isinstance(raw, Mapping) and isinstance(raw.get("type"), str):
            found[raw["type"]] = Condition(
                type=raw["type"],
                status=str(raw.get("status") or ""),
                reason=str(raw.get("reason") or ""),
                message=str(raw.get("message") or ""),
                since=epoch_seconds(raw.get("lastTransitionTime")),
            )
    return found


def queue_label(job: Mapping[str, Any]) -> str | None:
    """The LocalQueue the job asks for (its own label, which is what Kueue reads: §4.1)."""
    value = ((job.get("metadata") or {}).get("labels") or {}).get(KUEUE_QUEUE_LABEL)
    return str(value) if value else None


def preemption_count(workload: Mapping[str, Any]) -> int:
    """Kueue's count of the Workload's preemptions (durable across requeues, §2.5)."""
    stats = ((workload.get("status") or {}).get("schedulingStats") or {}).get("evictions") or ()
    total = 0
    for entry in stats:
        if isinstance(entry, Mapping) and entry.get("reason") == "Preempted":
            count = entry.get("count")
            total += count if isinstance(count, int) and not isinstance(count, bool) else 0
    return total


def job_suspended(job: Mapping[str, Any]) -> bool:
    """The job is (or is being) suspended: runPolicy.suspend, or its Suspended condition True."""
    run_policy = (job.get("spec") or {}).get("runPolicy") or {}
    if run_policy.get("suspend") is True:
        return True
    found = conditions(job).get("Suspended")
    return found is not None and found.true


def view(job: Mapping[str, Any], status: JobStatus, workload: Mapping[str, Any] | None) -> QueueView:
    """The job's place in Kueue from its Workload (None: none found) and its own status."""
    suspended = job_suspended(job) or status.state is JobState.SUSPENDED
    if workload is None:
        return QueueView(QueueState.NO_WORKLOAD, queue_label(job), None, None, job_suspended=suspended)
    conds = conditions(workload)
    spec = workload.get("spec") or {}
    admission = (workload.get("status") or {}).get("admission") or {}
    meta = workload.get("metadata") or {}
    reserved, admitted, evicted = (
        conds.get(t) is not None and conds[t].true for t in ("QuotaReserved", "Admitted", "Evicted")
    )
    requeued = conds.get("Requeued")
    # Kueue's own wait clock (workload.QueuedWaitTime): from the Requeued condition's last transition
    # when it exists (True after a preemption, False then True after a PodsReady timeout's backoff),
    # else from the creation.
    since = requeued.since if requeued is not None and requeued.since else None
    common: dict[str, Any] = {
        "queue": str(spec.get("queueName") or "") or queue_label(job),
        "cluster_queue": admission.get("clusterQueue") or None,
        "workload": meta.get("name"),
        "eviction": conds["Evicted"] if evicted else None,
        "queued_since": since or epoch_seconds(meta.get("creationTimestamp")),
        "reserved_at": conds["QuotaReserved"].since if reserved else None,
        "preemptions": preemption_count(workload),
        "job_suspended": suspended,
    }
    finished = conds.get("Finished")
    if finished is not None and finished.true:
        return QueueView(QueueState.FINISHED, reason=finished.reason, message=finished.message, **common)
    if evicted and reserved:
        eviction = conds["Evicted"]
        return QueueView(QueueState.PREEMPTED, reason=eviction.reason, message=eviction.message, **common)
    if not reserved:
        pending = conds.get("QuotaReserved")
        reason, message = (pending.reason, pending.message) if pending is not None else ("", "")
        return QueueView(QueueState.QUEUED, reason=reason, message=message, **common)
    if not admitted:
        checks = conds.get("Admitted")
        reason = checks.reason if checks is not None else "QuotaReserved"
        message = checks.message if checks is not None else "quota reserved, waiting for admission checks"
        return QueueView(QueueState.QUEUED, reason=reason, message=message, **common)
    state = QueueState.RUNNING if status.state in _RUN_STATES and not suspended else QueueState.ADMITTED
    return QueueView(state, **common)


def position_of(
    summary: Mapping[str, Any] | None, workload: str | None, job_uid: str
) -> tuple[int, int] | None:
    """(position in the LocalQueue, in the ClusterQueue), 0-based, from a PendingWorkloadsSummary."""
    for item in (summary or {}).get("items") or ():
        if not isinstance(item, Mapping):
            continue
        meta = item.get("metadata") or {}
        if (workload and meta.get("name") == workload) or owned_by(item, job_uid):
            local, cluster = item.get("positionInLocalQueue"), item.get("positionInClusterQueue")
            if isinstance(local, int) and isinstance(cluster, int):
                return local, cluster
    return None


def where(current: QueueView, position: tuple[int, int] | None) -> str:
    """``in LocalQueue q (n workload(s) ahead in the LocalQueue, m in its ClusterQueue)``."""
    text = f"in LocalQueue {current.queue}"
    if position is not None:
        local, cluster = position
        text += f" ({local} workload(s) ahead in the LocalQueue, {cluster} in its ClusterQueue)"
    return text


def why(current: QueueView) -> str:
    """``: <reason>: <message>`` as Kueue wrote them (they say what is short), or what is awaited."""
    if current.message:
        return f": {current.reason}: {current.message}" if current.reason else f": {current.message}"
    return ": waiting for Kueue to reserve quota"


def describe(current: QueueView, position: tuple[int, int] | None = None) -> str:
    """One phrase on the job's place in Kueue (the sensor's poke line)."""
    if current.state is QueueState.NO_WORKLOAD:
        return f"Kueue: no Workload for the job (LocalQueue {current.queue})"
    if current.state is QueueState.QUEUED:
        again = " again after an eviction" if current.eviction is not None else ""
        return f"Kueue: queued{again} " + where(current, position) + why(current)
    if current.state is QueueState.PREEMPTED:
        return f"Kueue: evicted ({current.reason}): {current.message}"
    if current.state is QueueState.FINISHED:
        return f"Kueue: finished ({current.reason})"
    if current.state is QueueState.ADMITTED:
        return f"Kueue: admitted by ClusterQueue {current.cluster_queue}"
    return f"Kueue: running (admitted by ClusterQueue {current.cluster_queue})"


def newest(workloads: list[dict[str, Any]] | None) -> dict[str, Any] | None:
    """The job's current Workload among those found (a deleted one may linger while a new one exists)."""
    if not workloads:
        return None
    return max(workloads, key=lambda w: str((w.get("metadata") or {}).get("creationTimestamp")))


def integration_hint(kind: JobKind) -> str:
    """What to change when Kueue ignores the kind: its framework name and where it is switched on."""
    return (
        f'add "{kind.kueue_framework}" to integrations.frameworks in the {CONFIG_MAP} ConfigMap '
        f"(namespace {CONFIG_NAMESPACE}) and restart the Kueue manager"
    )


#: QuotaReserved=False reasons that mean "never, as things stand": ``Inadmissible`` (default gates: the
#: workload controller's queue blockers, §3.3), and the granular reasons of
#: ``UnadmittedWorkloadsObservability`` (off by default in 0.19, §3.1) for the same cases.
NEVER_REASONS = frozenset({"Inadmissible", "Misconfigured", "Suspended", "ExceedsMaxQuota", "NoMatchingFlavor"})

#: Messages the scheduler writes under reason ``Pending`` that no wait cures (§3.3, §5.4).
_NEVER_PENDING = re.compile(
    r"^(ClusterQueue \S+ is inactive|ClusterQueue \S+ not found"
    r"|workload namespace doesn't match ClusterQueue selector"
    r"|resources validation failed|resources didn't satisfy LimitRange constraints)"
)
#: A pod set's flavor reasons that no release of quota cures (flavorassigner.go, §5.3): the request is
#: above the flavor's maximum capacity, no flavor covers the resource, the flavor's node labels or
#: taints exclude the pod, or the flavor does not exist. "insufficient unused quota ... more needed"
#: is not among them: that waits for others to finish or be preempted.
_NEVER_FLAVOR_REASONS = re.compile(
    r"insufficient quota for \S+ in flavor \S+, previously considered podsets requests \([^)]*\) "
    r"\+ current podset request \([^)]*\) > maximum capacity \([^)]*\)"
    r"|resource \S+ unavailable in ClusterQueue"
    r"|flavor \S+ doesn't match node affinity"
    r"|untolerated taint .+? in flavor \S+"
    r"|flavor \S+ not found"
)
_POD_SET = re.compile(r"couldn't assign flavors to pod set [^:]+: ")


def never_admitted(current: QueueView) -> bool:
    """Whether Kueue's reason and message for a queued job say it cannot be admitted as things stand.

    Read from Kueue's own words (its condition reason, and for ``Pending`` its message), so that a
    job Kueue would admit once quota frees up (``insufficient unused quota``, a pending preemption,
    the Evicted message of a requeued job) is never taken for one it cannot admit.
    """
    if current.state is not QueueState.QUEUED or not current.message:
        return False
    if current.reason in NEVER_REASONS:
        return True
    if current.reason != "Pending":
        return False
    if _NEVER_PENDING.match(current.message):
        return True
    if not current.message.startswith("couldn't assign flavors to pod set "):
        return False
    rest = _NEVER_FLAVOR_REASONS.sub("", _POD_SET.sub("", current.message))
    # Only the separators the reasons were joined with (", " within a pod set, "; " between pod sets)
    # may be left: any other reason means the job could fit some day.
    return re.fullmatch(r"[,;\s]*", rest) is not None


#: Why a job can never be admitted, by Kueue's words, and what whoever runs the queue or the job does about it:
#: (granular reason, the words of the message, the fix naming what the words name, the fix by the reason
#: alone). Kueue 0.20 (UnadmittedWorkloadsObservability on) names the case in the reason; 0.19's default
#: gates write ``Inadmissible``/``Pending`` and leave it to the message, so each case is recognised by either.
_FIXES: tuple[tuple[str, re.Pattern[str], str, str], ...] = (
    ("Misconfigured", re.compile(r"^LocalQueue (\S+) (?:doesn't exist|is terminating or missing)"),
     "create LocalQueue {0} in the job's namespace, or set kueue_queue to a LocalQueue that exists",
     "create the missing LocalQueue or ClusterQueue, or set kueue_queue to a LocalQueue that exists"),
    ("Misconfigured", re.compile(r"^ClusterQueue (\S+) (?:doesn't exist|not found|is terminating or missing)"),
     "create ClusterQueue {0}, or point the LocalQueue at a ClusterQueue that exists", ""),
    ("Misconfigured", re.compile(r"^workload namespace doesn't match ClusterQueue selector"),
     "add the job's namespace to the ClusterQueue's spec.namespaceSelector, or use a LocalQueue whose "
     "ClusterQueue selects it", ""),
    ("Suspended", re.compile(r"^((?:Local|Cluster)Queue \S+) is (?:inactive|stopped)"),
     "resume {0} (spec.stopPolicy: None; a ClusterQueue is also inactive while a ResourceFlavor it names "
     "is missing)",
     "resume the stopped queue (spec.stopPolicy: None) or create the ResourceFlavors its ClusterQueue names"),
    ("ExceedsMaxQuota", re.compile(r"> maximum capacity"),
     "lower the job's resource requests to what the ClusterQueue can ever give, or raise its nominalQuota",
     ""),
    ("NoMatchingFlavor", re.compile(r"unavailable in ClusterQueue|doesn't match node affinity|untolerated taint"
                                    r"|flavor \S+ not found"),
     "add the resource to the ClusterQueue's resourceGroups, or match a flavor's node labels and taints", ""),
)
_FIX_ANY = "fix the queue or the job's resource requests"


def never_fix(current: QueueView) -> str:
    """What to change so that a job :func:`never_admitted` can be admitted: the case Kueue's message
    describes (the names in it), else the case its reason names (0.20's granular reasons), else general
    advice. Read from both because 0.19's default gates write ``Inadmissible``/``Pending`` for all of them."""
    message = current.message or ""
    for _reason, words, fix, _by_reason in _FIXES:
        found = words.search(message)
        if found is not None:
            return fix.format(*found.groups())
    for reason, _words, fix, by_reason in _FIXES:
        if current.reason == reason:
            return by_reason or fix
    return _FIX_ANY
