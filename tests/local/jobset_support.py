"""A standalone JobSet (jobset.x-k8s.io/v1alpha2) for the Kueue tests: replicated jobs whose pods wait for
a file, as upstream's testingjobset.MakeJobSet(...).ReplicatedJobs(...) builds them, and its reads through
the official client."""

from __future__ import annotations

import sys
from typing import Any

from kubernetes import client
from kueue_support import NS, QUEUE_LABEL

JOBSET, JV = "jobset.x-k8s.io", "v1alpha2"
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"


def make_jobset(name: str, queue: str | None, script: str, replicated: list[tuple[str, int, int]],
                cpu: str = "250m") -> dict[str, Any]:
    """`replicated`: (name, replicas, parallelism = completions) per replicated job."""
    container = {"name": "main", "image": "python:3.11", "command": [sys.executable, "-c", script],
                 "resources": {"requests": {"cpu": cpu}}}
    rjobs = [{"name": rname, "replicas": replicas, "template": {"spec": {
        "parallelism": pods, "completions": pods,
        "template": {"spec": {"restartPolicy": "Never", "containers": [container]}}}}}
        for rname, replicas, pods in replicated]
    return {"apiVersion": f"{JOBSET}/{JV}", "kind": "JobSet",
            "metadata": {"name": name, "labels": {QUEUE_LABEL: queue} if queue else {}},
            "spec": {"replicatedJobs": rjobs}}


def create_jobset(crd: client.CustomObjectsApi, body: dict[str, Any]) -> dict[str, Any]:
    return dict(crd.create_namespaced_custom_object(JOBSET, JV, NS, "jobsets", body))


def get_jobset(crd: client.CustomObjectsApi, name: str) -> dict[str, Any] | None:
    try:
        return dict(crd.get_namespaced_custom_object(JOBSET, JV, NS, "jobsets", name))
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def jobset_workload(crd: client.CustomObjectsApi, uid: str) -> dict[str, Any] | None:
    """The Workload of the JobSet with `uid` (by Kueue's job-uid label)."""
    found = crd.list_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", NS, "workloads",
                                              label_selector=f"kueue.x-k8s.io/job-uid={uid}")["items"]
    return dict(found[0]) if found else None


def jobset_pods(api: client.ApiClient, name: str) -> list[Any]:
    return list(client.CoreV1Api(api).list_namespaced_pod(NS, label_selector=f"{JOBSET_NAME_LABEL}={name}").items)


def node_selectors(jobset: dict[str, Any]) -> list[dict[str, str] | None]:
    """Each replicated job's pod template nodeSelector, in order."""
    return [((r["template"]["spec"]["template"].get("spec") or {}).get("nodeSelector"))
            for r in jobset["spec"]["replicatedJobs"]]
