"""The follow core: watch a job of any kind to its end while streaming its logs and events.

What differs between job APIs (the job's status, which pods are its replicas, rank 0, how many pods to
expect) is asked of the job's adapter (airflow_tfjob/jobs/), never decided here; what a task wants read
besides (its metrics, its progress, a returned value, its place in a queue...) is asked of the parts it
is given (follow/parts.py: the contract; ``airflow_tfjob.integrations.parts``: the registry), none of
which is named here.

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
from collections.abc import Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any

from airflow_tfjob.follow import diagnostics
from airflow_tfjob.follow.diagnosis import gather_diagnosis
from airflow_tfjob.follow.logs_parsing import LogBatcher, LogLimits, LogSelection, has_exited, parse_timestamp
from airflow_tfjob.follow.outcome import FollowOptions, FollowOutcome
from airflow_tfjob.follow.parts import FollowPart, FollowTap, PartTypes, reads_logs
from airflow_tfjob.follow.replica_logs import JobLogFollower, ReplicaFollower
from airflow_tfjob.hooks.common import job_pod_selector
from airflow_tfjob.hooks.jobwatch import Encoded, Subscription, decode, shared_watch
from airflow_tfjob.hooks.waits import wait_event
from airflow_tfjob.hooks.watching import reflect
from airflow_tfjob.jobs.adapter import adapter_for
from airflow_tfjob.jobs.status import JobState, JobStatus, as_ended, interpret

if TYPE_CHECKING:
    from airflow_tfjob.hooks.aio import AsyncKubeflowJobHook

log = logging.getLogger(__name__)

Sink = Callable[[str], None]


class _JobFollow:
    """State of one follow_job call: the watches' caches, the log followers, the parts, the outcome.

    It is the ``Follow`` its parts see (follow/parts.py): it calls them in the registry's order and
    never names one.
    """

    def __init__(
        self,
        hook: AsyncKubeflowJobHook,
        name: str,
        namespace: str,
        options: FollowOptions,
        sink: Sink,
        cursors: Mapping[str, Any] | None,
        earlier: FollowOutcome | None = None,
        tap: FollowTap | None = None,
        replay: Mapping[str, Any] | None = None,
        parts: PartTypes = (),
    ) -> None:
        self.hook = hook
        # Where the replicas run: the job's own cluster, until a part says they run elsewhere (follow_on).
        self.pods_hook = hook
        self._retired: list[asyncio.Task[None]] = []
        self.name = name
        self.namespace = namespace
        self.options = options
        self.kind = options.job_kind
        self.adapter = adapter_for(self.kind)  # what differs between job APIs: status, replicas, rank 0
        # Every line of this follow (replicas, events, diagnostics) goes through one batcher: in order,
        # and as few task-log records as possible.
        self.sink = LogBatcher(sink)
        self.resumed = bool(cursors) or earlier is not None
        self.pods: dict[str, dict] = {}  # by pod uid, last known state, deleted pods kept
        self.gone: set[str] = set()  # the uids of the pods seen deleted
        self.events: dict[str, dict] = {}  # by event uid
        # The job as last seen, as the shared watch keeps it (compact JSON, a quarter of the decoded
        # object): a waiting follow holds it between changes, a triggerer thousands of them.
        self._seen: Encoded | None = None
        # A drain continues the earlier follow: what its parts saved, its diagnosis.
        self.earlier = earlier
        self.tap = tap
        self.tasks: list[asyncio.Task[None]] = []
        self.logs: JobLogFollower | None = None
        # When the start-up clock started: a deferred follow's deferral, else now (relative from there).
        self.startup_base = time.time() if options.startup_from is None else options.startup_from
        self.started = False
        self._shown_events: dict[str, int] = {}
        self._early_pods: list[tuple[str, dict]] | None = None  # pod events before the job object
        self._sub: Subscription | None = None  # the job's subscription, while the follow waits on it
        self._pod_watch: asyncio.Task[None] | None = None
        # What only some follows need is made only for them: a triggerer holds one follow per waiting job.
        made = (part.start(self) for part in parts)
        self.parts: tuple[FollowPart, ...] = tuple(p for p in made if p is not None)
        self.master_readers = tuple(p for p in self.parts if p.reads_master_lines)
        self.line_readers = tuple(p for p in self.parts if p.sees_every_line)
        capturing = [p for p in self.parts if p.capture_prefix]
        if len(capturing) > 1:  # the log follower takes one prefix out of the master's lines
            raise ValueError(f"more than one follow part captures master lines: {capturing!r}")
        self.capturer = capturing[0] if capturing else None
        logs = reads_logs(options, parts)
        # Set once the pod watch has listed (drain knows every replica); only a follow that reads logs
        # watches pods.
        self.pods_synced: asyncio.Event | None = asyncio.Event() if logs else None
        if logs:
            selection = options.selection if options.get_logs else LogSelection()
            self.logs = JobLogFollower(
                hook,
                namespace,
                selection,
                self.sink,
                limits=LogLimits(
                    rate_per_replica=options.log_rate_per_replica, total_cap=options.log_total_cap
                ),
                cursors={k: v for k, v in (cursors or {}).items() if not k.startswith("_")},
                # A call per line only if a part reads them.
                on_line=self._on_line if self.master_readers or self.line_readers else None,
                capture_prefix=self.capturer.capture_prefix if self.capturer is not None else None,
                on_capture=self._on_capture,
                container=self.kind.container,
                adapter=self.adapter,
                replay=replay,
                on_replay=self._on_replayed if self.master_readers else None,
            )

    @property
    def ref(self) -> str:
        """How messages name the job (made when a message needs it, not held per waiting job)."""
        return f"{self.kind.kind} {self.namespace}/{self.name}"

    def follow_on(self, hook: AsyncKubeflowJobHook) -> None:
        """The job's replicas run in another cluster than the job object (a MultiKueue worker), reached
        through ``hook``: its pods, their logs and events, and a failure's evidence are read there from
        now on. The watches start over against that cluster (its pods are new to this follow: the
        drain waits for their list again); the job's status is still read where the job is."""
        self.pods_hook = hook
        if self.logs is not None:
            self.logs.hook = hook  # each replica's reads ask its owner for the hook
        for task in self.tasks:
            task.cancel()
        self._retired += self.tasks
        self.tasks = []
        if self.pods_synced is not None:
            self.pods_synced.clear()
        self._start_watches()

    # -- feeds ----------------------------------------------------------------------------------

    def _on_line(self, replica: ReplicaFollower, ts: int, text: str) -> None:
        for part in self.line_readers:
            part.on_line(replica.name, replica.selected, ts)
        if replica.state.pod is not None and replica.master:
            for part in self.master_readers:
                part.on_master_line(ts, text, shown=True)

    def _on_replayed(self, replica: ReplicaFollower, ts: int, text: str) -> None:
        """A master line a stopped triggerer showed, read again after a take-over: it feeds the
        trackers (whose state went with that triggerer) and writes nothing."""
        if replica.state.pod is not None and replica.master:
            for part in self.master_readers:
                part.on_master_line(ts, text, shown=False)

    def positions(self) -> dict[str, Any]:
        """The cursors of every line written to the sink (what is pending is written first)."""
        self.sink.flush()
        return self.logs.cursors() if self.logs is not None else {}

    def restarted(self) -> None:
        """A part says the job's pods start over (admitted again after a preemption): the others hear it."""
        for part in self.parts:
            part.restarted()

    def _on_capture(self, replica: ReplicaFollower, payload: str) -> None:
        if self.capturer is not None:
            self.capturer.captured(payload)

    def _on_pod(self, etype: str, pod: dict) -> None:
        uid = str((pod.get("metadata") or {}).get("uid") or "")
        self.pods[uid] = pod
        if etype == "DELETED":
            self.gone.add(uid)
        if self.logs is None:
            return
        if self._seen is None:
            # Which replica is rank 0 may depend on the job's spec (the adapter's rank0): its pods wait for it.
            if self._early_pods is None:
                self._early_pods = []
            self._early_pods.append((etype, pod))
            return
        self._feed_pod(etype, pod)

    @property
    def job(self) -> dict[str, Any] | None:
        """The job as last seen (a fresh copy), None before the first sight."""
        return decode(self._seen)

    def _job_known(self, job: dict[str, Any], encoded: Encoded | None) -> None:
        self._seen = encoded
        if self.logs is not None:
            self.logs.job = job
        early, self._early_pods = self._early_pods or (), None
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

    async def _current_pods(self) -> list[dict]:
        if self.logs is not None:
            live = [p for p in self.pods.values() if not (p.get("metadata") or {}).get("deletionTimestamp")]
            return live
        pods = await self.pods_hook.list_job_pods(self.name, self.namespace, kind=self.kind)
        for p in pods:
            self.pods[str((p.get("metadata") or {}).get("uid") or "")] = p
        return pods

    def _pods_known(self) -> bool:
        """Whether the job's pods are known: listed by the pod watch, or as known as they will be (the
        watch was refused for good); a follow without one lists them when it checks."""
        if self.pods_synced is None or self.pods_synced.is_set():
            return True
        return self._pod_watch is not None and self._pod_watch.done()

    def _pods_listed(self) -> None:
        """The pod watch listed: a start-up check that waited for it runs now, not at the next change."""
        if self._sub is not None and not self.started:
            self._sub.nudge()

    async def _check_startup(self, status: JobStatus, job: dict[str, Any]) -> FollowOutcome | None:
        """Pods still Pending (or unschedulable) past startup_timeout fail the follow; a suspended job waits."""
        if self.started or self.options.startup_timeout is None:
            return None
        if status.state == JobState.SUSPENDED:
            self.startup_base = time.time()  # queued: waiting does not count
            return None
        if not self._pods_known():
            # The pod watch has not listed yet: no pod known is not "no pods". A take-over later than
            # startup_timeout after the deferral judged its first job state here, and failed a
            # running job as never started. The list's arrival wakes the follow (_pods_listed).
            return None
        expected = self.adapter.expected_pods(job)
        pods = await self._current_pods()
        started = [
            p for p in pods if (p.get("status") or {}).get("phase") in ("Running", "Succeeded", "Failed")
        ]
        if pods and len(started) >= len(pods) and len(started) >= expected:
            self.started = True
            return None
        hopeless = diagnostics.cannot_start(pods)
        if hopeless:  # waiting out startup_timeout would not change it: the kubelet already backs off
            return FollowOutcome("cannot_start", status, f"{self.ref} cannot start: " + "; ".join(hopeless))
        if time.time() - self.startup_base < self.options.startup_timeout:
            return None
        stuck = [p for p in pods if p not in started]
        reasons: list[str] = []
        for pod in stuck:
            pname = str((pod.get("metadata") or {}).get("name", ""))
            problem = diagnostics.scheduling_problem(pod)
            evs = await self.pods_hook.list_events(self.namespace, involved_name=pname)
            warn = [e for e in evs if e.get("type") == "Warning"]
            if problem is not None:
                reasons.append(f"{pname}: {problem[0]}: {problem[1]}".rstrip(": "))
            elif warn:
                reasons.append(f"{pname}: {warn[-1].get('reason')}: {warn[-1].get('message')}")
            else:
                phase = (pod.get("status") or {}).get("phase", "Pending")
                reasons.append(f"{pname}: {phase}")
        if not pods:
            reasons.append(f"no pods were created (expected {expected})")
            job_warn = [
                e
                for e in await self.pods_hook.list_events(self.namespace, involved_name=self.name)
                if e.get("type") == "Warning"
            ]
            if job_warn:
                reasons.append(f"{job_warn[-1].get('reason')}: {job_warn[-1].get('message')}")
        counted = next((c for c in (p.startup_counts_from() for p in self.parts) if c), None)
        since = f" of {counted}" if counted else ""
        message = f"{self.ref} did not start within {self.options.startup_timeout:g} s{since}: " + "; ".join(
            reasons
        )
        return FollowOutcome("startup_timeout", status, message)

    # -- main -----------------------------------------------------------------------------------

    async def _list_pods(self) -> tuple[list[dict], str]:
        """The job's pods where its replicas run (the pod watch's list, and the list after the job's end)."""
        return await self.pods_hook.list_objects(
            "pods", self.namespace, label_selector=job_pod_selector(self.name, kind=self.kind)
        )

    def _start_watches(self) -> None:
        loop = asyncio.get_running_loop()
        if self.logs is not None:
            pod_watch = loop.create_task(
                reflect(
                    self._list_pods,
                    lambda rv: self.pods_hook.watch_job_pods(self.name, self.namespace, rv, kind=self.kind),
                    self._on_pod,
                    synced=self.pods_synced,
                    resource=f"pods of {self.ref}",
                    on_synced=self._pods_listed,
                ),
                name=f"tfjob-pods-{self.name}",
            )
            # Refused for good (its warning says why), it will never list: the start is judged on
            # what it saw, as it was before the check waited for the list.
            pod_watch.add_done_callback(lambda _: self._pods_listed())
            self._pod_watch = pod_watch
            self.tasks.append(pod_watch)
        if self.options.get_logs and self.options.log_events:
            # On a resume the events already went to the log: show only what happens from now on.
            self._suppress_events = self.resumed
            self.tasks.append(
                loop.create_task(
                    reflect(
                        self._list_job_events,
                        lambda rv: self.pods_hook.watch_events(self.namespace, rv, involved_name=self.name),
                        self._on_event,
                        resource=f"events of {self.ref}",
                    ),
                    name=f"tfjob-events-{self.name}",
                )
            )

    async def _list_job_events(self) -> tuple[list[dict], str]:
        items, rv = await self.pods_hook.list_objects(
            "events", self.namespace, field_selector=f"involvedObject.name={self.name}"
        )
        items = [e for e in items if (e.get("involvedObject") or {}).get("name") == self.name]
        items.sort(key=lambda e: str(e.get("lastTimestamp") or e.get("firstTimestamp") or ""))
        for ev in items:
            self._on_event("ADDED", ev)
        self._suppress_events = False
        return [], rv

    async def run(self) -> FollowOutcome:
        self._start_watches()
        try:
            async with shared_watch(self.hook, self.namespace, kind=self.kind).subscribe(self.name) as sub:
                self._sub = sub
                # The job's changes are awaited in this frame, not in a coroutine of their own: a
                # triggerer holds one such wait per waiting job.
                while True:
                    try:
                        obj = await sub.next(timeout=self._tick())
                    except TimeoutError:
                        obj = sub.latest
                    # Each value is judged in a call of its own, and the decoded value let go, so
                    # that nothing of it (about 3 KB) is held while the next change is awaited: only
                    # the watch's compact copy is.
                    judged = await (self._absent(sub) if obj is None else self._judge(obj, sub.latest_encoded))
                    del obj
                    if judged is not None:
                        break
                outcome = await self._finish(judged)
                outcome.status = as_ended(outcome.status, sub.latest)
                return outcome
        finally:
            self._sub = None
            for t in self.tasks:
                t.cancel()
            await asyncio.gather(*self.tasks, *self._retired, return_exceptions=True)
            if self.logs is not None:
                await self.logs.close()
            self.sink.flush()

    async def _absent(self, sub: Any) -> FollowOutcome | None:
        """The watch says the job is not there: an error once a GET confirms it (None: keep waiting)."""
        if sub.synced and await self.hook.find_job(self.kind, self.name, self.namespace) is None:
            last = self.job  # as it was last seen
            what = "was deleted" if last is not None else "does not exist"
            return FollowOutcome("error", interpret(last) if last is not None else None, f"{self.ref} {what}")
        return None

    async def _judge(self, obj: dict[str, Any], encoded: Encoded | None) -> FollowOutcome | None:
        """The outcome a value of the job decides, if any (None: keep waiting)."""
        self._job_known(obj, encoded)
        # The pods the follow already watches correct an object that lags them (a TrainJob: no Running
        # condition, jobsStatus a step behind): the parts (Kueue's "running") and the outcome see it run.
        live = [p for uid, p in self.pods.items()
                if uid not in self.gone and not (p.get("metadata") or {}).get("deletionTimestamp")]
        status = self.adapter.with_pods(interpret(obj), live)
        verdict: FollowOutcome | None = None
        for part in self.parts:  # each sees the job, even once another's verdict ends the follow
            said = await part.on_job(obj, status)
            verdict = verdict or said
        if status.finished:
            return FollowOutcome(status.state.value, status, status.message)
        if verdict is not None:
            return verdict
        if self.options.deadline is not None and time.time() >= self.options.deadline:
            what = next((w for w in (p.waiting_for() for p in self.parts) if w), status.state.value)
            return FollowOutcome("timeout", status, f"{self.ref} passed its deadline while {what}")
        return await self._check_startup(status, obj)

    def _tick(self) -> float | None:
        """How long to wait for the next job change before re-checking the clocks (None: no clock runs).

        A job with no deadline, no start-up clock running and no part's clock waits for its next
        change alone: a triggerer holding thousands of them does not wake each one now and then.
        """
        waits = [w for w in (p.wake_in() for p in self.parts) if w is not None]
        now = time.time()
        if self.options.deadline is not None:
            waits.append(max(0.05, self.options.deadline - now))
        if not self.started and self.options.startup_timeout is not None and self._pods_known():
            # Before the pod list the start is not judged (_check_startup), and the list's arrival
            # wakes the follow (_pods_listed): a clock here would wake a take-over's thousands of
            # follows past their start-up window every 0.2 s until each list came back.
            waits.append(max(0.2, min(5.0, self.startup_base + self.options.startup_timeout - now)))
        return min(waits) if waits else None

    async def _finish(self, outcome: FollowOutcome) -> FollowOutcome:
        status = outcome.status
        if self.logs is not None:
            # A job that finished before the pod list came back must still have its replicas drained.
            assert self.pods_synced is not None  # made with the log follower
            await wait_event(self.pods_synced, 30)
            if outcome.event in ("succeeded", "failed"):
                await self._catch_up_pods()
                await self.logs.drain(
                    status.completion_time if status else None, grace=self.options.drain_grace, ended=True
                )
            else:
                await self.logs.drain(None, grace=0.5, cap=5.0)
        if self.earlier is not None:
            outcome.diagnostics, outcome.message = self.earlier.diagnostics, self.earlier.message
            outcome.failures = self.earlier.failures
        elif outcome.event in ("failed", "startup_timeout", "cannot_start"):
            diags = await self._diagnose(status)
            outcome.failures = [d.to_dict() for d in diags]  # the cause is read from these (failure.py)
            if diags:
                # Carried in the outcome, not sunk: the operator logs it once, at ERROR, in the
                # worker whichever mode followed (a sunk copy showed the block twice in the task log).
                outcome.diagnostics = diagnostics.format_block(diags)
                if outcome.event == "failed":
                    outcome.message = diagnostics.summary_line(diags, outcome.message)
        outcome.cursors = self.logs.cursors() if self.logs is not None else {}
        if outcome.event in ("succeeded", "failed"):
            job = self.job
            outcome.logs_read = self.logs is None or (
                job is not None and self.logs.all_read(self.adapter.expected_pods(job))
            )
        outcome.dropped = _merged_drops(
            self.earlier.dropped if self.earlier is not None else {},
            self.logs.dropped() if self.logs is not None else {},
        )
        # What the earlier follow's parts saved stands unless a part of this one saves anew (a part
        # that only watches the job, such as a queue's, is not made for a drain).
        saved = dict(self.earlier.parts) if self.earlier is not None else {}
        for part in self.parts:
            part.finish(outcome)
            if part.section is not None:
                saved[part.section] = part.save()
        outcome.parts = saved
        return outcome

    async def _catch_up_pods(self) -> None:
        """The job ended before the pod watch showed all of its pods, or their exits: one list of them
        now, so that each replica is still read to its end. A loaded machine did both:
        - a replica that ran in a blink: the first pod list came back before its pod existed, and the
          job's end arrived before the watch's ADDED for the pod;
        - a replica whose pod the watch showed Pending, and then nothing more before the job's end: the
          drain took it for a pod that never started, and read none of its lines.
        One request per ended job, and only when fewer replicas are followed than the job has (or the
        adapter cannot tell how many) or one of them has not been seen to exit (a parameter server that
        outlives its job's success, too: its pod is listed, and followed to the drain's deadline)."""
        assert self.logs is not None
        job = self.job
        if job is None:
            return
        expected = self.adapter.expected_pods(job)
        followed = self.logs.replicas.values()
        if 0 < expected <= len(followed) and all(has_exited(f.state.pod) for f in followed):
            return
        try:
            pods, _ = await self._list_pods()
        except Exception as error:  # the drain still reads the replicas the watch showed
            log.debug("Could not list the pods of %s once more after its end: %s", self.ref, error)
            return
        for pod in pods:
            uid = str((pod.get("metadata") or {}).get("uid") or "")
            if uid not in self.pods:
                self._on_pod("ADDED", pod)
            elif has_exited(pod) and not has_exited(self.pods[uid]):
                # A pod's exit is final, so the list cannot take the follow back: a newer view is taken
                # only where it says the pod exited and the watch has not said so yet.
                self._on_pod("MODIFIED", pod)

    async def _diagnose(self, status: JobStatus | None) -> list[diagnostics.ReplicaDiagnosis]:
        rings = {name: f.ring for name, f in self.logs.replicas.items()} if self.logs is not None else {}
        return await gather_diagnosis(
            self.pods_hook, self.name, self.namespace, kind=self.kind, pods=self.pods,
            events=list(self.events.values()), rings=rings,
            failed_types=status.failed_replica_types if status else (), tail=self.options.diagnostics_tail,
        )  # fmt: skip


