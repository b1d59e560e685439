"""Kueue v0.19.2's own integration tests, ported: the job framework for TFJob and PyTorchJob, and the
scheduler cases a single local node can show, replayed against the local cluster through the official
client only (docs/reference/kueue-behaviour.md, "Kueue's tests, ported", has the cases table).

Upstream files are under `test/integration/singlecluster/` of kubernetes-sigs/kueue at tag v0.19.2; each
test's docstring names its file and case. As upstream's scheduler tests do, standalone Workloads are
created directly and the test plays the parts of the absent job (finishing a Workload, releasing an
evicted one's quota, marking pods reclaimable); the job-framework cases run real replica processes and
write a Workload's admission by hand where upstream does (its manager there runs without a scheduler).
Prometheus metrics are not served: where upstream reads a metric, the same fact is read from the
Workloads."""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kueue_support import (
    KUEUE,
    NS,
    V2,
    Kube,
    admitted,
    cond,
    is_true,
    labelled_job,
    suspended,
    wait_then_exit,
)
from waiting import until, written

from airflow_tfjob.jobs.kinds import PYTORCHJOB, TFJOB, JobKind
from airflow_tfjob.local import LocalCluster
from airflow_tfjob.local.kueue import KUBEFLOW_V1
from airflow_tfjob.local.model.resources import now_rfc3339

INSTANCE = "cloud.provider.com/instance"
_names = itertools.count()


@pytest.fixture(scope="module")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kube]:
    """The managers of upstream's job and scheduler suites: no waitForPodsReady."""
    with LocalCluster(
        workdir=tmp_path_factory.mktemp("kueue-upstream"),
        kueue={"integrations": KUBEFLOW_V1, "wait_for_pods_ready": False},
    ) as cluster:
        yield Kube.on(cluster)


UNMANAGED_NS = "unmanaged-ns"


@pytest.fixture(scope="module")
def kube_all_jobs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kube]:
    """The manager of upstream's "Job controller" suites (tfjob and pytorchjob): no waitForPodsReady,
    WithManageJobsWithoutQueueName(true) and WithManagedJobsNamespaceSelector(NewNamespaceSelectorExcluding
    ("unmanaged-ns")), the namespace `unmanaged-ns` created."""
    with LocalCluster(
        workdir=tmp_path_factory.mktemp("kueue-upstream-all-jobs"),
        kueue={
            "integrations": KUBEFLOW_V1,
            "wait_for_pods_ready": False,
            "manage_jobs_without_queue_name": True,
            "managed_jobs_namespace_selector": {
                "matchExpressions": [
                    {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": [UNMANAGED_NS]}
                ]
            },
        },
    ) as cluster:
        kube = Kube.on(cluster)
        client.CoreV1Api(kube.api).create_namespace({"metadata": {"name": UNMANAGED_NS}})
        yield kube


@pytest.fixture(scope="module")
def kube_ready(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kube]:
    """Upstream's "Job controller when waitForPodsReady enabled": v0.19's default configuration."""
    with LocalCluster(
        workdir=tmp_path_factory.mktemp("kueue-upstream-ready"), kueue={"integrations": KUBEFLOW_V1}
    ) as cluster:
        yield Kube.on(cluster)


# ---- Kueue objects (upstream's MakeResourceFlavor, MakeClusterQueue, MakeLocalQueue, MakeWorkload)


def unique(prefix: str) -> str:
    return f"{prefix}-{next(_names)}"


def flavor(kube: Kube, name: str, *, taint: str | None = None, spec: dict[str, Any] | None = None) -> str:
    """A flavor labelled `INSTANCE: name` (or with `spec`); `taint` a NoSchedule taint `INSTANCE=taint`."""
    spec = {"nodeLabels": {INSTANCE: name}} if spec is None else spec
    if taint:
        spec["nodeTaints"] = [{"key": INSTANCE, "value": taint, "effect": "NoSchedule"}]
    kube.crd.create_cluster_custom_object(
        KUEUE,
        V2,
        "resourceflavors",
        {"apiVersion": f"{KUEUE}/{V2}", "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec},
    )
    return name


def cluster_queue(kube: Kube, name: str, flavors: list[tuple[str, dict[str, str]]], **spec: Any) -> str:
    """One resource group: `flavors` in try order, each with its nominal quotas."""
    covered = list(flavors[0][1])
    group = {
        "coveredResources": covered,
        "flavors": [
            {"name": f, "resources": [{"name": r, "nominalQuota": q[r]} for r in covered]} for f, q in flavors
        ],
    }
    kube.crd.create_cluster_custom_object(
        KUEUE,
        V2,
        "clusterqueues",
        {
            "apiVersion": f"{KUEUE}/{V2}",
            "kind": "ClusterQueue",
            "metadata": {"name": name},
            "spec": {"namespaceSelector": {}, "resourceGroups": [group], **spec},
        },
    )
    return name


def local_queue(kube: Kube, name: str, cq: str, ns: str = NS, **spec: Any) -> str:
    kube.crd.create_namespaced_custom_object(
        KUEUE,
        V2,
        ns,
        "localqueues",
        {
            "apiVersion": f"{KUEUE}/{V2}",
            "kind": "LocalQueue",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"clusterQueue": cq, **spec},
        },
    )
    return name


def workload(
    kube: Kube,
    name: str,
    queue: str,
    podsets: list[tuple[str, int, dict[str, str]]] | None = None,
    *,
    priority: int | None = None,
    pod: dict[str, Any] | None = None,
    ns: str = NS,
    labels: dict[str, str] | None = None,
) -> str:
    """A Workload with pod sets (name, count, requests), as MakeWorkload/MakePodSet build them; its name,
    or `ns/name` outside the default namespace (what `get` takes)."""
    sets = [
        {
            "name": ps,
            "count": count,
            "template": {
                "spec": {
                    **(pod or {}),
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "pause", "resources": {"requests": requests}}],
                }
            },
        }
        for ps, count, requests in podsets or [("main", 1, {"cpu": "1"})]
    ]
    spec: dict[str, Any] = {"queueName": queue, "podSets": sets}
    if priority is not None:
        spec["priority"] = priority
    meta = {"name": name, "labels": labels or {}}
    kube.crd.create_namespaced_custom_object(
        KUEUE,
        V2,
        ns,
        "workloads",
        {"apiVersion": f"{KUEUE}/{V2}", "kind": "Workload", "metadata": meta, "spec": spec},
    )
    return name if ns == NS else f"{ns}/{name}"


def _split(ref: str) -> tuple[str, str]:
    ns, _, name = ref.rpartition("/")
    return ns or NS, name


def get(kube: Kube, ref: str) -> dict[str, Any]:
    ns, name = _split(ref)
    return dict(kube.crd.get_namespaced_custom_object(KUEUE, V2, ns, "workloads", name))


