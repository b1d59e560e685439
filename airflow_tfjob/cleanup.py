"""What happens to a job (TFJob or another kind) and its pods once its logs are drained, and when its
task is killed.

The operator submits every TFJob with ``cleanPodPolicy: None`` and no ``ttlSecondsAfterFinished``, so
that neither the training-operator nor garbage collection removes a pod before its logs are read.
The policy the user asked for is kept in annotations on the TFJob and applied here, by the worker,
after the logs are drained. Both the synchronous and the deferred path call these functions, so the
two modes leave the cluster in the same state.

TTL: the operator cannot wait for the TTL in a synchronous task, so ``ttl == 0`` deletes the TFJob at
once, and a positive TTL is written back into ``spec.runPolicy.ttlSecondsAfterFinished`` with a merge
patch: the training-operator (or the local cluster's controller) then deletes the job
``ttl`` seconds after its ``completionTime``, exactly as if it had been submitted with it.
"""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypedDict

from airflow_tfjob.constants import ANNOTATION_INTENDED_CLEAN_POD_POLICY, ANNOTATION_INTENDED_TTL
from airflow_tfjob.kinds import TFJOB, TRAINJOB, JobKind

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from airflow_tfjob.hooks.tfjob import AsyncTFJobHook

ON_FINISH_ACTIONS = ("keep", "delete", "delete_succeeded")
ON_KILL_ACTIONS = ("delete", "keep")

Log = Callable[[str], None]