def _merged_drops(*parts: Mapping[str, Mapping[str, int]]) -> dict[str, dict[str, int]]:
    """Dropped-line counts of a follow and of the drain that continues it, added up."""
    out: dict[str, dict[str, int]] = {}
    for part in parts:
        for replica, reasons in part.items():
            mine = out.setdefault(replica, {})
            for why, n in reasons.items():
                mine[why] = mine.get(why, 0) + int(n)
    return out


def _refuse_unread(options: FollowOptions, parts: PartTypes) -> None:
    """A part's option given to a follow without that part would do nothing, silently: refused."""
    unread = options.unread(parts)
    if unread:
        raise ValueError(
            f"no part of this follow declares the option(s) {', '.join(map(repr, unread))}: pass "
            "parts=PARTS (airflow_tfjob.integrations.parts, every part) or the part that owns them"
        )


def follow_job(
    hook: AsyncKubeflowJobHook,
    name: str,
    namespace: str,
    options: FollowOptions,
    sink: Sink,
    cursors: dict | None = None,
    tap: FollowTap | None = None,
    replay: Mapping[str, Any] | None = None,
    *,
    parts: PartTypes = (),
) -> Coroutine[Any, Any, FollowOutcome]:
    """Follow a job (of ``options.kind``) until it succeeds, fails, times out or does not start; logs
    drained before return. Awaited as a coroutine function is; it hands back the follow's own run
    rather than a coroutine around it: a triggerer holds one per waiting job, each frame ~0.3 KB.

    ``replay`` (a take-over that resumes from saved ``cursors``): the cursors at deferral, from which
    the master replica's lines are read again for the parts that read them, without being shown again.

    ``parts``: the parts the follow is made of (follow/parts.py), the provider's registry
    (``airflow_tfjob.integrations.parts.PARTS``) for the operator and the trigger; none by default: a
    follow of the job's status, logs, events and diagnosis alone. An option that none of them declares
    is refused (ValueError), not ignored."""
    _refuse_unread(options, parts)
    return _JobFollow(hook, name, namespace, options, sink, cursors, tap=tap, replay=replay, parts=parts).run()


