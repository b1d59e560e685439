"""The follow core's view of a job's place in Kueue: read, told once per change, held to its limits.

The Kueue follow part (part.py) makes one :class:`QueueTracker` for a job that carries Kueue's queue
label and calls :meth:`QueueTracker.observe` on every change of the job and whenever
:meth:`QueueTracker.wake_in` says a look is due; the same code runs on the worker and in the triggerer. It reads the Workload
and the queue position through the async hook (``hooks/kueue.py``), polling rather than watching:
positions have no watch, and a Workload's changes that matter while the job runs (an eviction)
come with a change of the job, which wakes the tracker at once. Polls slow down while nothing
changes, so a job queued for hours costs a request every few seconds, not more.

What it writes (``[kueue]`` lines, each state once; a queued job again when its reason, message or
position changes): queued (LocalQueue, ClusterQueue, how many wait ahead, Kueue's reason and
message verbatim, time waited), admitted (after how long), running, preempted or evicted (Kueue's
message: it names the preemptor's UIDs), resumed (admitted again), and a warning when no Workload
appears for the job within ``kueue_workload_window`` (the kind's Kueue integration may be off).

What it decides (a :class:`~airflow_tfjob.follow.outcome.FollowOutcome` that ends the follow; the
operator deletes the job for each, so no failure leaves a job behind):
``queue_timeout`` (queued longer than ``queue_timeout``), ``preempted`` (with
``on_preemption="fail"``), ``kueue_ignored`` (no Workload, with ``kueue_require_admission``) and
``kueue_inadmissible``: Kueue's reason says the job can never be admitted as things stand (a missing,
inactive or stopped queue, a request above the ClusterQueue's maximum: ``workload.never_admitted``),
decided once the same words have stood for ``NEVER_CONFIRM`` seconds (Kueue's cache may lag behind a
queue created just before the job, and it corrects itself within a scheduling cycle), without waiting
for ``queue_timeout``.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_tfjob.constants import KUEUE_QUEUE_LABEL
from airflow_tfjob.follow.outcome import FollowOptions, FollowOutcome
from airflow_tfjob.hooks.kueue import GROUP
from airflow_tfjob.integrations.kueue.workload import (
    QueueState,
    QueueView,
    integration_hint,
    never_admitted,
    never_fix,
    newest,
    position_of,
    queue_label,
    view,
    where,
    why,
)
from airflow_tfjob.jobs.kinds import JobKind
from airflow_tfjob.jobs.status import JobStatus

if TYPE_CHECKING:
    from airflow_tfjob.hooks.aio import AsyncKubeflowJobHook

log = logging.getLogger(__name__)

_REFUSED = "its Workload cannot be read ({status}: refused to the connection's account)"

# Kueue's preemption message: "Preempted to accommodate a workload (UID: <wl>, JobUID: <job>) due to ..."
_PREEMPTOR = re.compile(r"JobUID: ([^)\s,]+)\)")

#: Seconds Kueue's "never admissible" words must stand (read again at the end) before the follow ends.
NEVER_CONFIRM = 3.0
# Seconds between looks at the Workload, by state: how soon a change shows in the task log.
_FIRST_LOOK = 0.5  # until the Workload appears
_QUEUED_LOOK, _QUEUED_MAX = 1.0, 10.0  # grows while nothing changes
_ADMITTED_LOOK = 1.0  # admitted or being preempted: the next step comes soon
_QUIET_LOOK = 30.0  # running (the job's own change wakes the tracker), or no Workload after the window


def _seconds(value: float) -> str:
    return f"{value:.0f} s"


@dataclass(frozen=True)
class KueueOptions:
    """The Kueue part's options (operator parameters; only for a job with the queue label): seconds
    allowed in the queue (None: no limit), whether a preemption fails the follow ("wait" | "fail"),
    whether a job Kueue ignores fails it, and how long a Workload may take to appear before Kueue
    counts as ignoring it."""

    queue_timeout: float | None = None
    on_preemption: str = "wait"
    kueue_require_admission: bool = False
    kueue_workload_window: float = 30.0


class QueueTracker:
    """One job's place in Kueue during one follow (see the module's docstring)."""

    def __init__(
        self,
        hook: AsyncKubeflowJobHook,
        name: str,
        namespace: str,
        options: FollowOptions,
        sink: Callable[[str], None],
    ) -> None:
        self.hook = hook
        self.name = name
        self.namespace = namespace
        self.limits = options.read(KueueOptions)
        self.kind: JobKind = options.job_kind
        self.ref = f"{self.kind.kind} {namespace}/{name}"
        self.sink = sink
        self.started_at = time.time()
        self.next_look = 0.0
        self.interval = _QUEUED_LOOK
        self.job_version: str | None = None
        self.workload: dict[str, Any] | None = None
        self.api_missing: str | None = None  # why Workloads cannot be read at all
        self.positions = True  # False once the visibility API said it gives none
        self.position: tuple[int, int] | None = None
        self.view: QueueView | None = None
        self.shown: tuple[Any, ...] | None = None
        self.evictions: set[tuple[str, float | None]] = set()
        self.preempted_seen = 0
        self.admissions: set[float] = set()
        self.waited = 0.0
        self.warned = False
        self.preemptor: str | None = None  # the job that preempted this one, when it can be named
        # Kueue's "never admissible" (reason, message) and when this tracker first read it.
        self.never: tuple[tuple[str, str], float] | None = None

    # -- the follow core's calls -----------------------------------------------------------------

    def wake_in(self) -> float:
        """Seconds until the tracker wants another look (the follow core waits no longer)."""
        if self.view is not None and self.view.state is QueueState.FINISHED:
            return 3600.0
        due = self.next_look
        if self.never is not None:
            due = min(due, self.never[1] + NEVER_CONFIRM)
        return max(0.05, due - time.time())

    async def observe(self, job: Mapping[str, Any], status: JobStatus) -> FollowOutcome | None:
        """Look again if due (or the job changed), tell what changed; an outcome ends the follow."""
        version = str((job.get("metadata") or {}).get("resourceVersion") or "")
        confirm = self.never is not None and time.time() >= self.never[1] + NEVER_CONFIRM
        if version != self.job_version or time.time() >= self.next_look or confirm:
            self.job_version = version
            await self._look(job)
        current = view(job, status, self.workload)
        if self.position is not None and current.state is not QueueState.QUEUED:
            self.position = None
        if (
            current.eviction is not None
            and (current.eviction.reason, current.eviction.since) not in self.evictions
        ):
            self.preemptor = await self._preemptor(current.eviction.message)
        self._tell(current)
        self.view = current
        return self._verdict(current, status)

    def summary(self) -> dict[str, Any]:
        """What the task's result reports: the queue, the time waited in it, the preemptions."""
        current = self.view
        preemptions = max(self.preempted_seen, current.preemptions if current is not None else 0)
        return {
            "queue": current.queue if current is not None else None,
            "cluster_queue": current.cluster_queue if current is not None else None,
            "workload": current.workload if current is not None else None,
            "wait_seconds": round(self.waited, 3),
            "preemptions": preemptions,
        }

    def waiting_for(self) -> str:
        """What the job waits for now, for a timeout's message (the queue, position, Kueue's message)."""
        current = self.view
        if current is None or current.state is QueueState.NO_WORKLOAD:
            return f"no Kueue Workload (queue {queue_label_or(current)})"
        if current.state is QueueState.QUEUED:
            again = "again after an eviction " if current.eviction is not None else ""
            return f"queued {again}" + self._where(current) + self._why(current)
        return f"{current.state.value} (LocalQueue {current.queue}, ClusterQueue {current.cluster_queue})"

    # -- reading ---------------------------------------------------------------------------------

    async def _look(self, job: Mapping[str, Any]) -> None:
        uid = str((job.get("metadata") or {}).get("uid") or "")
        before = self.workload
        if self.api_missing is None and uid:
            try:
                found = await self.hook.list_workloads(self.namespace, uid)
            except Exception as error:
                if getattr(error, "status", None) in (401, 403):
                    self.api_missing = _REFUSED.format(status=error.status)  # type: ignore[attr-defined]
                else:  # the retry policy gave up: look again later, keep the last view
                    log.warning("Could not read the Kueue Workload of %s: %s", self.ref, error)
                found = [] if self.workload is None else [self.workload]
            if found is None:
                self.api_missing = f"the cluster serves no Kueue Workload API ({GROUP})"
            elif found:
                self.workload = newest(found)
        queue = (self.workload or {}).get("spec", {}).get("queueName") or queue_label(job)
        self.position = None
        if self.positions and queue and self.workload is not None and _queued(self.workload):
            try:
                summary = await self.hook.pending_workloads(self.namespace, str(queue))
            except Exception as error:  # a position is a nicety: never a reason to stop following
                log.debug("No queue position for %s: %s", self.ref, error)
                summary = {}
            if summary is None:
                self.positions = False
            self.position = position_of(summary, (self.workload.get("metadata") or {}).get("name"), uid)
        self._schedule(before)

    async def _preemptor(self, message: str) -> str | None:
        """The preempting job, from the JobUID Kueue's message names, when it runs in this namespace."""
        found = _PREEMPTOR.search(message)
        if found is None:
            return None
        try:
            workloads = await self.hook.list_workloads(self.namespace, found.group(1))
        except Exception as error:  # naming it is a nicety: the message has its UIDs anyway
            log.debug("Could not name the job that preempted %s: %s", self.ref, error)
            return None
        for ref in ((newest(workloads) or {}).get("metadata") or {}).get("ownerReferences") or ():
            return f"{ref.get('kind')} {self.namespace}/{ref.get('name')}"
        return None

    def _schedule(self, before: dict[str, Any] | None) -> None:
        state = self.view.state if self.view is not None else QueueState.NO_WORKLOAD
        if self.workload is None:
            wait = _QUIET_LOOK if (self.warned or self.api_missing) else _FIRST_LOOK
        elif state is QueueState.RUNNING:
            wait = _QUIET_LOOK
        elif (
            state is QueueState.QUEUED
            and before is not None
            and _conditions_of(before) == _conditions_of(self.workload)
        ):
            self.interval = min(_QUEUED_MAX, self.interval * 1.5)
            wait = self.interval
        else:
            self.interval = _QUEUED_LOOK
            wait = _ADMITTED_LOOK
        self.next_look = time.time() + wait

    # -- telling ---------------------------------------------------------------------------------

    def _tell(self, current: QueueView) -> None:
        if current.eviction is not None:
            seen = (current.eviction.reason, current.eviction.since)
            if seen not in self.evictions:
                self.evictions.add(seen)
                self._say_evicted(current)
        if current.reserved_at is not None and current.reserved_at not in self.admissions:
            self.admissions.add(current.reserved_at)
            self.waited += current.waited or 0.0
            self._show(("admitted", current.reserved_at), self._admitted_line(current))
        if current.state is QueueState.QUEUED:
            key = ("queued", current.reason, current.message, self.position, current.eviction is not None)
            self._show(
                key, "queued " + self._where(current) + self._waited_so_far(current) + self._why(current)
            )
        elif current.state is QueueState.RUNNING:
            again = " again after a preemption" if self.evictions else ""
            self._show(
                ("running", current.reserved_at),
                f"running{again} (admitted by ClusterQueue {current.cluster_queue})",
            )
        elif current.state is QueueState.NO_WORKLOAD and self._missing_for_good():
            if not self.warned:
                self.warned = True
                self.sink(f"[kueue] warning: {self._ignored_message(current)}")

    def _show(self, key: tuple[Any, ...], text: str) -> None:
        if key != self.shown:
            self.shown = key
            self.sink(f"[kueue] {text}")

    def _say_evicted(self, current: QueueView) -> None:
        assert current.eviction is not None
        if current.eviction.reason == "Preempted":
            self.preempted_seen += 1
            what = "preempted"
        else:
            what = f"evicted ({current.eviction.reason})"
        by = f" by {self.preemptor}" if self.preemptor and current.eviction.reason == "Preempted" else ""
        self.sink(
            f"[kueue] {what}{by}: {current.eviction.message}; Kueue suspends the job (its pods are deleted) "
            f"and queues it again in LocalQueue {current.queue}"
        )
        self.shown = None

    def _admitted_line(self, current: QueueView) -> str:
        waited = f" after {_seconds(current.waited)} in the queue" if current.waited is not None else ""
        if self.evictions:
            return (
                f"resumed: admitted again by ClusterQueue {current.cluster_queue}{waited} "
                f"(the same {self.kind.kind}; preemptions so far: {max(self.preempted_seen, current.preemptions)})"
            )
        return f"admitted by ClusterQueue {current.cluster_queue}{waited}"

    def _where(self, current: QueueView) -> str:
        return where(current, self.position)

    def _waited_so_far(self, current: QueueView) -> str:
        if current.queued_since is None:
            return ""
        return f", waiting {_seconds(max(0.0, time.time() - current.queued_since))}"

    _why = staticmethod(why)

    def _missing_for_good(self) -> bool:
        return (
            self.api_missing is not None
            or time.time() - self.started_at >= self.limits.kueue_workload_window
        )

    def _ignored_message(self, current: QueueView) -> str:
        asks = f"{self.ref} asks for Kueue LocalQueue {current.queue} ({queue_label_key()}) but"
        if self.api_missing is not None and self.api_missing.startswith(_REFUSED[:20]):
            # Not Kueue's doing: the account cannot see whether the job is queued or admitted.
            return (
                f"{asks} {self.api_missing}: grant list on workloads (kueue.x-k8s.io) to the connection's "
                "account (airflow_tfjob/rbac/role.yaml); until then the task log cannot tell queued from admitted."
            )
        why = (
            self.api_missing
            or f"no Kueue Workload appeared for it within {self.limits.kueue_workload_window:g} s"
        )
        after = (
            "it stays suspended until someone resumes it"
            if current.job_suspended
            else "it runs outside Kueue's quota"
        )
        return (
            f"{asks} {why}: Kueue's integration for {self.kind.kind} may be off; to enable it, "
            f"{integration_hint(self.kind)}. Meanwhile {after}."
        )

    # -- deciding --------------------------------------------------------------------------------

    def _verdict(self, current: QueueView, status: JobStatus) -> FollowOutcome | None:
        if (
            current.state is QueueState.NO_WORKLOAD
            and self.limits.kueue_require_admission
            and self._missing_for_good()
        ):
            return FollowOutcome(
                "kueue_ignored", status, self._ignored_message(current) + " (kueue_require_admission=True)"
            )
        if (
            self.limits.on_preemption == "fail"
            and current.eviction is not None
            and current.eviction.reason == "Preempted"
        ):
            return FollowOutcome(
                "preempted",
                status,
                f"{self.ref} was preempted (on_preemption='fail'): {current.eviction.message}",
            )
        timeout = self.limits.queue_timeout
        if timeout is not None and self._queued(current):
            since = current.queued_since if current.queued_since is not None else self.started_at
            if time.time() - since >= timeout:
                return FollowOutcome(
                    "queue_timeout",
                    status,
                    f"{self.ref} was not admitted within queue_timeout={timeout:g} s: {self.waiting_for()}",
                )
        # After queue_timeout: a limit the user set that has passed is the first thing to say.
        return self._inadmissible(current, status)

    def _inadmissible(self, current: QueueView, status: JobStatus) -> FollowOutcome | None:
        """Kueue's words say never: end once they have stood for NEVER_CONFIRM seconds (re-read)."""
        if not never_admitted(current):
            self.never = None
            return None
        words = (current.reason, current.message)
        if self.never is None or self.never[0] != words:
            self.never = (words, time.time())
            return None
        if time.time() - self.never[1] < NEVER_CONFIRM:
            return None
        return FollowOutcome(
            "kueue_inadmissible",
            status,
            f"{self.ref} can never be admitted by Kueue as things stand, so it was not left to wait"
            f"{self._timeout_phrase()}: {current.reason}: {current.message} (LocalQueue {current.queue}; "
            f"{never_fix(current)}, then run the task again)",
        )

    def _timeout_phrase(self) -> str:
        timeout = self.limits.queue_timeout
        return f" out queue_timeout={timeout:g} s" if timeout is not None else ""

    def _queued(self, current: QueueView) -> bool:
        if current.state is QueueState.QUEUED:
            return True
        return current.state is QueueState.NO_WORKLOAD and current.job_suspended


def queue_label_key() -> str:
    return f"label {KUEUE_QUEUE_LABEL}"


def queue_label_or(current: QueueView | None) -> str:
    return (current.queue if current is not None else None) or "?"


def _queued(workload: Mapping[str, Any]) -> bool:
    """QuotaReserved not True: the only Workloads the visibility API lists."""
    for cond in (workload.get("status") or {}).get("conditions") or ():
        if isinstance(cond, Mapping) and cond.get("type") == "QuotaReserved":
            return cond.get("status") != "True"
    return True


def _conditions_of(workload: Mapping[str, Any]) -> Any:
    return (workload.get("status") or {}).get("conditions")
