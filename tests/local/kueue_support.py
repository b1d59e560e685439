"""Shared by the Kueue emulation's tests: a Kueue-enabled LocalCluster reached through the official
client, queues created over the API, labelled jobs of any kind whose replicas wait for a file, and reads
of a job's Workload. Every wait is on a condition (waiting.until), bounded by a timeout for a hung
cluster."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client, config
from waiting import until

from airflow_tfjob.jobs.kinds import JobKind
from airflow_tfjob.local import LocalCluster
from airflow_tfjob.local.kueue import queue_objects

NS = "default"
KUEUE = "kueue.x-k8s.io"
V2 = "v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"


def wait_then_exit(go: Path, lines: int = 0) -> str:
    """A replica that prints `lines` numbered lines, then waits for `go` to exist and exits 0."""
    return (f"import os, time\nfor i in range({lines}): print('line', i, flush=True)\n"
            f"while not os.path.exists({str(go)!r}): time.sleep(0.02)\n")


def replica_type(kind: JobKind) -> str:
    return "Master" if kind.required_types else "Worker"


def labelled_job(kind: JobKind, name: str, queue: str | None, script: str, *, cpu: str = "1",
                 priority: str | None = None, replicas: dict[str, int] | None = None,
                 **run_policy: Any) -> dict[str, Any]:
    labels = {QUEUE_LABEL: queue} if queue else {}
    if priority:
        labels[PRIORITY_LABEL] = priority
    container = {"name": kind.container, "image": "python:3.11", "command": [sys.executable, "-c", script],
                 "resources": {"requests": {"cpu": cpu}}}
    specs = {rtype: {"replicas": n, "restartPolicy": "Never", "template": {"spec": {"containers": [container]}}}
             for rtype, n in (replicas or {replica_type(kind): 1}).items()}
    spec: dict[str, Any] = {kind.spec_key: specs}
    if run_policy:
        spec["runPolicy"] = run_policy
    return {"apiVersion": "kubeflow.org/v1", "kind": kind.kind, "metadata": {"name": name, "labels": labels},
            "spec": spec}


@dataclass
class Kube:
    """The official client on one cluster, and the reads the Kueue tests share."""

    cluster: LocalCluster
    api: client.ApiClient

    @classmethod
    def on(cls, cluster: LocalCluster) -> Kube:
        return cls(cluster, config.new_client_from_config(str(cluster.kubeconfig_path)))

    @property
    def crd(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.api)

    def apply(self, objects: list[dict[str, Any]]) -> None:
        for obj in objects:
            plural = {"ResourceFlavor": "resourceflavors", "ClusterQueue": "clusterqueues",
                      "LocalQueue": "localqueues", "WorkloadPriorityClass": "workloadpriorityclasses"}[obj["kind"]]
            if obj["kind"] == "LocalQueue":
                self.crd.create_namespaced_custom_object(KUEUE, V2, obj["metadata"].get("namespace", NS), plural, obj)
            else:
                self.crd.create_cluster_custom_object(KUEUE, V2, plural, obj)

    def queue(self, name: str, quota: dict[str, Any], **options: Any) -> str:
        """A ClusterQueue `name` with its own flavor and a LocalQueue of the same name; returns the latter."""
        self.apply(queue_objects(cluster_queue=name, local_queue=name, flavor=f"{name}-flavor", quota=quota,
                                 **options))
        return name

    def create(self, job: dict[str, Any]) -> dict[str, Any]:
        plural = job["kind"].lower() + "s"
        return dict(self.crd.create_namespaced_custom_object("kubeflow.org", "v1", NS, plural, job))

    def job(self, kind: JobKind, name: str) -> dict[str, Any]:
        return dict(self.crd.get_namespaced_custom_object("kubeflow.org", "v1", NS, kind.plural, name))

    def workload(self, kind: JobKind, name: str, version: str = V2) -> dict[str, Any] | None:
        uid = self.job(kind, name)["metadata"]["uid"]
        found = self.crd.list_namespaced_custom_object(KUEUE, version, NS, "workloads",
                                                       label_selector=f"kueue.x-k8s.io/job-uid={uid}")["items"]
        return dict(found[0]) if found else None

    def wait_workload(self, kind: JobKind, name: str, predicate: Callable[[dict[str, Any]], object],
                      what: str) -> dict[str, Any]:
        seen: dict[str, Any] = {}

        def check() -> bool:
            wl = self.workload(kind, name)
            if wl is None or not predicate(wl):
                return False
            seen.update(wl)
            return True

        until(check, f"{kind.kind} {name}'s Workload: {what}")
        return seen

    def pods(self, name: str) -> list[Any]:
        return list(client.CoreV1Api(self.api).list_namespaced_pod(
            NS, label_selector=f"training.kubeflow.org/job-name={name}").items)

    def visibility(self, path: str, version: str = "v1beta1", **query: int) -> dict[str, Any]:
        """GET /apis/visibility.kueue.x-k8s.io/<version>/<path>: CustomObjectsApi with a sub-path, or the
        client's generic call_api when there are query parameters (limit, offset)."""
        if query:
            return dict(self.api.call_api(
                f"/apis/visibility.kueue.x-k8s.io/{version}/{path}", "GET", query_params=list(query.items()),
                response_types_map={200: "object"}, auth_settings=["BearerToken"], _return_http_data_only=True))
        if path.startswith("namespaces/"):
            _, ns, plural, rest = path.split("/", 3)
            return dict(self.crd.get_namespaced_custom_object("visibility.kueue.x-k8s.io", version, ns, plural, rest))
        plural, rest = path.split("/", 1)
        return dict(self.crd.get_cluster_custom_object("visibility.kueue.x-k8s.io", version, plural, rest))


def cond(obj: dict[str, Any], type_: str) -> tuple[str, str, str] | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == type_:
            return c.get("status"), c.get("reason"), c.get("message")
    return None


def is_true(obj: dict[str, Any], type_: str) -> bool:
    found = cond(obj, type_)
    return found is not None and found[0] == "True"


def admitted(wl: dict[str, Any]) -> bool:
    return is_true(wl, "Admitted") and bool((wl.get("status") or {}).get("admission"))


def suspended(job: dict[str, Any]) -> bool:
    return ((job.get("spec") or {}).get("runPolicy") or {}).get("suspend") is True