class CleanupAPI(Protocol):
    """The part of TFJobHook that cleanup needs (kept narrow so the contract is visible).

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


# ---------------------------------------------------------------- the intent, kept in annotations


@dataclass(frozen=True)
class IntendedCleanup:
    """What the user asked the operator to clean up once the job is finished and its logs are read."""

    clean_pod_policy: str = "None"
    ttl_seconds_after_finished: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "clean_pod_policy": self.clean_pod_policy,
            "ttl_seconds_after_finished": self.ttl_seconds_after_finished,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> IntendedCleanup:
        return cls(data.get("clean_pod_policy") or "None", data.get("ttl_seconds_after_finished"))


def intended_cleanup(tfjob: Mapping[str, Any]) -> IntendedCleanup:
    """The cleanup intent of a manifest or a live job: our annotations first, then its run policy.

    On a job submitted by :func:`submission_manifest` the run policy says None/no TTL and the
    annotations hold the intent; on any other manifest the run policy is the intent.
    """
    annotations = (tfjob.get("metadata") or {}).get("annotations") or {}
    run_policy = (tfjob.get("spec") or {}).get("runPolicy") or {}
    policy = annotations.get(ANNOTATION_INTENDED_CLEAN_POD_POLICY)
    if policy is None or run_policy.get("cleanPodPolicy") not in (None, "None"):
        policy = run_policy.get("cleanPodPolicy") or "None"
    ttl: Any = annotations.get(ANNOTATION_INTENDED_TTL)
    if run_policy.get("ttlSecondsAfterFinished") is not None:
        ttl = run_policy["ttlSecondsAfterFinished"]
    return IntendedCleanup(str(policy), int(ttl) if ttl not in (None, "") else None)


def submission_manifest(manifest: Mapping[str, Any]) -> tuple[dict[str, Any], IntendedCleanup]:
    """The manifest to submit, and the cleanup the user intended.

    Submitted with ``cleanPodPolicy: None`` and no TTL, so that neither the training-operator nor
    garbage collection deletes pods before the provider has drained their logs; the intent travels in annotations and the provider applies it afterwards.
    """
    intent = intended_cleanup(manifest)
    out = copy.deepcopy(dict(manifest))
    metadata = out.setdefault("metadata", {})
    annotations = dict(metadata.get("annotations") or {})
    annotations[ANNOTATION_INTENDED_CLEAN_POD_POLICY] = intent.clean_pod_policy
    if intent.ttl_seconds_after_finished is not None:
        annotations[ANNOTATION_INTENDED_TTL] = str(intent.ttl_seconds_after_finished)
    else:
        annotations.pop(ANNOTATION_INTENDED_TTL, None)
    metadata["annotations"] = annotations
    spec = out.setdefault("spec", {})
    if out.get("kind") == TRAINJOB.kind:
        return out, intent  # no runPolicy: the controller deletes no pod of a finished TrainJob
    run_policy = spec.get("runPolicy")
    if not isinstance(run_policy, dict):
        run_policy = spec["runPolicy"] = {}
    run_policy["cleanPodPolicy"] = "None"
    run_policy.pop("ttlSecondsAfterFinished", None)
    return out, intent


# ---------------------------------------------------------------- after the logs are drained


@dataclass
class CleanupReport:
    """What cleanup did, for the task log and for tests."""

    deleted_pods: list[str] = field(default_factory=list)
    job_deleted: bool = False
    ttl_patched: int | None = None
    kind: str = "TFJob"

    def describe(self) -> str:
        parts = []
        if self.job_deleted:
            parts.append(f"deleted the {self.kind}")
        if self.deleted_pods:
            parts.append(f"deleted pods {', '.join(sorted(self.deleted_pods))}")
        if self.ttl_patched is not None:
            parts.append(f"set ttlSecondsAfterFinished={self.ttl_patched}")
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
    kind: JobKind = TFJOB,
) -> list[str]:
    """Delete the job's pods (all, or only Running/Pending ones) and each deleted pod's service.

    Services are found by the pod's name, as the training-operator does, because every replica's
    headless service is named after its pod.
    """
    deleted: list[str] = []
    for pod in hook.list_job_pods(name, namespace, kind=kind):
        if only_active and _phase(pod) not in ("Running", "Pending"):
            continue
        pod_name = _pod_name(pod)
        hook.delete_pod(pod_name, namespace, grace_period_seconds=grace_period_seconds)
        hook.delete_service(pod_name, namespace)
        deleted.append(pod_name)
    return deleted


def apply_clean_pod_policy(
    hook: CleanupAPI, name: str, namespace: str, policy: str, kind: JobKind = TFJOB
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
    kind: JobKind = TFJOB,
) -> None:
    if ttl is None:
        return
    if ttl <= 0:
        hook.delete_job(kind, name, namespace, propagation="Foreground")
        report.job_deleted = True
        return
    hook.patch_job(kind, name, namespace, {"spec": {"runPolicy": {"ttlSecondsAfterFinished": ttl}}})
    report.ttl_patched = ttl


def finish(
    hook: CleanupAPI,
    tfjob: Mapping[str, Any],
    *,
    succeeded: bool,
    on_finish_action: str,
    log: Log,
) -> CleanupReport:
    """Clean up after a finished job whose logs have been drained.

    The on-finish action comes first: when it deletes the TFJob, its pods and services go with it
    (foreground propagation), so the intended cleanPodPolicy and TTL have nothing left to act on.
    """
    if on_finish_action not in ON_FINISH_ACTIONS:
        raise ValueError(f"on_finish_action must be one of {ON_FINISH_ACTIONS}, not {on_finish_action!r}")
    from airflow_tfjob.status import job_kind

    metadata = tfjob.get("metadata") or {}
    name, namespace = str(metadata["name"]), str(metadata.get("namespace") or "default")
    kind = job_kind(tfjob)
    report = CleanupReport(kind=kind.kind)
    if on_finish_action == "delete" or (on_finish_action == "delete_succeeded" and succeeded):
        hook.delete_job(kind, name, namespace, propagation="Foreground")
        report.job_deleted = True
    else:
        intent = intended_cleanup(tfjob)
        report.deleted_pods = apply_clean_pod_policy(hook, name, namespace, intent.clean_pod_policy, kind)
        apply_ttl(hook, name, namespace, intent.ttl_seconds_after_finished, report, kind)
    log(f"Cleanup of {kind.kind} {namespace}/{name}: {report.describe()}")
    return report


def leftover_description(tfjob: Mapping[str, Any], on_finish_action: str, succeeded: bool) -> str:
    """What a failed :func:`finish` may have left in the cluster, for the warning and XCom."""
    metadata = tfjob.get("metadata") or {}
    ref = f"{tfjob.get('kind') or 'TFJob'} {metadata.get('namespace')}/{metadata.get('name')}"
    if on_finish_action == "delete" or (on_finish_action == "delete_succeeded" and succeeded):
        return f"{ref} and its pods (on_finish_action={on_finish_action!r} not done)"
    intent = intended_cleanup(tfjob)
    return (
        f"pods of {ref} (cleanPodPolicy {intent.clean_pod_policy} and TTL "
        f"{intent.ttl_seconds_after_finished} possibly not applied)"
    )


#: The grace period (seconds) of a kill's deletions unless the operator's ``kill_grace_period`` says
#: otherwise: SIGTERM, then SIGKILL one second later. A killed task's job must stop within seconds, not
#: after the pods' own terminationGracePeriodSeconds (30 s by default); 1 rather than 0 because 0 is a
#: forced deletion, which removes the pod objects before the kubelet has stopped their processes.
KILL_GRACE_PERIOD = 1


@dataclass(frozen=True)
class _Call:
    """One API call a kill makes: a method of the hook (or pod/service deletion), its arguments."""

    method: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)


# A kill as a sequence of steps, the same for the synchronous and the asynchronous hook: each _Call is
# made by the driver (kill, kill_async) and its result sent back; a float is a pause in seconds.
_KillSteps = Generator["_Call | float", Any, bool]


class KillOptions(TypedDict, total=False):
    """How a kill deletes (the keyword arguments of :func:`kill` and :func:`kill_async`)."""

    grace_period_seconds: int | None  # of the pod deletions; None: each pod's terminationGracePeriodSeconds
    why: str  # for the log line: "Deleting TFJob ns/name because <why>"
    kind: JobKind  # the job's kind (TFJob unless given)
    wait_timeout: float  # how long to wait until nothing of the job is left
    poll_interval: float


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
    kind = options.get("kind", TFJOB)
    log(f"Deleting {kind.kind} {namespace}/{name} because {why}, and its pods (grace period {shown})")
    yield _Call(
        "delete_job", (kind, name, namespace), {"propagation": "Foreground", "grace_period_seconds": grace}
    )
    pods = yield _Call("list_job_pods", (name, namespace), {"kind": kind})
    for pod in pods:
        yield _Call("delete_pod", (_pod_name(pod), namespace), {"grace_period_seconds": grace})
        yield _Call("delete_service", (_pod_name(pod), namespace))
    deadline = time.monotonic() + wait_timeout
    while time.monotonic() < deadline:
        if (yield _Call("find_job", (kind, name, namespace))) is None and not (
            yield _Call("list_job_pods", (name, namespace), {"kind": kind})
        ):
            return True
        yield float(options.get("poll_interval", 0.5))
    log(f"{kind.kind} {namespace}/{name} or some of its pods still exist {wait_timeout:.0f} s after deletion")
    return False


def _start(name: str, namespace: str, on_kill_action: str, log: Log, options: KillOptions) -> _KillSteps:
    if on_kill_action not in ON_KILL_ACTIONS:
        raise ValueError(f"on_kill_action must be one of {ON_KILL_ACTIONS}, not {on_kill_action!r}")
    if on_kill_action == "keep":
        log(
            f"Task killed: keeping {options.get('kind', TFJOB).kind} {namespace}/{name} (on_kill_action='keep')"
        )
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


def _call(hook: Any, step: _Call | float) -> Any:
    if isinstance(step, float):
        time.sleep(step)
        return None
    return getattr(hook, step.method)(*step.args, **step.kwargs)


async def kill_async(
    hook: AsyncTFJobHook,
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


async def _call_async(hook: AsyncTFJobHook, step: _Call | float) -> Any:
    if isinstance(step, float):
        await asyncio.sleep(step)
        return None
    return await getattr(hook, step.method)(*step.args, **step.kwargs)