def reserved_in(wl: dict[str, Any]) -> str | None:
    if not is_true(wl, "QuotaReserved"):
        return None
    return str(((wl.get("status") or {}).get("admission") or {}).get("clusterQueue"))


def expect_reserved(kube: Kube, cq: str, *names: str) -> None:
    """ExpectWorkloadsToHaveQuotaReservation."""
    for name in names:
        until(lambda n=name: reserved_in(get(kube, n)) == cq, f"{name} reserved in {cq}")  # type: ignore[misc]


def expect_pending(kube: Kube, *names: str) -> None:
    """ExpectWorkloadsToBePending: a QuotaReserved condition that is False (Workloads parked behind an
    identical head by equivalence hashing keep the condition they had)."""
    for name in names:
        until(
            lambda n=name: (cond(get(kube, n), "QuotaReserved") or ("",))[0] == "False",  # type: ignore[misc]
            f"{name} pending",
        )


def assignments(wl: dict[str, Any]) -> list[dict[str, Any]]:
    return list(wl["status"]["admission"]["podSetAssignments"])


def write_status(kube: Kube, name: str, change: Callable[[dict[str, Any]], None]) -> None:
    """A status write as upstream's test helpers make them (read, change, write; retried on a conflict)."""

    def attempt() -> bool:
        wl = get(kube, name)
        wl.setdefault("status", {})
        change(wl["status"])
        try:
            ns, short = _split(name)
            kube.crd.replace_namespaced_custom_object_status(KUEUE, V2, ns, "workloads", short, wl)
        except client.ApiException as exc:
            if exc.status == 409:
                return False
            raise
        return True

    until(attempt, f"a status write to {name}")


