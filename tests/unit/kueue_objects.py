"""Kueue Workloads and kubeflow jobs as they look at each step of docs/reference/kueue-behaviour.md §3.2.

Constructed from the reference's tables (condition types, reasons, messages, which fields are set
when), for the unit tests of the Kueue modules; the integration tests read real ones from the local
cluster's emulation.
"""

from __future__ import annotations

from typing import Any

JOB_UID = "0b8e5d3c-6a1e-4f7b-9d2a-1c3e5f7a9b0d"
PREEMPTOR_WL_UID = "7f1c2d3e-0000-4000-8000-000000000001"
PREEMPTOR_JOB_UID = "7f1c2d3e-0000-4000-8000-000000000002"
WORKLOAD = "tfjob-mnist-3f2a1"
PENDING = "couldn't assign flavors to pod set worker: insufficient unused quota for cpu in flavor default, 1 more needed"
PREEMPTED = (
    f"Preempted to accommodate a workload (UID: {PREEMPTOR_WL_UID}, JobUID: {PREEMPTOR_JOB_UID}) due to "
    "prioritization in the ClusterQueue; preemptor path: /cluster-queue; preemptee path: /cluster-queue"
)


def cond(ctype: str, status: str, reason: str, message: str, at: str = "2026-12-01T10:00:00Z") -> dict[str, Any]:
    return {
        "type": ctype,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": at,
        "observedGeneration": 1,
    }


