"""The follow core: watch a job (TFJob or another kubeflow.org/v1 kind) to its end while streaming its logs, events and metrics.

The synchronous operator runs it with `asyncio.run` and the trigger runs it in the triggerer, so both
modes report the same outcome, the same log lines and the same diagnostics. It imports nothing from
Airflow: the caller passes a hook and a sink (a callable that writes one record to the task log; a
record holds one line or several, joined with newlines, each line starting with its source).

Requests do not grow with the time spent waiting: the job comes from the shared watch (one stream per
namespace), pods and events from one watch each per followed job (only when logs are followed), and
pods are listed on demand otherwise (start-up check until every replica has started, diagnostics).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from airflow_tfjob import diagnostics
from airflow_tfjob.aio import wait_event
from airflow_tfjob.constants import KUEUE_QUEUE_LABEL
from airflow_tfjob.follow_diagnosis import gather_diagnosis
from airflow_tfjob.follow_outcome import FollowOptions, FollowOutcome
from airflow_tfjob.hooks.common import job_pod_selector
from airflow_tfjob.kinds import TRAINJOB
from airflow_tfjob.logs import (
    JobLogFollower,
    LogBatcher,
    LogLimits,
    LogSelection,
    ReplicaFollower,
    format_timestamp,
    parse_timestamp,
)
from airflow_tfjob.metrics import MetricsCollector
from airflow_tfjob.progress import ProgressTracker
from airflow_tfjob.status import JobState, JobStatus, as_ended, interpret
from airflow_tfjob.trainjob import pods as trainjob_pods
from airflow_tfjob.watching import reflect

if TYPE_CHECKING:
    from airflow_tfjob.hooks.tfjob import AsyncTFJobHook
    from airflow_tfjob.kueue.tracker import QueueTracker

log = logging.getLogger(__name__)

Sink = Callable[[str], None]


class _JobFollow:
    """State of one follow_job call: the watches' caches, the log followers, the outcome."""

    def __init__(
        self,
        hook: AsyncTFJobHook,
        name: str,
        namespace: str,
        options: FollowOptions,
        sink: Sink,
        cursors: Mapping[str, Any] | None,
        earlier: FollowOutcome | None = None,
    ) -> None:
        self.hook = hook
        self.name = name
        self.namespace = namespace
        self.options = options
        self.kind = options.job_kind
        self.ref = f"{self.kind.kind} {namespace}/{name}"  # how messages name the job
        # Every line of this follow (replicas, events, diagnostics) goes through one batcher: in order,
        # and as few task-log records as possible.
        self.sink = LogBatcher(sink)
        self.resumed = bool(cursors) or earlier is not None
        self.pods: dict[str, dict] = {}  # by pod uid, last known state, deleted pods kept
        self.events: dict[str, dict] = {}  # by event uid
        self.job: dict[str, Any] | None = None
        self.metrics = MetricsCollector(options.metrics, history=options.metrics_history)
        # A drain continues the earlier follow: its metrics, its captured value, its diagnosis.
        self.earlier = earlier
        if earlier is not None:
            self.metrics.restore(earlier.metrics)
        self.progress = ProgressTracker.for_follow(options.progress, earlier.progress if earlier is not None else None)
        self.tasks: list[asyncio.Task[None]] = []
        self.logs: JobLogFollower | None = None
        self.startup_base = time.time()
        self.started = False
        self._shown_events: dict[str, int] = {}
        self._early_pods: list[tuple[str, dict]] = []  # pod events that came before the job object
        self.pods_synced = asyncio.Event()  # set once the pod watch has listed: drain knows every replica
        self.return_payload: str | None = earlier.return_payload if earlier is not None else None
        self.queue: QueueTracker | None = None  # a job with Kueue's queue label: its place in Kueue
        if options.reads_logs:
            selection = LogSelection.parse(options.log_replicas) if options.get_logs else LogSelection()
            self.logs = JobLogFollower(
                hook,
                namespace,
                selection,
                self.sink,
                limits=LogLimits(
                    rate_per_replica=options.log_rate_per_replica, total_cap=options.log_total_cap
                ),
                cursors={k: v for k, v in (cursors or {}).items() if not k.startswith("_")},
                # A call per line only if needed.
                on_line=self._on_line if options.metrics or self.progress is not None else None,
                capture_prefix=options.return_marker,
                on_capture=self._on_capture,
                container=self.kind.container,
                rank0=self._rank0,
                selected_as=self._tf_type if self.kind is TRAINJOB else None,
            )

    # -- feeds ----------------------------------------------------------------------------------

    def _rank0(self) -> tuple[str, int] | None:
        """Worker 0 when the job has neither Chief nor Master: rank 0 even where the operator labels no
        pod job-role=master (a PaddleJob in collective mode); None while the job is not known."""
        if self.job is None:
            return None
        if self.kind is TRAINJOB:
            return trainjob_pods.rank0(self.job)
        specs = (self.job.get("spec") or {}).get(self.kind.spec_key) or {}
        types = {str(key).lower() for key in specs}
        return None if types & {"chief", "master"} else ("worker", 0)

    def _tf_type(self, rtype: str) -> str:
        """A TrainJob replica's TFJob type where the job is a TFJob run as a TrainJob (log_replicas)."""
        return trainjob_pods.tf_type(self.job or {}, rtype)

    def _on_line(self, replica: ReplicaFollower, ts: int, text: str) -> None:
        if replica.state.pod is None or not replica.master:
            return
        if self.options.metrics:
            self.metrics.feed(f"{format_timestamp(ts)} {text}" if self.options.metrics_history else text)
        if self.progress is not None:
            line = self.progress.feed_line(text)
            if line is not None:
                self.sink(f"[progress] {line}")

    def _on_capture(self, replica: ReplicaFollower, payload: str) -> None:
        self.return_payload = payload

    def _on_pod(self, etype: str, pod: dict) -> None:
        uid = str((pod.get("metadata") or {}).get("uid") or "")
        self.pods[uid] = pod
        if self.logs is None:
            return
        if self.job is None:
            # Which replica is rank 0 may depend on the job's spec (_rank0): its pods wait for it.
            self._early_pods.append((etype, pod))
            return
        self._feed_pod(etype, pod)

    def _job_known(self, job: dict[str, Any]) -> None:
        self.job = job
        early, self._early_pods = self._early_pods, []
        for etype, pod in early:
            self._feed_pod(etype, pod)

    def _feed_pod(self, etype: str, pod: dict) -> None:
        assert self.logs is not None
        if etype == "DELETED":
            self.logs.pod_deleted(pod)
        else:
            self.logs.update_pod(pod)

    def _on_event(self, etype: str, ev: dict) -> None:
        if etype == "DELETED":
            return
        uid = str((ev.get("metadata") or {}).get("uid") or id(ev))
        self.events[uid] = ev
        count = int(ev.get("count") or 1)
        shown = self._shown_events.get(uid)
        # A repeat of a Normal event says nothing new (the operator re-emits ExitedWithCode on every
        # reconcile); a repeated Warning (BackOff, FailedScheduling) is news: show it with its count.
        if shown == count or (shown is not None and ev.get("type") != "Warning"):
            return
        self._shown_events[uid] = count
        if self.options.log_events and not self._suppress_events:
            self.sink(f"[events] {diagnostics.format_event(ev)}")

    _suppress_events = False

    # -- start-up tracking ----------------------------------------------------------------------

    def _expected_replicas(self) -> int:
        if self.kind is TRAINJOB:
            return trainjob_pods.expected_pods(self.job or {})
        specs = ((self.job or {}).get("spec") or {}).get(self.kind.spec_key) or {}
        total = 0
        for spec in specs.values():
            replicas = spec.get("replicas", 1) if isinstance(spec, Mapping) else 1
            total += int(replicas) if isinstance(replicas, int) else 1
        return total

    async def _current_pods(self) -> list[dict]:
        if self.logs is not None:
            live = [p for p in self.pods.values() if not (p.get("metadata") or {}).get("deletionTimestamp")]
            return live
        pods = await self.hook.list_job_pods(self.name, self.namespace, kind=self.kind)
        for p in pods:
            self.pods[str((p.get("metadata") or {}).get("uid") or "")] = p
        return pods

    async def _check_startup(self, status: JobStatus) -> FollowOutcome | None:
        """Pods still Pending (or unschedulable) past startup_timeout fail the follow; a suspended job waits."""
        if self.started or self.options.startup_timeout is None:
            return None
        if status.state == JobState.SUSPENDED:
            self.startup_base = time.time()  # queued (e.g. Kueue): waiting does not count
            return None
        pods = await self._current_pods()
        started = [
            p for p in pods if (p.get("status") or {}).get("phase") in ("Running", "Succeeded", "Failed")
        ]
        if pods and len(started) >= len(pods) and len(started) >= self._expected_replicas():
            self.started = True
            return None
        if time.time() - self.startup_base < self.options.startup_timeout:
            return None
        stuck = [p for p in pods if p not in started]
        reasons: list[str] = []
        for pod in stuck:
            pname = str((pod.get("metadata") or {}).get("name", ""))
            problem = diagnostics.scheduling_problem(pod)
            evs = await self.hook.list_events(self.namespace, involved_name=pname)
            warn = [e for e in evs if e.get("type") == "Warning"]
            if problem is not None:
                reasons.append(f"{pname}: {problem[0]}: {problem[1]}".rstrip(": "))
            elif warn:
                reasons.append(f"{pname}: {warn[-1].get('reason')}: {warn[-1].get('message')}")
            else:
                phase = (pod.get("status") or {}).get("phase", "Pending")
                reasons.append(f"{pname}: {phase}")
        if not pods:
            reasons.append(f"no pods were created (expected {self._expected_replicas()})")
            job_warn = [
                e
                for e in await self.hook.list_events(self.namespace, involved_name=self.name)
                if e.get("type") == "Warning"
            ]
            if job_warn:
                reasons.append(f"{job_warn[-1].get('reason')}: {job_warn[-1].get('message')}")
        since = " of its admission by Kueue" if self.queue is not None else ""
        message = f"{self.ref} did not start within {self.options.startup_timeout:g} s{since}: " + "; ".join(
            reasons
        )
        return FollowOutcome("startup_timeout", status, message)

    # -- main -----------------------------------------------------------------------------------

    def _start_watches(self) -> None:
        loop = asyncio.get_running_loop()
        if self.logs is not None:
            self.tasks.append(
                loop.create_task(
                    reflect(
                        lambda: self.hook.list_objects(
                            "pods",
                            self.namespace,
                            label_selector=job_pod_selector(self.name, kind=self.kind),
                        ),
                        lambda rv: self.hook.watch_job_pods(self.name, self.namespace, rv, kind=self.kind),
                        self._on_pod,
                        synced=self.pods_synced,
                        resource=f"pods of {self.ref}",
                    ),
                    name=f"tfjob-pods-{self.name}",
                )
            )
        if self.options.get_logs and self.options.log_events:
            # On a resume the events already went to the log: show only what happens from now on.
            self._suppress_events = self.resumed
            self.tasks.append(
                loop.create_task(
                    reflect(
                        self._list_job_events,
                        lambda rv: self.hook.watch_events(self.namespace, rv, involved_name=self.name),
                        self._on_event,
                        resource=f"events of {self.ref}",
                    ),
                    name=f"tfjob-events-{self.name}",
                )
            )

    async def _list_job_events(self) -> tuple[list[dict], str]:
        items, rv = await self.hook.list_objects(
            "events", self.namespace, field_selector=f"involvedObject.name={self.name}"
        )
        items = [e for e in items if (e.get("involvedObject") or {}).get("name") == self.name]
        items.sort(key=lambda e: str(e.get("lastTimestamp") or e.get("firstTimestamp") or ""))
        for ev in items:
            self._on_event("ADDED", ev)
        self._suppress_events = False
        return [], rv

    async def run(self) -> FollowOutcome:
        from airflow_tfjob.watch import shared_watch

        self._start_watches()
        try:
            async with shared_watch(self.hook, self.namespace, kind=self.kind).subscribe(self.name) as sub:
                outcome = await self._wait(sub)
                outcome = await self._finish(outcome)
                outcome.status = as_ended(outcome.status, sub.latest)
                return outcome
        finally:
            for t in self.tasks:
                t.cancel()
            await asyncio.gather(*self.tasks, return_exceptions=True)
            if self.logs is not None:
                await self.logs.close()
            self.sink.flush()

    async def _wait(self, sub: Any) -> FollowOutcome:
        seen = False
        status: JobStatus | None = None
        while True:
            timeout = self._tick()
            try:
                obj = await sub.next(timeout=timeout)
            except TimeoutError:
                obj = sub.latest
            if obj is None:
                if sub.synced:
                    gone = await self.hook.find_job(self.kind, self.name, self.namespace) is None
                    if gone:
                        what = "was deleted" if seen else "does not exist"
                        return FollowOutcome("error", status, f"{self.ref} {what}")
                continue
            seen = True
            self._job_known(obj)
            status = interpret(obj)
            queued = await self._observe_queue(obj, status)
            if status.finished:
                return FollowOutcome(status.state.value, status, status.message)
            if queued is not None:
                return queued
            if self.options.deadline is not None and time.time() >= self.options.deadline:
                what = self.queue.waiting_for() if self.queue is not None else status.state.value
                return FollowOutcome("timeout", status, f"{self.ref} passed its deadline while {what}")
            startup = await self._check_startup(status)
            if startup is not None:
                return startup

    async def _observe_queue(self, job: dict[str, Any], status: JobStatus) -> FollowOutcome | None:
        """A job with Kueue's queue label: its place in Kueue told and held to its limits (kueue/)."""
        if self.queue is None:
            labels = (job.get("metadata") or {}).get("labels") or {}
            if self.earlier is not None or not labels.get(KUEUE_QUEUE_LABEL):
                return None  # a drain only reads what is left of the logs
            from airflow_tfjob.kueue.tracker import QueueTracker

            self.queue = QueueTracker(self.hook, self.name, self.namespace, self.options, self.sink)
        return await self.queue.observe(job, status)

    def _tick(self) -> float:
        """How long to wait for the next job change before re-checking the clocks."""
        waits = [30.0]
        if self.queue is not None:
            waits.append(self.queue.wake_in())
        now = time.time()
        if self.options.deadline is not None:
            waits.append(max(0.05, self.options.deadline - now))
        if not self.started and self.options.startup_timeout is not None:
            waits.append(max(0.2, min(5.0, self.startup_base + self.options.startup_timeout - now)))
        return min(waits)

    async def _finish(self, outcome: FollowOutcome) -> FollowOutcome:
        status = outcome.status
        if self.logs is not None:
            # A job that finished before the pod list came back must still have its replicas drained.
            await wait_event(self.pods_synced, 30)
            if outcome.event in ("succeeded", "failed"):
                await self.logs.drain(
                    status.completion_time if status else None, grace=self.options.drain_grace
                )
            else:
                await self.logs.drain(None, grace=0.5, cap=5.0)
        if self.earlier is not None:
            outcome.diagnostics, outcome.message = self.earlier.diagnostics, self.earlier.message
        elif outcome.event == "failed" or outcome.event == "startup_timeout":
            diags = await self._diagnose(status)
            if diags:
                # Carried in the outcome, not sunk: the operator logs it once, at ERROR, in the
                # worker whichever mode followed (a sunk copy showed the block twice in the task log).
                outcome.diagnostics = diagnostics.format_block(diags)
                if outcome.event == "failed":
                    outcome.message = diagnostics.summary_line(diags, outcome.message)
        if self.options.metrics:
            outcome.metrics = self.metrics.result()
            if outcome.metrics.get("missing") and self.options.report_missing_metrics:
                self.sink(
                    "metrics never reported by the master replica: " + ", ".join(outcome.metrics["missing"])
                )
        outcome.cursors = self.logs.cursors() if self.logs is not None else {}
        outcome.return_payload = self.return_payload
        outcome.progress = self.progress.state() if self.progress is not None else None
        outcome.queue = self.queue.summary() if self.queue is not None else None
        if self.earlier is not None:
            outcome.queue = self.earlier.queue
        return outcome

    async def _diagnose(self, status: JobStatus | None) -> list[diagnostics.ReplicaDiagnosis]:
        rings = {name: f.ring for name, f in self.logs.replicas.items()} if self.logs is not None else {}
        return await gather_diagnosis(
            self.hook, self.name, self.namespace, kind=self.kind, pods=self.pods,
            events=list(self.events.values()), rings=rings,
            failed_types=status.failed_replica_types if status else (), tail=self.options.diagnostics_tail,
        )  # fmt: skip