def set_condition(status: dict[str, Any], type_: str, value: str, reason: str, message: str) -> None:
    conditions = [c for c in status.get("conditions") or [] if c.get("type") != type_]
    conditions.append(
        {
            "type": type_,
            "status": value,
            "reason": reason,
            "message": message,
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
    )
    status["conditions"] = conditions


def finish(kube: Kube, *names: str) -> None:
    """util.FinishWorkloads."""
    for name in names:
        write_status(kube, name, lambda s: set_condition(s, "Finished", "True", "ByTest", "Finished by test"))


def unset_reservation(kube: Kube, name: str) -> None:
    """UnsetQuotaReservationWithCondition(Pending, "By test") and SyncAdmittedCondition, as
    util.FinishEvictionForWorkloads and util.SetQuotaReservation(nil) write them."""

    def change(status: dict[str, Any]) -> None:
        status.pop("admission", None)
        set_condition(status, "QuotaReserved", "False", "Pending", "By test")
        set_condition(status, "Admitted", "False", "NoReservation", "The workload has no reservation")

    write_status(kube, name, change)


def set_reservation(kube: Kube, name: str, cq: str, flavors: dict[str, str]) -> None:
    """util.SetQuotaReservation and SyncAdmittedCondition: pod set name -> its cpu flavor."""

    def change(status: dict[str, Any]) -> None:
        podsets = get(kube, name)["spec"]["podSets"]
        status["admission"] = {
            "clusterQueue": cq,
            "podSetAssignments": [
                {"name": ps["name"], "flavors": {"cpu": flavors[ps["name"]]}, "count": ps["count"]}
                for ps in podsets
            ],
        }
        set_condition(
            status, "QuotaReserved", "True", "QuotaReserved", f"Quota reserved in ClusterQueue {cq}"
        )
        set_condition(status, "Admitted", "True", "Admitted", "The workload is admitted")

    write_status(kube, name, change)


def reclaimable(kube: Kube, name: str, pods: dict[str, int]) -> None:
    """util.UpdateReclaimablePods."""
    write_status(
        kube, name, lambda s: s.update(reclaimablePods=[{"name": k, "count": v} for k, v in pods.items()])
    )


# ---- scheduler/scheduler_test.go


@pytest.mark.parametrize("requests", [{"cpu": "2"}, {}], ids=["cpu-and-pods", "pods-only"])
def test_pods_count_limits_admission(kube: Kube, requests: dict[str, str]) -> None:
    """scheduler_test.go, "Should admit workloads as number of pods allows it" and "... as the number of
    pods (only) allows it": a ClusterQueue covering `pods` counts each pod as one."""
    on_demand = flavor(kube, unique("on-demand"))
    quota = {"cpu": "100", "pods": "5"} if requests else {"pods": "5"}
    cq = cluster_queue(kube, unique("pods-count-cq"), [(on_demand, quota)])
    q = local_queue(kube, unique("pods-count-queue"), cq)
    wl1, wl2, wl3 = (unique(n) for n in ("wl1", "wl2", "wl3"))
    workload(kube, wl1, q, [("main", 3, requests)])
    expect_reserved(kube, cq, wl1)
    want = {"pods": "3", **({"cpu": "6"} if requests else {})}
    [psa] = assignments(get(kube, wl1))
    assert (psa["resourceUsage"], psa["count"]) == (want, 3)
    assert psa["flavors"] == {r: on_demand for r in want}
    workload(kube, wl2, q, [("main", 3, requests)])
    workload(kube, wl3, q, [("main", 2, requests)])
    expect_reserved(kube, cq, wl3)
    expect_pending(kube, wl2)
    finish(kube, wl1)
    expect_reserved(kube, cq, wl2, wl3)


def _three_podsets() -> list[tuple[str, int, dict[str, str]]]:
    return [(name, 1, {"cpu": "1"}) for name in ("first", "second", "third")]


def _first_of_three_admitted(kube: Kube) -> tuple[str, str, str, str]:
    """scheduler_test.go's preemption-cq (3 cpu, LowerPriority) and first-wl (three pod sets of 1 cpu)
    admitted in it: (cq, queue, first, second's name)."""
    on_demand = flavor(kube, unique("on-demand"))
    cq = cluster_queue(
        kube,
        unique("preemption-cq"),
        [(on_demand, {"cpu": "3"})],
        preemption={"withinClusterQueue": "LowerPriority"},
    )
    q = local_queue(kube, unique("preemption-queue"), cq)
    first = workload(kube, unique("first-wl"), q, _three_podsets())
    expect_reserved(kube, cq, first)
    return cq, q, first, unique("second-wl")


def test_admits_when_resources_are_dynamically_reclaimed(kube: Kube) -> None:
    """scheduler_test.go, "Should admit workloads when resources are dynamically reclaimed"."""
    cq, q, first, second = _first_of_three_admitted(kube)
    reclaimable(kube, first, {"third": 1})
    workload(kube, second, q, _three_podsets(), priority=100)
    until(lambda: is_true(get(kube, first), "Evicted"), "the first preempted")
    unset_reservation(kube, first)
    expect_reserved(kube, cq, second)
    assert reserved_in(get(kube, first)) is None
    reclaimable(kube, second, {"first": 1, "second": 1})
    expect_reserved(kube, cq, first, second)


def test_admits_when_resources_are_gradually_released(kube: Kube) -> None:
    """scheduler_test.go, "Should admit workloads when resources are gradually released"."""
    cq, q, first, second = _first_of_three_admitted(kube)
    workload(kube, second, q, [("first", 1, {"cpu": "1"})])
    expect_pending(kube, second)
    reclaimable(kube, first, {"third": 1})
    expect_reserved(kube, cq, first, second)


def tainted_then_on_demand(kube: Kube, prefix: str, **spec: Any) -> tuple[str, str, str]:
    """A ClusterQueue of 5 cpu on a flavor tainted `INSTANCE=spot-tainted:NoSchedule`, then 5 on an
    untainted one: (cq, tainted, on-demand)."""
    tainted = flavor(kube, unique("spot-tainted"), taint="spot-tainted")
    on_demand = flavor(kube, unique("on-demand"))
    cq = cluster_queue(kube, unique(prefix), [(tainted, {"cpu": "5"}), (on_demand, {"cpu": "5"})], **spec)
    return cq, tainted, on_demand


def prod_queue(kube: Kube, **stop: str) -> tuple[str, str]:
    """scheduler_test.go's prod-cq: a tainted spot flavor then on-demand, 5 cpu each (its cohort and the
    spot borrowing limit have nothing to borrow from and change nothing here)."""
    cq, _, _ = tainted_then_on_demand(
        kube, "prod-cq", cohortName="prod-cohort", stopPolicy=stop.get("cq", "None")
    )
    return cq, local_queue(kube, unique("prod-queue"), cq, stopPolicy=stop.get("lq", "None"))


@pytest.mark.parametrize("held", ["cq", "lq"])
def test_a_held_queue_admits_by_priority_once_released(kube: Kube, held: str) -> None:
    """scheduler_test.go, "Hold ClusterQueue at startup" and "Hold LocalQueue at startup": "Should admit
    workloads according to their priorities" (the tainted flavor leaves room for two at a time)."""
    cq, q = prod_queue(kube, **{held: "Hold"})
    names = {}
    for label, prio in (("low", 0), ("mid-1", 10), ("mid-2", 10), ("high-1", 100), ("high-2", 100)):
        names[label] = workload(kube, unique(f"wl-{label}"), q, [("main", 1, {"cpu": "2"})], priority=prio)
    until(lambda: all(cond(get(kube, n), "QuotaReserved") for n in names.values()), "all held")
    # ExpectPendingWorkloadsMetric: (0, 5) for a held ClusterQueue, (0, 0) for a held LocalQueue.
    until(
        lambda: cq_status(kube, cq).get("pendingWorkloads") == (5 if held == "cq" else 0), "the pending count"
    )
    assert not any(reserved_in(get(kube, n)) for n in names.values())
    patch = {"spec": {"stopPolicy": "None"}}
    if held == "cq":
        kube.crd.patch_cluster_custom_object(KUEUE, V2, "clusterqueues", cq, patch)
    else:
        kube.crd.patch_namespaced_custom_object(KUEUE, V2, NS, "localqueues", q, patch)
    expect_reserved(kube, cq, names["high-1"], names["high-2"])
    expect_pending(kube, names["mid-1"], names["mid-2"], names["low"])
    finish(kube, names["high-1"], names["high-2"])
    expect_reserved(kube, cq, names["mid-1"], names["mid-2"])
    expect_pending(kube, names["low"])


def test_two_small_workloads_are_admitted_after_a_big_one_finishes(kube: Kube) -> None:
    """scheduler_test.go, "Should admit two small workloads after a big one finishes"."""
    cq, q = prod_queue(kube)
    big, small1, small2 = unique("big-wl"), unique("small-wl-1"), unique("small-wl-2")
    workload(kube, big, q, [("main", 1, {"cpu": "5"})])
    expect_reserved(kube, cq, big)
    workload(kube, small1, q, [("main", 1, {"cpu": "2.5"})])
    workload(kube, small2, q, [("main", 1, {"cpu": "2.5"})])
    expect_pending(kube, small1)
    finish(kube, big)
    expect_reserved(kube, cq, small1, small2)


def test_reclaimed_resources_are_not_accounted_during_admission(kube: Kube) -> None:
    """scheduler_test.go, "Reclaimed resources are not accounted during admission"."""
    cq, q = prod_queue(kube)
    name = unique("first-wl")
    workload(kube, name, q, [("main", 2, {"cpu": "3"})])
    expect_pending(kube, name)
    reclaimable(kube, name, {"main": 1})
    expect_reserved(kube, cq, name)
    assert [a["count"] for a in assignments(get(kube, name))] == [1]


def test_a_zero_request_for_a_resource_not_in_the_cluster_queue_is_admitted(kube: Kube) -> None:
    """scheduler_test.go, "Should admit workload with zero quantity request for resource not in
    ClusterQueue"."""
    spot, on_demand = flavor(kube, unique("spot-untainted")), flavor(kube, unique("on-demand"))
    cq = cluster_queue(kube, unique("dev-clusterqueue"), [(spot, {"cpu": "5"}), (on_demand, {"cpu": "5"})])
    name = workload(
        kube,
        unique("zero-resource-wl"),
        local_queue(kube, unique("dev-queue"), cq),
        [("main", 1, {"cpu": "1", "example.com/gpu": "0"})],
    )
    expect_reserved(kube, cq, name)
    [psa] = assignments(get(kube, name))
    assert (set(psa["flavors"]), set(psa["resourceUsage"])) == ({"cpu"}, {"cpu"})


def test_workloads_are_scheduled_on_tolerated_flavors(kube: Kube) -> None:
    """scheduler_test.go, "Using taints in resourceFlavors": "Should schedule workloads on tolerated
    flavors"."""
    cq, tainted, on_demand = tainted_then_on_demand(kube, "cluster-queue", cohortName="cohort")
    q = local_queue(kube, unique("queue"), cq)
    wl1, wl2, wl3 = (unique(n) for n in ("on-demand-wl1", "on-demand-wl2", "on-demand-wl3"))
    workload(kube, wl1, q, [("main", 1, {"cpu": "5"})])
    expect_reserved(kube, cq, wl1)
    assert assignments(get(kube, wl1))[0]["flavors"] == {"cpu": on_demand}
    workload(kube, wl2, q, [("main", 1, {"cpu": "5"})])
    expect_pending(kube, wl2)
    message = cond(get(kube, wl2), "QuotaReserved")[2]  # type: ignore[index]
    assert f"untolerated taint {INSTANCE}=spot-tainted:NoSchedule in flavor {tainted}" in message
    toleration = {"key": INSTANCE, "operator": "Equal", "value": "spot-tainted", "effect": "NoSchedule"}
    workload(kube, wl3, q, [("main", 1, {"cpu": "5"})], pod={"tolerations": [toleration]})
    expect_reserved(kube, cq, wl3)
    assert assignments(get(kube, wl3))[0]["flavors"] == {"cpu": tainted}
    expect_pending(kube, wl2)


def test_workloads_with_affinity_get_their_flavor(kube: Kube) -> None:
    """scheduler_test.go, "Using affinity in resourceFlavors": "Should admit workloads with affinity to
    specific flavor"."""
    spot, on_demand = flavor(kube, unique("spot-untainted")), flavor(kube, unique("on-demand"))
    cq = cluster_queue(kube, unique("cluster-queue"), [(spot, {"cpu": "5"}), (on_demand, {"cpu": "5"})])
    q = local_queue(kube, unique("queue"), cq)
    plain = workload(kube, unique("no-affinity-workload"), q)
    expect_reserved(kube, cq, plain)
    assert assignments(get(kube, plain))[0]["flavors"] == {"cpu": spot}
    pinned = workload(
        kube, unique("affinity-wl"), q, pod={"nodeSelector": {INSTANCE: on_demand, "foo": "bar"}}
    )
    expect_reserved(kube, cq, pinned)
    assert assignments(get(kube, pinned))[0]["flavors"] == {"cpu": on_demand}


@pytest.mark.parametrize("order", ["RF-LQ-WL-CQ", "WL-RF-LQ-CQ", "WL-RF-CQ-LQ", "WL-CQ-LQ-RF"])
def test_a_workload_is_admitted_whatever_order_its_objects_come_in(kube: Kube, order: str) -> None:
    """scheduler_test.go, "Creating objects out-of-order": "Should admit workload when creating
    ResourceFlavor->LocalQueue->Workload->ClusterQueue" and its three siblings."""
    rf, cq, q, wl = unique("on-demand"), unique("cq"), unique("queue"), unique("workload")
    steps = {
        "RF": lambda: flavor(kube, rf),
        "LQ": lambda: local_queue(kube, q, cq),
        "WL": lambda: workload(kube, wl, q, [("main", 1, {"cpu": "2"})]),
        "CQ": lambda: cluster_queue(kube, cq, [(rf, {"cpu": "5"})]),
    }
    for step in order.split("-"):
        steps[step]()
    expect_reserved(kube, cq, wl)


def test_deleting_a_workload_lets_the_next_in(kube: Kube) -> None:
    """scheduler_test.go, "Handling workloads events": "Should re-enqueue by the delete event of workload
    belonging to the same ClusterQueue"."""
    cq, q = prod_queue(kube)
    wl1, wl2, wl3 = (unique(n) for n in ("on-demand-wl1", "on-demand-wl2", "on-demand-wl3"))
    workload(kube, wl1, q, [("main", 1, {"cpu": "4"})])
    expect_reserved(kube, cq, wl1)
    workload(kube, wl2, q, [("main", 1, {"cpu": "4"})])
    expect_pending(kube, wl2)
    workload(kube, wl3, q, [("main", 1, {"cpu": "1"})])
    expect_reserved(kube, cq, wl3)
    kube.crd.delete_namespaced_custom_object(KUEUE, V2, NS, "workloads", wl1, propagation_policy="Background")
    expect_reserved(kube, cq, wl2)
    assert assignments(get(kube, wl2))[0]["resourceUsage"] == {"cpu": "4"}


def test_a_cluster_queue_update_readmits_a_waiting_workload(kube: Kube) -> None:
    """scheduler_test.go, "Handling clusterQueue events": "Should re-enqueue by the update event of
    ClusterQueue" (the quota raised from 5 to 6 cpu)."""
    cq = cluster_queue(kube, unique("cluster-queue"), [(flavor(kube, unique("on-demand")), {"cpu": "5"})])
    name = workload(
        kube, unique("on-demand-wl"), local_queue(kube, unique("queue"), cq), [("main", 1, {"cpu": "6"})]
    )
    expect_pending(kube, name)
    spec = kube.crd.get_cluster_custom_object(KUEUE, V2, "clusterqueues", cq)["spec"]
    spec["cohortName"] = "cohort"
    spec["resourceGroups"][0]["flavors"][0]["resources"][0] = {
        "name": "cpu",
        "nominalQuota": "6",
        "borrowingLimit": "0",
    }
    kube.crd.patch_cluster_custom_object(KUEUE, V2, "clusterqueues", cq, {"spec": spec})
    expect_reserved(kube, cq, name)


def namespace(kube: Kube, prefix: str, **labels: str) -> str:
    name = unique(prefix)
    client.CoreV1Api(kube.api).create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels=labels))
    )
    return name


