"""The preflight's MultiKueue rows from plain values (preflight/checks.py): which workers a queue
dispatches to (LocalQueue -> ClusterQueue -> MultiKueue AdmissionCheck -> MultiKueueConfig), and each
worker's row: the kind not served there blocks (MultiKueue cannot run the copy); denied verbs warn,
naming them and the Role to apply."""

from __future__ import annotations

from typing import Any

from airflow_tfjob.jobs.kinds import TFJOB
from airflow_tfjob.preflight.checks import check, multikueue_workers
from airflow_tfjob.preflight.needs import Target

OBJECTS: dict[tuple[str, str], dict[str, Any]] = {
    ("localqueues", "mk"): {"spec": {"clusterQueue": "cq"}},
    ("clusterqueues", "cq"): {"spec": {"admissionChecksStrategy": {"admissionChecks": [{"name": "plain"},
                                                                                       {"name": "multi"}]}}},
    ("admissionchecks", "plain"): {"spec": {"controllerName": "example.com/other"}},
    ("admissionchecks", "multi"): {"spec": {"controllerName": "kueue.x-k8s.io/multikueue",
                                            "parameters": {"kind": "MultiKueueConfig", "name": "cfg"}}},
    ("multikueueconfigs", "cfg"): {"spec": {"clusters": ["w1", "w2"]}},
}


class Cluster:
    """A manager (the objects above, nothing else served) or a worker (what it serves, what it allows)."""

    def __init__(self, served: set[str] | None = None, denied: set[str] = frozenset()) -> None:  # type: ignore[assignment]
        self.served = served
        self.denied = denied
        self.cluster_reviews: list[str] = []  # the reviews asked at the cluster scope

    def served_resources(self, group_version: str) -> set[str] | None:
        return self.served

    def api_group(self, group: str) -> dict | None:
        return None

    def find_object(self, api_version: str, plural: str, name: str, namespace: str | None = None) -> dict | None:
        return OBJECTS.get((plural, name)) if api_version == "kueue.x-k8s.io/v1beta2" else None

    def access_review(self, verb: str, group: str, resource: str, namespace: str | None = None, *,
                      cluster_scoped: bool = False) -> bool:
        if cluster_scoped:
            self.cluster_reviews.append(f"{verb} {resource}.{group}")
        return f"{verb} {resource}" not in self.denied


def test_the_queue_s_workers_are_the_multikueue_check_s_config_s() -> None:
    assert multikueue_workers(Cluster(), "default", "mk") == ["w1", "w2"]
    assert multikueue_workers(Cluster(), "default", "other") is None


def test_a_worker_without_the_kind_blocks_and_denied_verbs_warn() -> None:
    workers = {"k1": Cluster(served=set()), "k2": Cluster(served={"tfjobs"}, denied={"get pods/log", "watch events"})}
    target = Target(TFJOB, queue="mk", workers=(("w1", "k1"), ("w2", "k2")))
    report = check(Cluster(), "default", [target], workers.__getitem__)
    rows = {f.part: f for f in report.findings if f.part.startswith("MultiKueue")}
    w1, w2 = rows["MultiKueue worker w1 (TFJob)"], rows["MultiKueue worker w2 (TFJob)"]
    assert (w1.status, w1.there) == ("MISSING", "connection k1: kubeflow.org/v1 does not serve tfjobs")
    assert w1.fix.startswith("install Kubeflow training-operator on w1: kubectl apply")
    assert w2.status == "warning" and w2.missing.startswith("get pods/log, watch events in default there")
    assert "kubectl apply -n default -f" in w2.fix and "connection k2's user" in w2.fix
    assert not report.ok


def test_the_manager_row_asks_the_clusterrole_s_verbs_at_the_cluster_scope() -> None:
    """A MultiKueue queue gets one manager row, before the workers', however many targets name it: the
    shipped ClusterRole's verbs asked cluster-wide (MultiKueueClusters are cluster-scoped); denied, a
    warning naming the file to apply; a queue without MultiKueue gets no such row."""
    targets = [Target(TFJOB, queue="mk"), Target(TFJOB, queue="mk")]
    allowed = Cluster()
    report = check(allowed, "default", targets)
    parts = [f.part for f in report.findings if f.part.startswith("MultiKueue")]
    row = "MultiKueue on the manager (airflow_tfjob/rbac/multikueue-clusterrole.yaml)"
    assert parts == [row, "MultiKueue worker w1 (TFJob)", "MultiKueue worker w2 (TFJob)"], parts
    (manager,) = [f for f in report.findings if f.part == row]
    assert (manager.status, manager.there) == ("ok", "the 1 cluster-wide verbs the follow uses allowed")
    assert allowed.cluster_reviews == ["get multikueueclusters.kueue.x-k8s.io"]

    denied = check(Cluster(denied={"get multikueueclusters"}), "default", targets[:1])
    (manager,) = [f for f in denied.findings if f.part == row]
    assert manager.status == "warning" and manager.there == "0 of 1 verbs allowed cluster-wide", manager
    assert manager.missing.startswith("get multikueueclusters.kueue.x-k8s.io at the cluster scope")
    assert manager.fix == ("kubectl apply -f airflow_tfjob/rbac/multikueue-clusterrole.yaml and bind the "
                           "ClusterRole to the job connection's user (the file's ClusterRoleBinding)")

    plain = check(Cluster(), "default", [Target(TFJOB, queue="other")])
    assert not [f for f in plain.findings if f.part.startswith("MultiKueue")]
