"""What happens to a job (TFJob or another kind) and its pods once its logs are drained, and when its
task is killed.

The operator submits every TFJob with ``cleanPodPolicy: None`` and no ``ttlSecondsAfterFinished``, so
that neither the training-operator nor garbage collection removes a pod before its logs are read.
The policy the user asked for is kept in annotations on the job (``build/submission.py``) and applied
here, by the worker or the triggerer, after the logs are drained. Both the synchronous and the deferred path call these functions, so the
two modes leave the cluster in the same state.

TTL: the operator cannot wait for the TTL in a synchronous task, so ``ttl == 0`` deletes the TFJob at
once, and a positive TTL is written back into ``spec.runPolicy.ttlSecondsAfterFinished`` with a merge
patch: the training-operator (or the local cluster's controller) then deletes the job
``ttl`` seconds after its ``completionTime``, exactly as if it had been submitted with it.

``keep_failed_for`` (a failed job only; a succeeded one is cleaned up as above): the replicas still
running or pending are deleted at once (they hold nodes and nobody needs them to debug), the finished
ones stay, and the job, with them, is deleted ``keep_failed_for`` seconds after it failed (its
completion time) by Kubernetes itself, so the deletion happens whether or not any task of Airflow is
still running: where the job's API has a TTL (the v1 kinds' ``runPolicy.ttlSecondsAfterFinished``), by
its own controller; where it has none (TrainJob), by the TTL of a batch Job made for the purpose (no
pod: ``completions: 0`` completes at once) that the job is made a dependent of, so that the TTL
controller's deletion of that Job has garbage collection delete the job and its pods. Either way the
job carries the time in the annotation ``ANNOTATION_KEEP_FAILED_UNTIL``.

A job Kueue's MultiKueue ran on a worker cluster (``managedBy: kueue.x-k8s.io/multikueue``) is the
manager's copy: the manager's controller leaves it alone, its TTL included, so the batch Job's TTL
deletes it; and its pods were on the worker, whose copy MultiKueue removes with them once the job has
finished (Kueue's workload.go: a finished Workload's remote objects are deleted), so none is kept and
none is deleted here (the report says so).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Generator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol, TypedDict, Unpack

from airflow_tfjob.build.submission import intended_cleanup
from airflow_tfjob.constants import (
    ANNOTATION_KEEP_FAILED_UNTIL,
    KILL_GRACE_PERIOD,
    LABEL_KEEPS_FAILED,
    MULTIKUEUE_MANAGED_BY,
)
from airflow_tfjob.jobs.adapter import adapter_for
from airflow_tfjob.jobs.kinds import JobKind
from airflow_tfjob.jobs.status import epoch_seconds, job_kind

if TYPE_CHECKING:
    from airflow_tfjob.hooks.aio import AsyncKubeflowJobHook

ON_FINISH_ACTIONS = ("keep", "delete", "delete_succeeded")
ON_KILL_ACTIONS = ("delete", "keep")

Log = Callable[[str], None]


class CleanupAPI(Protocol):
    """The part of KubeflowJobHook that cleanup needs (kept narrow so the contract is visible).

    Every call goes through the hook, so under its retry policy; deletes treat 404 as done.
    """

    def list_job_pods(
        self,
        name: str,
        namespace: str,
        replica_type: str | None = None,
        replica_index: int | None = None,
        kind: JobKind | str = "TFJob",
    ) -> list[dict[str, Any]]: ...

    def delete_job(
        self,
        kind: JobKind | str,
        name: str,
        namespace: str,
        propagation: str = "Foreground",
        grace_period_seconds: int | None = None,
    ) -> None: ...

    def find_job(self, kind: JobKind | str, name: str, namespace: str) -> dict[str, Any] | None: ...

    def patch_job(
        self, kind: JobKind | str, name: str, namespace: str, patch: dict[str, Any]
    ) -> dict[str, Any]: ...

    def delete_pod(self, name: str, namespace: str, grace_period_seconds: int | None = None) -> None: ...

    def delete_service(self, name: str, namespace: str) -> None: ...

    def create_core_object(self, body: dict[str, Any], namespace: str | None = None) -> dict[str, Any]: ...


# ---------------------------------------------------------------- after the logs are drained


@dataclass
class CleanupReport:
    """What cleanup did, for the task log and for tests."""

    deleted_pods: list[str] = field(default_factory=list)
    job_deleted: bool = False
    ttl_patched: int | None = None
    kind: str = "TFJob"
    kept_until: str | None = None  # keep_failed_for: when the failed job goes (RFC 3339)
    expiry_job: str | None = None  # the batch Job whose TTL deletes it (an API without a TTL)
    on_worker: bool = False  # keep_failed_for on a MultiKueue job: its pods were on a worker cluster

    def describe(self) -> str:
        parts = []
        if self.job_deleted:
            parts.append(f"deleted the {self.kind}")
        if self.deleted_pods:
            parts.append(f"deleted pods {', '.join(sorted(self.deleted_pods))}")
        if self.ttl_patched is not None:
            parts.append(f"set ttlSecondsAfterFinished={self.ttl_patched}")
        if self.kept_until is not None:
            by = f"batch Job {self.expiry_job}'s TTL" if self.expiry_job else "its TTL"
            parts.append(f"kept for debugging until {self.kept_until}, then deleted by {by}")
        if self.on_worker:
            parts.append("its pods ran on a MultiKueue worker cluster, whose copy of the job MultiKueue removes "
                         "with them once the job finished: none kept (their lines and events are in this log)")
        return "; ".join(parts) if parts else "nothing to clean up"


def _phase(pod: Mapping[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


def _pod_name(pod: Mapping[str, Any]) -> str:
    return str((pod.get("metadata") or {}).get("name"))


def delete_pods(
    hook: CleanupAPI,
    name: str,
    namespace: str,
    *,
    only_active: bool,
    grace_period_seconds: int | None = None,
    kind: JobKind,
) -> list[str]:
    """Delete the job's pods (all, or only Running/Pending ones) and each deleted pod's service.

    Services are found by the pod's name, as the training-operator does, because every replica's
    headless service is named after its pod. The deletions are independent of each other, so they are
    made side by side (at most DELETES_AT_ONCE in flight): the task waits for the slowest, not for
    the sum, and one deletion the retry policy has to repeat holds up no other.
    """
    deleted = [
        _pod_name(pod)
        for pod in hook.list_job_pods(name, namespace, kind=kind)
        if not only_active or _phase(pod) in ("Running", "Pending")
    ]
    calls: list[Callable[[], None]] = []
    for pod_name in deleted:
        calls.append(partial(hook.delete_pod, pod_name, namespace, grace_period_seconds=grace_period_seconds))
        calls.append(partial(hook.delete_service, pod_name, namespace))
    _side_by_side(calls)
    return deleted


#: At most this many of one cleanup's deletions are in flight together (a job of 100 replicas makes 200).
DELETES_AT_ONCE = 8


def _side_by_side(calls: list[Callable[[], None]]) -> None:
    """Run independent calls on a few threads; every call is made, and the first failure is raised
    once all have ended (each call is under the hook's retry policy, so a failure here is final)."""
    if len(calls) <= 1:
        for call in calls:
            call()
        return
    with ThreadPoolExecutor(max_workers=min(DELETES_AT_ONCE, len(calls)), thread_name_prefix="cleanup") as pool:
        futures = [pool.submit(call) for call in calls]
    for future in futures:
        future.result()


def apply_clean_pod_policy(
    hook: CleanupAPI, name: str, namespace: str, policy: str, kind: JobKind
) -> list[str]:
    """Apply a cleanPodPolicy to a finished job, with the training-operator's semantics.

    An unknown value behaves like All on the real operator; validation refuses it before submission,
    and here it is treated the same way so that no pod outlives a policy the user meant as cleanup.
    """
    if policy == "None":
        return []
    return delete_pods(hook, name, namespace, only_active=policy == "Running", kind=kind)


def apply_ttl(
    hook: CleanupAPI,
    name: str,
    namespace: str,
    ttl: int | None,
    report: CleanupReport,
    kind: JobKind,
) -> None:
    if ttl is None:
        return
    if ttl <= 0:
        hook.delete_job(kind, name, namespace, propagation="Foreground")
        report.job_deleted = True
        return
    hook.patch_job(kind, name, namespace, {"spec": {"runPolicy": {"ttlSecondsAfterFinished": ttl}}})
    report.ttl_patched = ttl


def _rfc3339(epoch: float) -> str:
    return datetime.fromtimestamp(math.ceil(epoch), tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


#: The expiry Job's container: it never runs (``completions: 0`` creates no pod), but a Job's pod
#: template must name one.
EXPIRY_IMAGE = "registry.k8s.io/pause:3.10"


def expiry_job(job: Mapping[str, Any], ttl: int, until: str) -> dict[str, Any]:
    """The batch Job whose TTL deletes ``job`` (made its dependent): complete at once with no pod, then
    deleted by the TTL-after-finished controller ``ttl`` seconds later, ``job`` with it (pure)."""
    meta = job["metadata"]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            # Generated: a create the retry policy repeats after a lost answer leaves a second Job that
            # owns nothing and goes by its own TTL, never a conflict.
            "generateName": f"{str(meta['name'])[:45]}-keep-failed-",
            "namespace": meta["namespace"],
            "labels": {LABEL_KEEPS_FAILED: str(meta["name"])},
            "annotations": {ANNOTATION_KEEP_FAILED_UNTIL: until},
        },
        "spec": {
            "completions": 0,
            "ttlSecondsAfterFinished": ttl,
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "expiry", "image": EXPIRY_IMAGE}]}
            },
        },
    }