_ENG = {"matchExpressions": [{"key": "dep", "operator": "In", "values": ["eng"]}]}


# "Should admit workloads from the selected namespaces" and "Should be inactive until the flavor is
# created" run on both Kueue profiles in test_kueue_reasons.py (kubernetes-sigs/kueue#13063 changed
# their expectations for 0.20).


def _strict_fifo(kube: Kube) -> tuple[str, str]:
    """scheduler_test.go's strict-fifo-cq (5 cpu, namespaces labelled dep=eng) and such a namespace."""
    cq = cluster_queue(
        kube,
        unique("strict-fifo-cq"),
        [(flavor(kube, unique("on-demand")), {"cpu": "5"})],
        queueingStrategy="StrictFIFO",
        namespaceSelector=_ENG,
        cohortName="cohort",
    )
    return cq, namespace(kube, "foo", dep="eng")


def test_strict_fifo_schedules_by_priority_strictly(kube: Kube) -> None:
    """scheduler_test.go, "Queueing with StrictFIFO": "Should schedule workloads by their priority
    strictly": wl3 fits but waits behind wl2, which does not."""
    cq, ns = _strict_fifo(kube)
    q = unique("strict-fifo-q")
    wl1 = workload(kube, "wl1", q, [("main", 1, {"cpu": "2"})], priority=100, ns=ns)
    wl2 = workload(kube, "wl2", q, [("main", 1, {"cpu": "5"})], priority=10, ns=ns)
    wl3 = workload(kube, "wl3", q, [("main", 1, {"cpu": "1"})], priority=1, ns=ns)
    local_queue(kube, q, cq, ns)
    expect_reserved(kube, cq, wl1)
    expect_pending(kube, wl2)
    until(
        lambda: (
            (cq_status(kube, cq).get("pendingWorkloads"), cq_status(kube, cq).get("admittedWorkloads"))
            == (2, 1)
        ),
        "one admitted, two pending",
    )
    assert reserved_in(get(kube, wl3)) is None