async def follow_job(
    hook: AsyncTFJobHook,
    name: str,
    namespace: str,
    options: FollowOptions,
    sink: Sink,
    cursors: dict | None = None,
) -> FollowOutcome:
    """Follow a job (of ``options.kind``) until it succeeds, fails, times out or does not start; logs drained before return."""
    follow = _JobFollow(hook, name, namespace, options, sink, cursors)
    return await follow.run()


async def drain_job(
    hook: AsyncTFJobHook,
    name: str,
    namespace: str,
    options: FollowOptions,
    sink: Sink,
    earlier: FollowOutcome,
) -> FollowOutcome:
    """Finish what an earlier follow of a finished job (the trigger's) started, as if it had been one.

    Reads the replica lines after the earlier cursors, with the earlier metrics and captured value as
    the starting point; the earlier outcome's event, message and diagnosis stand (the job is final), and
    only its status is refreshed to the job's as it ended. Nothing the earlier follow showed is shown
    again: no resumption marker, no event already listed, no second diagnosis.
    """
    follow = _JobFollow(hook, name, namespace, options, sink, earlier.cursors, earlier=earlier)
    drained = await follow.run()
    drained.event = earlier.event
    if drained.status is None or earlier.status is None or drained.status.state is not earlier.status.state:
        drained.status = earlier.status  # deleted or changed meanwhile: the earlier view is the outcome
    return drained


__all__ = ["FollowOptions", "FollowOutcome", "drain_job", "follow_job", "parse_timestamp", "reflect"]