def keep_failed(
    hook: CleanupAPI,
    job: Mapping[str, Any],
    seconds: int,
    report: CleanupReport,
    *,
    now: float,
    kind: JobKind,
) -> None:
    """keep_failed_for on a failed job (see the module's docstring): its active pods deleted now, the
    job and its finished pods deleted by Kubernetes ``seconds`` after its completion time (a MultiKueue
    job: the manager's copy, by the batch Job's TTL; its pods are the worker's, gone with its copy)."""
    meta = job["metadata"]
    name, namespace = str(meta["name"]), str(meta.get("namespace") or "default")
    adapter = adapter_for(kind)
    report.on_worker = adapter.managed_by(job) == MULTIKUEUE_MANAGED_BY
    if not report.on_worker:
        report.deleted_pods = delete_pods(hook, name, namespace, only_active=True, kind=kind)
    ended = epoch_seconds(adapter.interpret(job).completion_time)
    until = (ended if ended is not None else now) + seconds
    report.kept_until = _rfc3339(until)
    patch: dict[str, Any] = {"metadata": {"annotations": {ANNOTATION_KEEP_FAILED_UNTIL: report.kept_until}}}
    ttl = None if report.on_worker else adapter.ttl_patch(seconds)
    if ttl is not None:
        patch.update(ttl)
        report.ttl_patched = seconds
    else:
        # The Job's TTL counts from its own completion, now: what is left of the window.
        body = expiry_job(job, max(0, math.ceil(until - now)), report.kept_until)
        expiry = hook.create_core_object(body, namespace)
        report.expiry_job = str(expiry["metadata"]["name"])
        uid = expiry["metadata"]["uid"]
        owner = {"apiVersion": "batch/v1", "kind": "Job", "name": report.expiry_job, "uid": uid}
        patch["metadata"]["ownerReferences"] = [*(meta.get("ownerReferences") or ()), owner]
    hook.patch_job(kind, name, namespace, patch)