def test_strict_fifo_is_not_blocked_by_a_workload_its_selector_refuses(kube: Kube) -> None:
    """scheduler_test.go, "Queueing with StrictFIFO": "Workloads not matching namespaceSelector should not
    block others"."""
    cq, ns = _strict_fifo(kube)
    not_matching, matching = (
        local_queue(kube, unique("not-matching-queue"), cq),
        local_queue(kube, "matching-queue", cq, ns),
    )
    wl1 = workload(kube, "wl1", matching, [("main", 1, {"cpu": "2"})], priority=100, ns=ns)
    wl2 = workload(kube, unique("wl2"), not_matching, [("main", 1, {"cpu": "5"})], priority=10)
    wl3 = workload(kube, "wl3", matching, [("main", 1, {"cpu": "1"})], priority=1, ns=ns)
    expect_reserved(kube, cq, wl1, wl3)
    expect_pending(kube, wl2)


def cq_status(kube: Kube, name: str) -> dict[str, Any]:
    return dict(kube.crd.get_cluster_custom_object(KUEUE, V2, "clusterqueues", name).get("status") or {})


# ---- scheduler/preemption_test.go


def test_lower_priority_workloads_are_preempted_when_quota_runs_out(kube: Kube) -> None:
    """preemption_test.go, "In a single ClusterQueue": "Should preempt Workloads with lower priority when
    there is not enough quota" (LowerOrNewerEqualPriority)."""
    cq, q = _single_cq(kube)
    low1, low2, mid, high1 = (
        workload(kube, unique(n), q, priority=p)
        for n, p in (("low-wl-1", -1), ("low-wl-2", -1), ("mid-wl", 0), ("high-wl-1", 1))
    )
    expect_reserved(kube, cq, low1, low2, mid, high1)
    low3 = workload(kube, unique("low-wl-3"), q, priority=-1)
    expect_pending(kube, low3)
    high2 = workload(kube, unique("high-wl-2"), q, [("main", 1, {"cpu": "2"})], priority=1)
    for victim in (low1, low2):
        until(lambda v=victim: cond(get(kube, v), "Preempted") is not None, f"{victim} preempted")  # type: ignore[misc]
        assert cond(get(kube, victim), "Evicted")[:2] == ("True", "Preempted")  # type: ignore[index]
        unset_reservation(kube, victim)
    expect_reserved(kube, cq, high2)
    expect_pending(kube, low1, low2)
    assert reserved_in(get(kube, mid)) == cq and not is_true(get(kube, mid), "Evicted")


def _single_cq(kube: Kube) -> tuple[str, str]:
    """preemption_test.go's "In a single ClusterQueue": 4 cpu, LowerOrNewerEqualPriority."""
    cq = cluster_queue(
        kube,
        unique("cq"),
        [(flavor(kube, unique("alpha")), {"cpu": "4"})],
        preemption={"withinClusterQueue": "LowerOrNewerEqualPriority"},
    )
    return cq, local_queue(kube, unique("q"), cq)


def test_newer_workloads_of_the_same_priority_are_preempted(kube: Kube) -> None:
    """preemption_test.go, "Should preempt newer Workloads with the same priority when there is not enough
    quota"."""
    cq, q = _single_cq(kube)
    wl1, wl2 = workload(kube, unique("wl-1"), q), workload(kube, unique("wl-2"), q)
    expect_reserved(kube, cq, wl1, wl2)
    wl3 = workload(kube, unique("wl-3"), q, [("main", 1, {"cpu": "3"})])
    expect_pending(kube, wl3)
    created = get(kube, wl3)["metadata"]["creationTimestamp"]
    until(
        lambda: now_rfc3339() > created, "the next second after wl-3's creation"
    )  # WaitForNextSecondAfterCreation
    wl4 = workload(kube, unique("wl-4"), q)
    expect_reserved(kube, cq, wl1, wl2, wl4)
    expect_pending(kube, wl3)
    finish(kube, wl1)
    until(lambda: is_true(get(kube, wl4), "Evicted"), "wl-4 preempted")
    unset_reservation(kube, wl4)
    expect_reserved(kube, cq, wl3)
    expect_pending(kube, wl4)


def test_the_preemption_condition_names_the_job_uid(kube: Kube) -> None:
    """preemption_test.go, "Should include job UID in preemption condition when the label is set"."""
    cq, q = _single_cq(kube)
    low = workload(kube, unique("low"), q, [("main", 1, {"cpu": "4"})], priority=-1)
    expect_reserved(kube, cq, low)
    high = workload(
        kube,
        unique("high"),
        q,
        [("main", 1, {"cpu": "4"})],
        priority=1,
        labels={"kueue.x-k8s.io/job-uid": "job-uid"},
    )
    until(lambda: cond(get(kube, low), "Preempted") is not None, "low preempted")
    uid = get(kube, high)["metadata"]["uid"]
    assert cond(get(kube, low), "Preempted") == (
        "True",
        "InClusterQueue",
        f"Preempted to accommodate a workload (UID: {uid}, JobUID: job-uid) due to "
        f"prioritization in the ClusterQueue; preemptor path: /{cq}; preemptee path: /{cq}",
    )


# ---- controller/jobs/{tfjob,pytorchjob}: the job framework


def _replicas(kind: JobKind) -> dict[str, int]:
    """TFReplicaSpecsDefault / PyTorchReplicaSpecsDefault: one of each replica type."""
    return {"Chief": 1, "PS": 1, "Worker": 1} if kind is TFJOB else {"Master": 1, "Worker": 1}


def _podset_flavors(kind: JobKind, on_demand: str, spot: str) -> dict[str, str]:
    """The podSetsResources upstream's ShouldReconcileJob admits with."""
    if kind is TFJOB:
        return {"chief": on_demand, "ps": spot, "worker": spot}
    return {"master": on_demand, "worker": spot}


def _selectors(kube: Kube, kind: JobKind, name: str) -> dict[str, Any]:
    specs = kube.job(kind, name)["spec"][kind.spec_key]
    return {
        rtype.lower(): (spec["template"].get("spec") or {}).get("nodeSelector")
        for rtype, spec in specs.items()
    }


def _events(kube: Kube, name: str) -> list[tuple[str, str]]:
    found = client.CoreV1Api(kube.api).list_namespaced_event(NS, field_selector=f"involvedObject.name={name}")
    return [(e.reason, e.message) for e in found.items]