def workload(*conditions: dict[str, Any], admitted: bool = False, preemptions: int = 0) -> dict[str, Any]:
    """The TFJob mnist's Workload (§4.3's shape) with these conditions."""
    status: dict[str, Any] = {"conditions": list(conditions)}
    if admitted:
        status["admission"] = {
            "clusterQueue": "cluster-queue",
            "podSetAssignments": [
                {"name": "worker", "count": 2, "flavors": {"cpu": "default"}, "resourceUsage": {"cpu": "2"}}
            ],
        }
    if preemptions:
        status["schedulingStats"] = {
            "evictions": [{"reason": "Preempted", "underlyingCause": "", "count": preemptions}]
        }
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {
            "name": WORKLOAD,
            "namespace": "team-a",
            "uid": "wl-uid-1",
            "creationTimestamp": "2026-12-01T10:00:00Z",
            "labels": {"kueue.x-k8s.io/job-uid": JOB_UID},
            "ownerReferences": [
                {
                    "apiVersion": "kubeflow.org/v1",
                    "kind": "TFJob",
                    "name": "mnist",
                    "uid": JOB_UID,
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {"queueName": "user-queue", "podSets": [{"name": "worker", "count": 2}], "priority": 0},
        "status": status,
    }


def preemptor_workload() -> dict[str, Any]:
    """The Workload of the job that preempts mnist: the TFJob urgent, whose UID Kueue's message names."""
    other = workload(RESERVED, ADMITTED, admitted=True)
    other["metadata"].update(name="tfjob-urgent-9c0de", uid=PREEMPTOR_WL_UID)
    other["metadata"]["labels"] = {"kueue.x-k8s.io/job-uid": PREEMPTOR_JOB_UID}
    other["metadata"]["ownerReferences"] = [
        {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "name": "urgent", "uid": PREEMPTOR_JOB_UID, "controller": True}
    ]
    return other


def job(*conditions: dict[str, Any], suspend: bool = False, version: str = "1") -> dict[str, Any]:
    """The TFJob mnist, labelled for LocalQueue user-queue."""
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {
            "name": "mnist",
            "namespace": "team-a",
            "uid": JOB_UID,
            "resourceVersion": version,
            "labels": {"kueue.x-k8s.io/queue-name": "user-queue"},
        },
        "spec": {"runPolicy": {"suspend": suspend}, "tfReplicaSpecs": {"Worker": {"replicas": 2}}},
        "status": {"conditions": list(conditions)},
    }


WAIT_FOR_START = cond("PodsReady", "False", "WaitForStart", "Not all pods are ready or succeeded")
QUEUED = cond("QuotaReserved", "False", "Pending", PENDING)
RESERVED = cond("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue cluster-queue", "2026-12-01T10:00:42Z")
ADMITTED = cond("Admitted", "True", "Admitted", "The workload is admitted", "2026-12-01T10:00:42Z")
STARTED = cond("PodsReady", "True", "Started", "All pods reached readiness and the workload is running")
EVICTED = cond("Evicted", "True", "Preempted", PREEMPTED, "2026-12-01T10:05:00Z")
PREEMPTED_COND = cond("Preempted", "True", "InClusterQueue", PREEMPTED, "2026-12-01T10:05:00Z")
REQUEUED = cond("Requeued", "True", "Preempted", PREEMPTED, "2026-12-01T10:05:03Z")
REQUEUED_PENDING = cond("QuotaReserved", "False", "Pending", PREEMPTED, "2026-12-01T10:05:03Z")
NO_RESERVATION = cond("Admitted", "False", "NoReservation", "The workload has no reservation", "2026-12-01T10:05:03Z")
RESERVED_AGAIN = cond("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue cluster-queue", "2026-12-01T10:05:13Z")
ADMITTED_AGAIN = cond("Admitted", "True", "Admitted", "The workload is admitted", "2026-12-01T10:05:13Z")
EVICTED_RESET = cond("Evicted", "False", "QuotaReserved", f"Previously: {PREEMPTED}", "2026-12-01T10:05:13Z")
PREEMPTED_RESET = cond("Preempted", "False", "QuotaReserved", f"Previously: {PREEMPTED}", "2026-12-01T10:05:13Z")
FINISHED = cond("Finished", "True", "Succeeded", "TFJob team-a/mnist successfully completed.")

# The job's own conditions (tfjob-behaviour.md §6: suspended, resumed, running).
JOB_CREATED = cond("Created", "True", "TFJobCreated", "TFJob mnist is created.")
JOB_SUSPENDED = cond("Suspended", "True", "TFJobSuspended", "TFJob mnist is suspended.")
JOB_RESUMED = cond("Suspended", "False", "TFJobResumed", "TFJob mnist is resumed.")
JOB_RUNNING = cond("Running", "True", "TFJobRunning", "TFJob mnist is running.")
JOB_NOT_RUNNING = cond("Running", "False", "TFJobSuspended", "TFJob mnist is suspended.")
JOB_SUCCEEDED = cond("Succeeded", "True", "TFJobSucceeded", "TFJob team-a/mnist successfully completed.")


def lifecycle() -> list[tuple[str, dict[str, Any], dict[str, Any] | None]]:
    """(step, job, Workload) through §3.2: created, queued, admitted, running, preempted, requeued,
    re-admitted, running again, finished."""
    return [
        ("created", job(JOB_CREATED, suspend=True, version="1"), workload()),
        ("queued", job(JOB_CREATED, JOB_SUSPENDED, suspend=True, version="2"), workload(WAIT_FOR_START, QUEUED)),
        (
            "admitted",
            job(JOB_CREATED, JOB_SUSPENDED, suspend=True, version="3"),
            workload(WAIT_FOR_START, RESERVED, ADMITTED, admitted=True),
        ),
        (
            "running",
            job(JOB_CREATED, JOB_RESUMED, JOB_RUNNING, version="4"),
            workload(STARTED, RESERVED, ADMITTED, admitted=True),
        ),
        (
            "being preempted",
            job(JOB_CREATED, JOB_RESUMED, JOB_RUNNING, suspend=True, version="5"),
            workload(STARTED, RESERVED, ADMITTED, EVICTED, PREEMPTED_COND, admitted=True, preemptions=1),
        ),
        (
            "requeued",
            job(JOB_CREATED, JOB_SUSPENDED, JOB_NOT_RUNNING, suspend=True, version="6"),
            workload(
                WAIT_FOR_START, REQUEUED_PENDING, NO_RESERVATION, EVICTED, PREEMPTED_COND, REQUEUED, preemptions=1
            ),
        ),
        (
            "re-admitted",
            job(JOB_CREATED, JOB_SUSPENDED, JOB_NOT_RUNNING, suspend=True, version="7"),
            workload(
                WAIT_FOR_START, RESERVED_AGAIN, ADMITTED_AGAIN, EVICTED_RESET, PREEMPTED_RESET, REQUEUED,
                admitted=True, preemptions=1,
            ),
        ),
        (
            "running again",
            job(JOB_CREATED, JOB_RESUMED, JOB_RUNNING, version="8"),
            workload(
                STARTED, RESERVED_AGAIN, ADMITTED_AGAIN, EVICTED_RESET, PREEMPTED_RESET, REQUEUED,
                admitted=True, preemptions=1,
            ),
        ),
        (
            "finished",
            job(JOB_CREATED, JOB_RESUMED, JOB_SUCCEEDED, version="9"),
            workload(
                STARTED, RESERVED_AGAIN, ADMITTED_AGAIN, EVICTED_RESET, PREEMPTED_RESET, REQUEUED, FINISHED,
                admitted=True, preemptions=1,
            ),
        ),
    ]


def pending_summary(local: int, cluster: int, name: str = WORKLOAD) -> dict[str, Any]:
    """A PendingWorkloadsSummary (§8) listing the Workload at these positions."""
    return {
        "kind": "PendingWorkloadsSummary",
        "apiVersion": "visibility.kueue.x-k8s.io/v1beta2",
        "metadata": {},
        "items": [
            {
                "metadata": {
                    "name": name,
                    "namespace": "team-a",
                    "creationTimestamp": "2026-12-01T10:00:00Z",
                    "ownerReferences": [{"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "name": "mnist", "uid": JOB_UID}],
                },
                "priority": 0,
                "localQueueName": "user-queue",
                "positionInClusterQueue": cluster,
                "positionInLocalQueue": local,
            }
        ],
    }