def finish(
    hook: CleanupAPI,
    tfjob: Mapping[str, Any],
    *,
    succeeded: bool,
    on_finish_action: str,
    log: Log,
    keep_failed_for: int | None = None,
    now: float | None = None,
) -> CleanupReport:
    """Clean up after a finished job whose logs have been drained.

    The on-finish action comes first: when it deletes the TFJob, its pods and services go with it
    (foreground propagation), so the intended cleanPodPolicy and TTL have nothing left to act on.
    A failed job with ``keep_failed_for`` (seconds) is kept that long instead (:func:`keep_failed`),
    whatever the on-finish action and the intended cleanup say; ``now``: the clock (epoch seconds).
    """
    if on_finish_action not in ON_FINISH_ACTIONS:
        raise ValueError(f"on_finish_action must be one of {ON_FINISH_ACTIONS}, not {on_finish_action!r}")
    metadata = tfjob.get("metadata") or {}
    name, namespace = str(metadata["name"]), str(metadata.get("namespace") or "default")
    kind = job_kind(tfjob)
    report = CleanupReport(kind=kind.kind)
    if keep_failed_for is not None and not succeeded:
        keep_failed(
            hook, tfjob, keep_failed_for, report, now=time.time() if now is None else now, kind=kind
        )
    elif on_finish_action == "delete" or (on_finish_action == "delete_succeeded" and succeeded):
        hook.delete_job(kind, name, namespace, propagation="Foreground")
        report.job_deleted = True
    else:
        intent = intended_cleanup(tfjob)
        report.deleted_pods = apply_clean_pod_policy(hook, name, namespace, intent.clean_pod_policy, kind)
        apply_ttl(hook, name, namespace, intent.ttl_seconds_after_finished, report, kind)
    log(f"Cleanup of {kind.kind} {namespace}/{name}: {report.describe()}")
    return report