@pytest.mark.parametrize("kind", [TFJOB, PYTORCHJOB], ids=["tfjob", "pytorchjob"])
def test_should_reconcile_the_job(kube_all_jobs: Kube, tmp_path: Path, kind: JobKind) -> None:
    """tfjob_controller_test.go "Job controller" / "Should reconcile TFJobs" and
    pytorchjob_controller_test.go "Should reconcile PyTorchJobs" (controller/jobs/kubeflow/kubeflowjob.go
    ShouldReconcileJob), with upstream's manager: manageJobsWithoutQueueName on, waitForPodsReady off. A job
    created unsuspended without a queue name is suspended and gets a Workload without `spec.queueName`,
    its priority from the job's scheduling.k8s.io PriorityClass; the queue label, once set, is followed; a
    second, non-matching Workload is deleted; on admission the job is unsuspended with the flavors' node
    selectors and the Workload has exactly two conditions (QuotaReserved, Admitted: no PodsReady without
    waitForPodsReady); a replica count change stops the job (selectors removed) and replaces its Workload;
    admitted again it runs with the same two conditions; Finished when the job ends, still without
    PodsReady. Adapted: the job's end is real (its replicas exit) instead of a written Succeeded, and the
    second admission waits for the stopped replicas' pods to be gone (upstream runs no pods)."""
    kube = kube_all_jobs
    name, pc = unique(f"{kind.singular}-reconcile"), unique("test-priority-class")
    client.SchedulingV1Api(kube.api).create_priority_class(
        client.V1PriorityClass(metadata=client.V1ObjectMeta(name=pc), value=10)
    )
    job = labelled_job(kind, name, None, wait_then_exit(tmp_path / "go"), replicas=_replicas(kind))
    job["spec"]["runPolicy"] = {"schedulingPolicy": {"priorityClass": pc}, "suspend": False}
    kube.create(job)
    until(lambda: suspended(kube.job(kind, name)), "the job suspended")
    wl = kube.wait_workload(kind, name, lambda w: True, "created")
    wl_name = wl["metadata"]["name"]
    assert "queueName" not in wl["spec"], "the Workload shouldn't have .spec.queueName set"
    assert wl["spec"]["priorityClassRef"] == {
        "group": "scheduling.k8s.io",
        "kind": "PriorityClass",
        "name": pc,
    }
    assert wl["spec"]["priority"] == 10

    kube.crd.patch_namespaced_custom_object(
        "kubeflow.org",
        "v1",
        NS,
        kind.plural,
        name,
        {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "test-queue"}}},
    )
    kube.wait_workload(kind, name, lambda w: w["spec"].get("queueName") == "test-queue", "the new queue name")

    second_name = unique(f"{kind.kind.lower()}-second-workload")
    second: dict[str, Any] = {
        "apiVersion": f"{KUEUE}/{V2}",
        "kind": "Workload",
        "metadata": {
            "name": second_name,
            "ownerReferences": [{**wl["metadata"]["ownerReferences"][0]}],
        },
        "spec": {
            **wl["spec"],
            "podSets": [{**wl["spec"]["podSets"][0], "count": 2}, *wl["spec"]["podSets"][1:]],
        },
    }
    kube.crd.create_namespaced_custom_object(KUEUE, V2, NS, "workloads", second)

    def gone(wl_name: str) -> bool:
        try:
            get(kube, wl_name)
        except client.ApiException as exc:
            return exc.status == 404
        return False

    until(lambda: gone(second_name), "the second Workload deleted")
    assert get(kube, wl_name)["metadata"]["uid"] == wl["metadata"]["uid"]

    on_demand, spot = flavor(kube, unique("on-demand")), flavor(kube, unique("spot"))
    wanted = _podset_flavors(kind, on_demand, spot)

    def condition_types() -> list[str]:
        return [c["type"] for c in get(kube, wl_name)["status"]["conditions"]]

    set_reservation(kube, wl_name, "cluster-queue", wanted)
    until(lambda: not suspended(kube.job(kind, name)), "the job unsuspended")
    until(lambda: ("Started", "Admitted by clusterQueue cluster-queue") in _events(kube, name), "Started")
    assert _selectors(kube, kind, name) == {p: {INSTANCE: f} for p, f in wanted.items()}
    until(lambda: is_true(kube.job(kind, name), "Running"), "the job running")
    assert condition_types() == ["QuotaReserved", "Admitted"]

    def two_workers() -> None:
        changed = kube.job(kind, name)
        changed["spec"][kind.spec_key]["Worker"]["replicas"] = 2
        kube.crd.replace_namespaced_custom_object("kubeflow.org", "v1", NS, kind.plural, name, changed)

    written(two_workers, "two workers")
    until(
        lambda: suspended(kube.job(kind, name)) and not _selectors(kube, kind, name)["worker"],
        "the job stopped, the selectors removed",
    )
    until(
        lambda: ("DeletedWorkload", f"Deleted not matching Workload: {NS}/{wl_name}") in _events(kube, name),
        "DeletedWorkload",
    )
    fresh = kube.wait_workload(kind, name, lambda w: w["spec"]["podSets"][-1]["count"] == 2, "the new count")
    assert fresh["metadata"]["name"] == wl_name and "admission" not in (fresh.get("status") or {})

    until(lambda: not kube.pods(name), "the stopped replicas' pods gone")
    set_reservation(kube, wl_name, "cluster-queue", wanted)
    until(lambda: not suspended(kube.job(kind, name)), "the job unsuspended again")
    assert _selectors(kube, kind, name) == {p: {INSTANCE: f} for p, f in wanted.items()}
    until(lambda: is_true(kube.job(kind, name), "Running"), "the job running again")
    assert condition_types() == ["QuotaReserved", "Admitted"]
    (tmp_path / "go").touch()
    done = kube.wait_workload(kind, name, lambda w: is_true(w, "Finished"), "finished")
    assert len(done["status"]["conditions"]) > 2 and cond(done, "PodsReady") is None
    finished = cond(done, "Finished")
    assert finished is not None and finished[1] == "Succeeded"


@pytest.mark.parametrize("kind", [TFJOB, PYTORCHJOB], ids=["tfjob", "pytorchjob"])
def test_a_job_in_an_unmanaged_namespace_is_left_alone(kube_all_jobs: Kube, kind: JobKind) -> None:
    """tfjob_controller_test.go / pytorchjob_controller_test.go, "Should not manage a job without a
    queue-name submitted to an unmanaged namespace" (ShouldNotReconcileUnmanagedJob): with
    manageJobsWithoutQueueName on, an unsuspended job without a queue name in `unmanaged-ns`, which the
    managedJobsNamespaceSelector excludes, stays unsuspended (it runs to the end) and gets no Workload."""
    kube = kube_all_jobs
    name = unique(f"{kind.singular}-unmanaged")
    job = labelled_job(kind, name, None, "pass", replicas=_replicas(kind), suspend=False)
    job["metadata"]["namespace"] = UNMANAGED_NS
    created = kube.crd.create_namespaced_custom_object("kubeflow.org", "v1", UNMANAGED_NS, kind.plural, job)
    assert not suspended(created)

    def ran() -> bool:
        got = kube.crd.get_namespaced_custom_object("kubeflow.org", "v1", UNMANAGED_NS, kind.plural, name)
        return not suspended(got) and is_true(got, "Succeeded")

    until(ran, "the job to run to the end, never suspended")
    found = kube.crd.list_namespaced_custom_object(KUEUE, V2, UNMANAGED_NS, "workloads")["items"]
    assert found == []


