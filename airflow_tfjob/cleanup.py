"""What happens to a TFJob and its pods once its logs are drained, and when its task is killed.

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

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

ON_FINISH_ACTIONS = ("keep", "delete", "delete_succeeded")
ON_KILL_ACTIONS = ("delete", "keep")

Log = Callable[[str], None]


class CleanupAPI(Protocol):
    """The part of TFJobHook that cleanup needs (kept narrow so the contract is visible).

    Every call goes through the hook, so under its retry policy; deletes treat 404 as done.
    """

    def list_job_pods(
        self, name: str, namespace: str, replica_type: str | None = None, replica_index: int | None = None
    ) -> list[dict[str, Any]]: ...

    def delete_tfjob(
        self,
        name: str,
        namespace: str,
        propagation: str = "Foreground",
        grace_period_seconds: int | None = None,
    ) -> None: ...

    def find_tfjob(self, name: str, namespace: str) -> dict[str, Any] | None: ...

    def patch_tfjob(self, name: str, namespace: str, patch: dict[str, Any]) -> dict[str, Any]: ...

    def delete_pod(self, name: str, namespace: str, grace_period_seconds: int | None = None) -> None: ...

    def delete_service(self, name: str, namespace: str) -> None: ...


@dataclass
class CleanupReport:
    """What cleanup did, for the task log and for tests."""

    deleted_pods: list[str] = field(default_factory=list)
    job_deleted: bool = False
    ttl_patched: int | None = None

    def describe(self) -> str:
        parts = []
        if self.job_deleted:
            parts.append("deleted the TFJob")
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
    hook: CleanupAPI, name: str, namespace: str, *, only_active: bool, grace_period_seconds: int | None = None
) -> list[str]:
    """Delete the job's pods (all, or only Running/Pending ones) and each deleted pod's service.

    Services are found by the pod's name, as the training-operator does, because every replica's
    headless service is named after its pod.
    """
    deleted: list[str] = []
    for pod in hook.list_job_pods(name, namespace):
        if only_active and _phase(pod) not in ("Running", "Pending"):
            continue
        pod_name = _pod_name(pod)
        hook.delete_pod(pod_name, namespace, grace_period_seconds=grace_period_seconds)
        hook.delete_service(pod_name, namespace)
        deleted.append(pod_name)
    return deleted


def apply_clean_pod_policy(hook: CleanupAPI, name: str, namespace: str, policy: str) -> list[str]:
    """Apply a cleanPodPolicy to a finished job, with the training-operator's semantics.

    An unknown value behaves like All on the real operator; validation refuses it before submission,
    and here it is treated the same way so that no pod outlives a policy the user meant as cleanup.
    """
    if policy == "None":
        return []
    return delete_pods(hook, name, namespace, only_active=policy == "Running")


def apply_ttl(hook: CleanupAPI, name: str, namespace: str, ttl: int | None, report: CleanupReport) -> None:
    if ttl is None:
        return
    if ttl <= 0:
        hook.delete_tfjob(name, namespace, propagation="Foreground")
        report.job_deleted = True
        return
    hook.patch_tfjob(name, namespace, {"spec": {"runPolicy": {"ttlSecondsAfterFinished": ttl}}})
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
    metadata = tfjob.get("metadata") or {}
    name, namespace = str(metadata["name"]), str(metadata.get("namespace") or "default")
    report = CleanupReport()
    if on_finish_action == "delete" or (on_finish_action == "delete_succeeded" and succeeded):
        hook.delete_tfjob(name, namespace, propagation="Foreground")
        report.job_deleted = True
    else:
        from airflow_tfjob.manifest import intended_cleanup  # YAML/Jinja: not needed at DAG parse

        intent = intended_cleanup(tfjob)
        report.deleted_pods = apply_clean_pod_policy(hook, name, namespace, intent.clean_pod_policy)
        apply_ttl(hook, name, namespace, intent.ttl_seconds_after_finished, report)
    log(f"Cleanup of TFJob {namespace}/{name}: {report.describe()}")
    return report


def leftover_description(tfjob: Mapping[str, Any], on_finish_action: str, succeeded: bool) -> str:
    """What a failed :func:`finish` may have left in the cluster, for the warning and XCom."""
    metadata = tfjob.get("metadata") or {}
    ref = f"TFJob {metadata.get('namespace')}/{metadata.get('name')}"
    if on_finish_action == "delete" or (on_finish_action == "delete_succeeded" and succeeded):
        return f"{ref} and its pods (on_finish_action={on_finish_action!r} not done)"
    from airflow_tfjob.manifest import intended_cleanup

    intent = intended_cleanup(tfjob)
    return (
        f"pods of {ref} (cleanPodPolicy {intent.clean_pod_policy} and TTL "
        f"{intent.ttl_seconds_after_finished} possibly not applied)"
    )


def kill(
    hook: CleanupAPI,
    name: str,
    namespace: str,
    *,
    on_kill_action: str,
    log: Log,
    wait_timeout: float = 60.0,
    poll_interval: float = 0.5,
) -> bool:
    """Delete a killed task's TFJob and its pods; True once nothing of it is left.

    The pods are deleted explicitly, not only through the owner's foreground propagation, so that
    their processes stop at once even where garbage collection is slow; the wait makes a kill
    observable: when this returns True, no TFJob, pod or service of the job remains.
    """
    if on_kill_action not in ON_KILL_ACTIONS:
        raise ValueError(f"on_kill_action must be one of {ON_KILL_ACTIONS}, not {on_kill_action!r}")
    if on_kill_action == "keep":
        log(f"Task killed: keeping TFJob {namespace}/{name} (on_kill_action='keep')")
        return False
    log(f"Task killed: deleting TFJob {namespace}/{name} and its pods")
    hook.delete_tfjob(name, namespace, propagation="Foreground")
    delete_pods(hook, name, namespace, only_active=False)
    deadline = time.monotonic() + wait_timeout
    while time.monotonic() < deadline:
        if hook.find_tfjob(name, namespace) is None and not hook.list_job_pods(name, namespace):
            return True
        time.sleep(poll_interval)
    log(f"TFJob {namespace}/{name} or some of its pods still exist {wait_timeout:.0f} s after deletion")
    return False