async def drain_job(
    hook: AsyncKubeflowJobHook,
    name: str,
    namespace: str,
    options: FollowOptions,
    sink: Sink,
    earlier: FollowOutcome,
    *,
    parts: PartTypes = (),
) -> FollowOutcome:
    """Finish what an earlier follow of a finished job (the trigger's) started, as if it had been one.

    Reads the replica lines after the earlier cursors, with what the earlier follow's parts saved as
    their starting point; the earlier outcome's event, message and diagnosis stand (the job is final), and
    only its status is refreshed to the job's as it ended. Nothing the earlier follow showed is shown
    again: no resumption marker, no event already listed, no second diagnosis.

    When the earlier follow read every replica to its end after it exited (``logs_read``), there is
    nothing left to read and no request is made: the caller reads the job once more anyway (to clean
    up and report), and refreshes the status from that read.
    """
    _refuse_unread(options, parts)
    if earlier.logs_read:
        for part in parts:
            part.nothing_to_drain(earlier, options, sink)
        return earlier
    follow = _JobFollow(hook, name, namespace, options, sink, earlier.cursors, earlier=earlier, parts=parts)
    drained = await follow.run()
    drained.event = earlier.event
    if drained.status is None or earlier.status is None or drained.status.state is not earlier.status.state:
        drained.status = earlier.status  # deleted or changed meanwhile: the earlier view is the outcome
    return drained


__all__ = [
    "FollowOptions",
    "FollowOutcome",
    "FollowTap",
    "drain_job",
    "follow_job",
    "parse_timestamp",
    "reads_logs",
    "reflect",
]