def test_a_job_gets_a_workload_only_once_it_names_a_queue(kube: Kube, tmp_path: Path) -> None:
    """pytorchjob_controller_test.go, "Job controller for workloads when only jobs with queue are
    managed": "Should reconcile jobs only when queue is set"."""
    name = unique("pytorchjob-queue-later")
    kube.create(
        labelled_job(PYTORCHJOB, name, None, wait_then_exit(tmp_path / "go"), replicas=_replicas(PYTORCHJOB))
    )
    until(lambda: is_true(kube.job(PYTORCHJOB, name), "Running"), "the job to run unmanaged")
    assert kube.workload(PYTORCHJOB, name) is None and not suspended(kube.job(PYTORCHJOB, name))
    kube.crd.patch_namespaced_custom_object(
        "kubeflow.org",
        "v1",
        NS,
        PYTORCHJOB.plural,
        name,
        {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "test-queue"}}},
    )
    kube.wait_workload(PYTORCHJOB, name, lambda w: True, "created once the queue is named")
    (tmp_path / "go").touch()


def test_jobs_are_scheduled_as_they_fit_in_their_cluster_queue(kube: Kube, tmp_path: Path) -> None:
    """tfjob_controller_test.go, "Job controller interacting with scheduler": "Should schedule jobs as they
    fit in their ClusterQueue": chief and PS on the first flavor, the worker, which no longer fits there,
    on the second."""
    spot, on_demand = flavor(kube, unique("spot-untainted")), flavor(kube, unique("on-demand"))
    cq = cluster_queue(kube, unique("dev-clusterqueue"), [(spot, {"cpu": "8"}), (on_demand, {"cpu": "5"})])
    q = local_queue(kube, unique("local-queue"), cq)
    name = unique("tfjob-fits")
    job = labelled_job(TFJOB, name, q, wait_then_exit(tmp_path / "go"), replicas=_replicas(TFJOB))
    for rtype, cpu in (("Chief", "3"), ("PS", "4"), ("Worker", "4")):
        job["spec"]["tfReplicaSpecs"][rtype]["template"]["spec"]["containers"][0]["resources"]["requests"][
            "cpu"
        ] = cpu
    kube.create(job)
    until(lambda: not suspended(kube.job(TFJOB, name)), "the job to start")
    assert _selectors(kube, TFJOB, name) == {
        "chief": {INSTANCE: spot},
        "ps": {INSTANCE: spot},
        "worker": {INSTANCE: on_demand},
    }
    (tmp_path / "go").touch()
    kube.wait_workload(TFJOB, name, lambda w: is_true(w, "Finished"), "finished")


@pytest.mark.parametrize("kind", [TFJOB, PYTORCHJOB], ids=["tfjob", "pytorchjob"])
def test_pods_ready_follows_the_job_through_start_and_suspension(
    kube_ready: Kube, tmp_path: Path, kind: JobKind
) -> None:
    """tfjob_controller_test.go / pytorchjob_controller_test.go, "Job controller when waitForPodsReady
    enabled", "Single job at different stages of progress towards completion": the entries "No progress",
    "Running TFJob; PodsReady=False before" (which contains "Running TFJob") and "Job suspended;
    PodsReady=True before", in one job's life: its replicas' init containers hold it before Running."""
    kube = kube_ready
    name = unique(f"{kind.singular}-ready")
    job = labelled_job(kind, name, "test-queue", wait_then_exit(tmp_path / "go"), replicas=_replicas(kind))
    for spec in job["spec"][kind.spec_key].values():
        spec["template"]["spec"]["initContainers"] = [
            {
                "name": "hold",
                "image": "python:3.11",
                "command": [sys.executable, "-c", wait_then_exit(tmp_path / "ready")],
            }
        ]
    kube.create(job)
    wl_name = kube.wait_workload(kind, name, lambda w: True, "created")["metadata"]["name"]
    set_reservation(kube, wl_name, "foo", {ps: "default" for ps in _podset_flavors(kind, "", "")})
    until(lambda: not suspended(kube.job(kind, name)), "the job unsuspended")
    waiting = ("False", "WaitForStart", "Not all pods are ready or succeeded")
    until(lambda: cond(get(kube, wl_name), "PodsReady") == waiting, "PodsReady False/WaitForStart")
    (tmp_path / "ready").touch()
    started = ("True", "Started", "All pods reached readiness and the workload is running")
    until(lambda: cond(get(kube, wl_name), "PodsReady") == started, "PodsReady True/Started")
    unset_reservation(kube, wl_name)
    until(lambda: suspended(kube.job(kind, name)), "the job suspended")
    until(lambda: cond(get(kube, wl_name), "PodsReady") == waiting, "PodsReady back to False/WaitForStart")


def test_without_wait_for_pods_ready_there_is_no_pods_ready_condition(kube: Kube, tmp_path: Path) -> None:
    """The "Job controller" suites' managers have no waitForPodsReady: an admitted, running job's Workload
    carries QuotaReserved and Admitted only (ShouldReconcileJob's `HaveLen(2)`)."""
    q = local_queue(
        kube, unique("lq"), cluster_queue(kube, unique("cq"), [(flavor(kube, unique("f")), {"cpu": "1"})])
    )
    name = unique("tfjob-no-podsready")
    kube.create(labelled_job(TFJOB, name, q, wait_then_exit(tmp_path / "go")))
    until(lambda: is_true(kube.job(TFJOB, name), "Running"), "the job to run")
    wl = kube.workload(TFJOB, name)
    assert wl is not None and admitted(wl) and cond(wl, "PodsReady") is None
    (tmp_path / "go").touch()


# ---- test/e2e/singlecluster/baseline/visibility_test.go (batch Jobs there; standalone Workloads here)


def _blocked_queue(kube: Kube) -> str:
    """Upstream's "There are pending workloads due to capacity maxed by the admitted job": 1 cpu, taken."""
    cq = cluster_queue(kube, unique("cluster-queue"), [(flavor(kube, unique("default")), {"cpu": "1"})])
    blocker = workload(kube, unique("test-job-1"), local_queue(kube, unique("a"), cq), priority=100)
    expect_reserved(kube, cq, blocker)
    return cq


def _positions(items: list[dict[str, Any]]) -> list[tuple[str, int, str, int, int]]:
    return [
        (
            i["metadata"]["namespace"],
            i["priority"],
            i["localQueueName"],
            i["positionInLocalQueue"],
            i["positionInClusterQueue"],
        )
        for i in items
    ]