def leftover_description(
    tfjob: Mapping[str, Any], on_finish_action: str, succeeded: bool, keep_failed_for: int | None = None
) -> str:
    """What a failed :func:`finish` may have left in the cluster, for the warning and XCom."""
    metadata = tfjob.get("metadata") or {}
    ref = f"{tfjob.get('kind') or 'TFJob'} {metadata.get('namespace')}/{metadata.get('name')}"
    if keep_failed_for is not None and not succeeded:
        return f"{ref} and its pods (keep_failed_for={keep_failed_for} s: their deletion maybe not arranged)"
    if on_finish_action == "delete" or (on_finish_action == "delete_succeeded" and succeeded):
        return f"{ref} and its pods (on_finish_action={on_finish_action!r} not done)"
    intent = intended_cleanup(tfjob)
    return (
        f"pods of {ref} (cleanPodPolicy {intent.clean_pod_policy} and TTL "
        f"{intent.ttl_seconds_after_finished} possibly not applied)"
    )




@dataclass(frozen=True)
class KillCall:
    """One API call a kill makes: a method of the hook (or pod/service deletion), its arguments.

    ``conn_id``: made through a hook of that connection instead (another cluster's: the driver makes
    it, of the kill hook's class, retrying for ``retry_timeout`` seconds in all); ``tolerant``: a
    failure is sent back as the call's result instead of ending the kill (a look that must not stop
    the deletion).
    """

    method: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)
    conn_id: str | None = None
    retry_timeout: float | None = None
    tolerant: bool = False


#: A kill's steps that run elsewhere (made by :class:`KillElsewhere`): KillCall steps and pauses; what each
#: call returned is sent back.
ElsewhereSteps = Generator["KillCall | float", Any, None]


class KillElsewhere(Protocol):
    """What a kill also does beyond the job's own cluster, around its deletion (a caller's, from an
    integration: the core names none). ``before`` runs before the job is deleted (what the job and
    its objects say is read then: they go with it), ``after`` once the deletion's wait is over."""

    def before(self, kind: JobKind, name: str, namespace: str) -> ElsewhereSteps: ...

    def after(self, kind: JobKind, name: str, namespace: str) -> ElsewhereSteps: ...


@dataclass(frozen=True)
class _Batch:
    """Independent calls of a kill, made side by side (at most DELETES_AT_ONCE in flight); every call
    is made and the first failure raised once all have ended, as in :func:`delete_pods`."""

    calls: tuple[KillCall, ...]


# A kill as a sequence of steps, the same for the synchronous and the asynchronous hook: each KillCall or
# _Batch is made by the driver (kill, kill_async) and its result sent back; a float is a pause in seconds.
_KillSteps = Generator["KillCall | _Batch | float", Any, bool]


class KillOptions(TypedDict, total=False):
    """How a kill deletes (the keyword arguments of :func:`kill` and :func:`kill_async`)."""

    grace_period_seconds: int | None  # of the pod deletions; None: each pod's terminationGracePeriodSeconds
    why: str  # for the log line: "Deleting TFJob ns/name because <why>"
    kind: JobKind  # the job's kind (required: the caller knows what it killed)
    wait_timeout: float  # how long to wait until nothing of the job is left
    poll_interval: float
    elsewhere: KillElsewhere | None  # what the kill also checks elsewhere (MultiKueue's worker copy)


def _kill_steps(name: str, namespace: str, log: Log, options: KillOptions) -> _KillSteps:
    """Delete the TFJob, then each of its pods with the kill's grace period; True once nothing is left.

    The job goes first so that the training-operator stops recreating pods; its foreground deletion has
    garbage collection delete the pods with their own grace period, which the explicit deletions then
    shorten, so that their processes stop at once even where garbage collection is slow.
    """
    grace = options.get("grace_period_seconds", KILL_GRACE_PERIOD)
    wait_timeout = options.get("wait_timeout", 60.0)
    shown = "the pods' own" if grace is None else f"{grace} s"
    why = options.get("why", "the task was killed")
    kind = options["kind"]
    log(f"Deleting {kind.kind} {namespace}/{name} because {why}, and its pods (grace period {shown})")
    elsewhere = options.get("elsewhere")
    if elsewhere is not None:
        yield from elsewhere.before(kind, name, namespace)
    gone = yield from _delete_steps(kind, name, namespace, log, grace, wait_timeout, options)
    if elsewhere is not None:
        yield from elsewhere.after(kind, name, namespace)
    return gone


