"""The Kubernetes Job controller (batch/v1), as far as JobSets use it: Indexed and NonIndexed Jobs,
parallelism/completions, backoffLimit (failed pods plus, under restartPolicy OnFailure, container
restarts in place), suspend and resume, and the Job conditions JobSet reads (Complete, Failed, Suspended).
The TTL-after-finished controller's part too: a finished Job with ``ttlSecondsAfterFinished`` is deleted
(Foreground) that many seconds after its completionTime, or its Failed condition's transition.

Pods are named `<job>-<index>-<5 random>` (generateName `<job>-<index>-`, Kubernetes'
`podGenerateNameWithIndex`), have hostname `<job>-<index>`, the label and annotation
`batch.kubernetes.io/job-completion-index`, the env `JOB_COMPLETION_INDEX` in every container and the
labels `batch.kubernetes.io/controller-uid`, `batch.kubernetes.io/job-name`, `controller-uid` and
`job-name` (from the template the API server defaulted, defaults.py). A JobSet's pods also get local
addresses (localnet.py). docs/reference/trainjob-behaviour.md §5.3 and §5.5.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging

from airflow_tfjob.local.controllers.reconciler import Reconciler, is_true, owner_reference, set_condition
from airflow_tfjob.local.model.resources import ApiError, JsonDict, clone, now_rfc3339, parse_rfc3339
from airflow_tfjob.local.node.localnet import host_ports, localize_pod
from airflow_tfjob.local.store.events import record_event

log = logging.getLogger(__name__)

INDEX_KEY = "batch.kubernetes.io/job-completion-index"
COMPONENT = "job-controller"
_FINISHED = ("Succeeded", "Failed")


def pod_index(pod: JsonDict) -> int | None:
    value = (pod["metadata"].get("annotations") or {}).get(INDEX_KEY)
    return int(value) if isinstance(value, str) and value.isdigit() else None


def _restarts(pod: JsonDict) -> int:
    status = pod.get("status") or {}
    statuses = [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]
    return sum(int(s.get("restartCount") or 0) for s in statuses if isinstance(s, dict))


def past_backoff_limit(spec: JsonDict, failed: list[JsonDict], active: list[JsonDict]) -> bool:
    """Kubernetes' rule (pkg/controller/job/job_controller.go): more failed pods than backoffLimit, or,
    under restartPolicy OnFailure, in-place restarts of the running/pending pods' containers summing to
    backoffLimit (any restart when it is 0, `pastBackoffLimitOnFailure`)."""
    limit = int(spec.get("backoffLimit", 6))
    if len(failed) > limit:
        return True
    if ((spec.get("template") or {}).get("spec") or {}).get("restartPolicy") != "OnFailure":
        return False
    restarts = sum(_restarts(p) for p in active)
    return restarts > 0 if limit == 0 else restarts >= limit


def _ready(pod: JsonDict) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def compress_indexes(indexes: set[int]) -> str:
    """`0-2,5`: the status.completedIndexes notation."""
    ranges: list[list[int]] = []
    for i in sorted(indexes):
        if ranges and ranges[-1][1] == i - 1:
            ranges[-1][1] = i
        else:
            ranges.append([i, i])
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in ranges)


class BatchJobController(Reconciler):
    """batch/v1 Jobs -> pods."""

    plural = "jobs"
    owns = ("pods",)

    def reconcile(self, namespace: str, name: str) -> float | None:
        job = self.get("jobs", namespace, name)
        if job is None or job["metadata"].get("deletionTimestamp"):
            return None
        spec = job.get("spec") or {}
        status = clone(job.get("status") or {})
        now = now_rfc3339()
        pods = self.owned("pods", job)
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        active = [p for p in live if (p.get("status") or {}).get("phase") not in _FINISHED]
        failed = [p for p in pods if (p.get("status") or {}).get("phase") == "Failed"]
        indexed = spec.get("completionMode") == "Indexed"
        done = {pod_index(p) if indexed else i
                for i, p in enumerate(p for p in pods if (p.get("status") or {}).get("phase") == "Succeeded")}
        completions = int(spec.get("completions", 1))
        finished = is_true(status, "Complete") or is_true(status, "Failed")
        if not finished and spec.get("suspend"):
            self._delete(active)
            active = []
            set_condition(status, "Suspended", "True", "JobSuspended", "Job suspended", now)
            status.pop("startTime", None)
        elif not finished:
            if is_true(status, "Suspended"):
                set_condition(status, "Suspended", "False", "JobResumed", "Job resumed", now)
            status.setdefault("startTime", now)
            if past_backoff_limit(spec, failed, active):
                set_condition(status, "Failed", "True", "BackoffLimitExceeded",
                              "Job has reached the specified backoff limit", now)
                record_event(self.store, job, "Warning", "BackoffLimitExceeded",
                             "Job has reached the specified backoff limit", COMPONENT)
            elif len(done) >= completions:
                set_condition(status, "Complete", "True", "CompletionsReached",
                              "Reached expected number of succeeded pods", now)
                status["completionTime"] = now
                record_event(self.store, job, "Normal", "Completed", "Job completed", COMPONENT)
            else:
                active += self._create_missing(job, active, done, indexed, completions)
            if is_true(status, "Failed"):
                self._delete(active)  # the Job controller terminates what still runs
                active = []
        status.update(
            active=len(active), ready=sum(1 for p in active if _ready(p)), failed=len(failed),
            succeeded=len(done), terminating=len(pods) - len(live),
        )
        if indexed:
            status["completedIndexes"] = compress_indexes({i for i in done if i is not None})
        self.write_status("jobs", job, status)
        expires_in = self._ttl_remaining({"spec": spec, "status": status})
        if expires_in is None or expires_in > 0:
            return expires_in  # reconciled again when it expires
        with contextlib.suppress(ApiError):  # gone already: nothing to do
            self.store.delete("jobs", namespace, name, propagation="Foreground")
        return None

    @staticmethod
    def _ttl_remaining(job: JsonDict) -> float | None:
        """Seconds until a finished Job's TTL expires (<= 0: expired); None for a Job with no TTL or
        not finished (pkg/controller/ttlafterfinished: the finish time is completionTime, else the
        Complete or Failed condition's lastTransitionTime)."""
        ttl = (job.get("spec") or {}).get("ttlSecondsAfterFinished")
        status = job.get("status") or {}
        if ttl is None or not (is_true(status, "Complete") or is_true(status, "Failed")):
            return None
        finished = status.get("completionTime")
        for condition in status.get("conditions") or ():
            if condition.get("type") in ("Complete", "Failed") and condition.get("status") == "True":
                finished = finished or condition.get("lastTransitionTime")
        at = parse_rfc3339(finished)
        if at is None:
            return None
        return at.timestamp() + int(ttl) - dt.datetime.now(dt.timezone.utc).timestamp()

    def _create_missing(self, job: JsonDict, active: list[JsonDict], done: set[int | None], indexed: bool,
                        completions: int) -> list[JsonDict]:
        spec = job["spec"]
        parallelism = int(spec.get("parallelism", 1))
        running = {pod_index(p) for p in active} if indexed else set()
        wanted = ([i for i in range(completions) if i not in done and i not in running] if indexed
                  else [None] * max(0, min(parallelism, completions - len(done)) - len(active)))
        created: list[JsonDict] = []
        for index in wanted[:max(0, parallelism - len(active))]:
            pod = self._pod(job, index)
            try:
                created.append(self.store.create("pods", job["metadata"]["namespace"], pod))
            except ApiError as exc:
                record_event(self.store, job, "Warning", "FailedCreate", f"Error creating: {exc.message}",
                             COMPONENT)
                raise
            record_event(self.store, job, "Normal", "SuccessfulCreate",
                         f"Created pod: {created[-1]['metadata']['name']}", COMPONENT)
        return created

    @staticmethod
    def _pod(job: JsonDict, index: int | None) -> JsonDict:
        name = job["metadata"]["name"]
        template = clone(job["spec"].get("template") or {})
        meta = template.get("metadata") or {}
        labels, annotations = dict(meta.get("labels") or {}), dict(meta.get("annotations") or {})
        spec = template.get("spec") or {}
        if index is not None:
            labels[INDEX_KEY] = annotations[INDEX_KEY] = str(index)
            spec["hostname"] = f"{name}-{index}"
            ref = {"fieldRef": {"fieldPath": f"metadata.annotations['{INDEX_KEY}']"}}
            for group in ("initContainers", "containers"):
                for container in spec.get(group) or []:
                    env = container.setdefault("env", [])
                    if not any(e.get("name") == "JOB_COMPLETION_INDEX" for e in env):
                        env.append({"name": "JOB_COMPLETION_INDEX", "valueFrom": ref})
        pod = {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": f"{name}-{index}-" if index is not None else f"{name}-",
                         "namespace": job["metadata"]["namespace"], "labels": labels, "annotations": annotations,
                         "ownerReferences": [owner_reference(job)]},
            "spec": spec,
        }
        localize_pod(pod, host_ports(job["metadata"].get("annotations")))
        return pod

    def _delete(self, pods: list[JsonDict]) -> None:
        for pod in pods:
            meta = pod["metadata"]
            with contextlib.suppress(ApiError):
                self.store.delete("pods", meta["namespace"], meta["name"])