def test_visibility_positions_across_local_queues(kube: Kube) -> None:
    """visibility_test.go, "Should allow fetching information about position of pending workloads in
    ClusterQueue"."""
    cq = _blocked_queue(kube)
    lq_a, lq_b = local_queue(kube, unique("a"), cq), local_queue(kube, unique("b"), cq)
    for name, prio, lq in (
        ("lq-a-high-prio", 100, lq_a),
        ("lq-b-mid-prio", 75, lq_b),
        ("lq-b-low-prio", 50, lq_b),
    ):
        workload(kube, unique(name), lq, [("main", 1, {"cpu": "2"})], priority=prio)
    want = [(NS, 100, lq_a, 0, 0), (NS, 75, lq_b, 0, 1), (NS, 50, lq_b, 1, 2)]
    until(
        lambda: (
            _positions(kube.visibility(f"clusterqueues/{cq}/pendingworkloads", "v1beta2")["items"]) == want
        ),
        "the pending workloads in order",
    )


def test_visibility_of_same_named_local_queues_in_two_namespaces(kube: Kube) -> None:
    """visibility_test.go, "Should fetch information about the position of pending workloads with the same
    localQueue name in different namespaces"."""
    cq = _blocked_queue(kube)
    ns_a, ns_b = namespace(kube, "a"), namespace(kube, "b")
    for ns, prio in ((ns_a, 75), (ns_b, 50)):
        local_queue(kube, "local-queue", cq, ns)
        workload(kube, "job", "local-queue", [("main", 1, {"cpu": "2"})], priority=prio, ns=ns)
    for ns, prio, position in ((ns_a, 75, 0), (ns_b, 50, 1)):
        until(
            lambda ns=ns, prio=prio, position=position: (
                _positions(  # type: ignore[misc]
                    kube.visibility(f"namespaces/{ns}/localqueues/local-queue/pendingworkloads", "v1beta2")[
                        "items"
                    ]
                )
                == [(ns, prio, "local-queue", 0, position)]
            ),
            f"the pending workload of {ns}",
        )


# ---- scheduler/scheduler_nodetaints_test.go and scheduler_rf_spec_fields_test.go


@pytest.mark.parametrize("second_cpu", ["500m", "1"], ids=["differently-shaped", "identically-shaped"])
@pytest.mark.parametrize("change", ["remove-taints", "tolerate-own-taint"])
def test_a_flavor_change_retries_the_workloads_its_taint_kept_out(
    kube: Kube, change: str, second_cpu: str
) -> None:
    """scheduler_nodetaints_test.go, "should retry pending workloads after nodeTaints are removed", and
    scheduler_rf_spec_fields_test.go, "should retry pending workloads after the flavor tolerates its own
    taint": both entries, "with a differently-shaped new workload" and "... identically-shaped ...", each."""
    taint = {"key": "example.com/dedicated", "value": "reserved", "effect": "NoSchedule"}
    name = unique("tainted-flavor")
    flavor(kube, name, spec={"nodeTaints": [taint]})
    cq = cluster_queue(kube, unique("cluster-queue"), [(name, {"cpu": "5"})])
    q = local_queue(kube, unique("local-queue"), cq)
    wl1 = workload(kube, unique("wl1"), q)
    expect_pending(kube, wl1)
    spec = kube.crd.get_cluster_custom_object(KUEUE, V2, "resourceflavors", name)["spec"]
    if change == "remove-taints":
        spec.pop("nodeTaints")
    else:
        spec["tolerations"] = [{**taint, "operator": "Equal"}]
    flavor_obj = kube.crd.get_cluster_custom_object(KUEUE, V2, "resourceflavors", name)
    kube.crd.replace_cluster_custom_object(KUEUE, V2, "resourceflavors", name, {**flavor_obj, "spec": spec})
    wl2 = workload(kube, unique("wl2"), q, [("main", 1, {"cpu": second_cpu})])
    expect_reserved(kube, cq, wl1, wl2)


def test_workloads_are_admitted_as_they_fit(kube: Kube) -> None:
    """scheduler_test.go, "Should admit workloads as they fit in their ClusterQueue" (its dev-clusterqueue
    part with a queue of its own): a Workload of zero pods is admitted with zero usage."""
    cq, q = prod_queue(kube)
    spot, on_demand = flavor(kube, unique("spot-untainted")), flavor(kube, unique("on-demand"))
    dev_cq = cluster_queue(
        kube, unique("dev-clusterqueue"), [(spot, {"cpu": "5"}), (on_demand, {"cpu": "5"})]
    )
    prod1 = workload(kube, unique("prod-wl1"), q, [("main", 1, {"cpu": "2"})])
    expect_reserved(kube, cq, prod1)
    prod2 = workload(kube, unique("prod-wl2"), q, [("main", 1, {"cpu": "5"})])
    expect_pending(kube, prod2)
    empty = workload(kube, unique("empty-wl"), q, [("main", 0, {"cpu": "1"})])
    expect_reserved(kube, cq, empty)
    [psa] = assignments(get(kube, empty))
    assert (psa["resourceUsage"], psa["count"]) == ({"cpu": "0"}, 0)
    finish(kube, empty)
    dev = workload(
        kube, unique("dev-wl"), local_queue(kube, unique("dev-queue"), dev_cq), [("main", 1, {"cpu": "5"})]
    )
    expect_reserved(kube, dev_cq, dev)
    assert assignments(get(kube, dev))[0]["flavors"] == {"cpu": spot}
    finish(kube, prod1)
    expect_reserved(kube, cq, prod2)
    assert assignments(get(kube, prod2))[0]["resourceUsage"] == {"cpu": "5"}


def test_removing_the_admission_restores_the_original_node_selectors(kube: Kube, tmp_path: Path) -> None:
    """pytorchjob_controller_test.go, "The workload's admission is removed": "Should restore the original
    node selectors"."""
    spot, on_demand = flavor(kube, unique("spot-untainted")), flavor(kube, unique("on-demand"))
    cq = cluster_queue(kube, unique("dev-clusterqueue"), [(spot, {"cpu": "8"}), (on_demand, {"cpu": "5"})])
    lq, name = unique("local-queue"), unique("pytorchjob-restore")
    job = labelled_job(PYTORCHJOB, name, lq, wait_then_exit(tmp_path / "go"), replicas=_replicas(PYTORCHJOB))
    for rtype, cpu in (("Master", "3"), ("Worker", "4")):
        job["spec"]["pytorchReplicaSpecs"][rtype]["template"]["spec"]["containers"][0]["resources"][
            "requests"
        ]["cpu"] = cpu
    kube.create(job)
    until(lambda: suspended(kube.job(PYTORCHJOB, name)), "the job suspended")
    original = _selectors(kube, PYTORCHJOB, name)
    local_queue(kube, lq, cq)
    until(lambda: not suspended(kube.job(PYTORCHJOB, name)), "the job unsuspended")
    assert _selectors(kube, PYTORCHJOB, name) != original
    kube.crd.delete_namespaced_custom_object(KUEUE, V2, NS, "localqueues", lq)
    unset_reservation(kube, kube.wait_workload(PYTORCHJOB, name, admitted, "admitted")["metadata"]["name"])
    until(lambda: _selectors(kube, PYTORCHJOB, name) == original, "the node selectors restored")
    (tmp_path / "go").touch()