def _delete_steps(
    kind: JobKind, name: str, namespace: str, log: Log, grace: int | None, wait_timeout: float,
    options: KillOptions,
) -> _KillSteps:  # fmt: skip
    yield KillCall(
        "delete_job", (kind, name, namespace), {"propagation": "Foreground", "grace_period_seconds": grace}
    )
    pods = yield KillCall("list_job_pods", (name, namespace), {"kind": kind})
    yield _Batch(
        tuple(
            call
            for pod in pods
            for call in (
                KillCall("delete_pod", (_pod_name(pod), namespace), {"grace_period_seconds": grace}),
                KillCall("delete_service", (_pod_name(pod), namespace)),
            )
        )
    )
    deadline = time.monotonic() + wait_timeout
    while time.monotonic() < deadline:
        if (yield KillCall("find_job", (kind, name, namespace))) is None and not (
            yield KillCall("list_job_pods", (name, namespace), {"kind": kind})
        ):
            return True
        yield float(options.get("poll_interval", 0.5))
    log(f"{kind.kind} {namespace}/{name} or some of its pods still exist {wait_timeout:.0f} s after deletion")
    return False


def _start(name: str, namespace: str, on_kill_action: str, log: Log, options: KillOptions) -> _KillSteps:
    if on_kill_action not in ON_KILL_ACTIONS:
        raise ValueError(f"on_kill_action must be one of {ON_KILL_ACTIONS}, not {on_kill_action!r}")
    if on_kill_action == "keep":
        log(f"Task killed: keeping {options['kind'].kind} {namespace}/{name} (on_kill_action='keep')")
        return _nothing()
    return _kill_steps(name, namespace, log, options)


def _nothing() -> _KillSteps:
    return False
    yield 0.0  # a generator that makes no call


def _advance(steps: _KillSteps, result: Any) -> tuple[bool, Any]:
    """(False, the next step) or (True, the kill's outcome)."""
    try:
        return False, steps.send(result)
    except StopIteration as done:
        return True, bool(done.value)


def kill(
    hook: CleanupAPI,
    name: str,
    namespace: str,
    *,
    on_kill_action: str,
    log: Log,
    **options: Unpack[KillOptions],
) -> bool:
    """Delete a killed task's TFJob and its pods; True once nothing of it is left.

    The wait makes a kill observable: when this returns True, no TFJob, pod or service of the job
    remains.
    """
    steps = _start(name, namespace, on_kill_action, log, options)
    finished, step = _advance(steps, None)
    while not finished:
        finished, step = _advance(steps, _call(hook, step))
    return bool(step)


def _call(hook: Any, step: KillCall | _Batch | float) -> Any:
    if isinstance(step, float):
        time.sleep(step)
        return None
    if isinstance(step, _Batch):
        _side_by_side([partial(_call, hook, call) for call in step.calls])
        return None
    target = _other_hook(hook, step)
    try:
        return getattr(target, step.method)(*step.args, **step.kwargs)
    except Exception as error:
        if step.tolerant:
            return error
        raise


def _other_hook(hook: Any, step: KillCall) -> Any:
    """The hook a call is made through: the kill's, or one of the same class on the step's connection
    (made without I/O: a hook reads its connection at its first call, the async one off the loop)."""
    if step.conn_id is None:
        return hook
    return type(hook)(conn_id=step.conn_id, api_retry_timeout=step.retry_timeout)


async def kill_async(
    hook: AsyncKubeflowJobHook,
    name: str,
    namespace: str,
    *,
    on_kill_action: str,
    log: Log,
    **options: Unpack[KillOptions],
) -> bool:
    """:func:`kill` through the asynchronous hook (the trigger's): the same calls, in the same order."""
    steps = _start(name, namespace, on_kill_action, log, options)
    finished, step = _advance(steps, None)
    while not finished:
        finished, step = _advance(steps, await _call_async(hook, step))
    return bool(step)


async def _call_async(hook: AsyncKubeflowJobHook, step: KillCall | _Batch | float) -> Any:
    if isinstance(step, float):
        await asyncio.sleep(step)
        return None
    if isinstance(step, _Batch):
        in_flight = asyncio.Semaphore(DELETES_AT_ONCE)

        async def one(call: KillCall) -> Any:
            async with in_flight:
                return await _call_async(hook, call)

        results = await asyncio.gather(*(one(call) for call in step.calls), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result
        return None
    try:
        return await getattr(_other_hook(hook, step), step.method)(*step.args, **step.kwargs)
    except Exception as error:
        if step.tolerant:
            return error
        raise
