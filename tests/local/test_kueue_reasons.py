"""The reasons a pending Workload's QuotaReserved=False carries, on each Kueue profile, over real HTTP with
the official client (local/kueue/reasons.py): Kueue 0.19's default gates write the fallbacks
(``Inadmissible`` for a missing or stopped queue, ``Pending`` for the scheduler's verdicts), Kueue 0.20
(UnadmittedWorkloadsObservability on by default, kubernetes-sigs/kueue#13063) the granular reason of each
case; the messages are the same on both (read at kueue main ff69552e79: workload_controller.go
getQueueBlocker, scheduler.go nominate/schedule/requeueAndUpdate, flavorassigner.go fitsResourceQuota).
Below them, the upstream cases kubernetes-sigs/kueue#13063 changed, ported on both profiles."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import test_kueue_upstream as upstream
from kubernetes import client
from kueue_support import KUEUE, NS, V2, Kube, admitted, cond, is_true, labelled_job, wait_then_exit
from waiting import until

from airflow_tfjob.jobs.kinds import TFJOB
from airflow_tfjob.local import LocalCluster
from airflow_tfjob.local.kueue import KUBEFLOW_V1

OLD, NEW = "kueue=0.19", "kueue=0.20"


@pytest.fixture(scope="module", params=[OLD, NEW])
def kube(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kube]:
    with LocalCluster(workdir=tmp_path_factory.mktemp("kueue-reasons"), profile=request.param,
                      kueue={"integrations": KUBEFLOW_V1}) as cluster:
        yield Kube.on(cluster)


def new(kube: Kube) -> bool:
    return kube.cluster.runtime.profile.name.startswith(NEW)


def reason_is(reason: str) -> Callable[[dict[str, Any]], bool]:
    def check(wl: dict[str, Any]) -> bool:
        found = cond(wl, "QuotaReserved")
        return found is not None and found[:2] == ("False", reason)
    return check


def warnings(kube: Kube, name: str) -> list[tuple[str, str]]:
    events = client.CoreV1Api(kube.api).list_namespaced_event(NS).items
    return [(e.reason, e.message) for e in events
            if e.involved_object.kind == "Workload" and e.involved_object.name == name and e.type == "Warning"]


def test_a_missing_local_queue_is_misconfigured_on_0_20(kube: Kube, tmp_path: Path) -> None:
    kube.create(labelled_job(TFJOB, "lost", "no-such-queue", wait_then_exit(tmp_path / "go")))
    reason = "Misconfigured" if new(kube) else "Inadmissible"
    wl = kube.wait_workload(TFJOB, "lost", reason_is(reason), reason)
    assert cond(wl, "QuotaReserved") == ("False", reason, "LocalQueue no-such-queue doesn't exist")


def test_a_stopped_local_queue_is_suspended_on_0_20(kube: Kube, tmp_path: Path) -> None:
    q = kube.queue("q-held", {"cpu": 1})
    kube.crd.patch_namespaced_custom_object(KUEUE, V2, NS, "localqueues", q, {"spec": {"stopPolicy": "Hold"}})
    kube.create(labelled_job(TFJOB, "held", q, wait_then_exit(tmp_path / "go")))
    reason = "Suspended" if new(kube) else "Inadmissible"
    wl = kube.wait_workload(TFJOB, "held", reason_is(reason), reason)
    assert cond(wl, "QuotaReserved") == ("False", reason, f"LocalQueue {q} is inactive")


def test_a_request_above_the_quota_exceeds_max_quota_on_0_20(kube: Kube, tmp_path: Path) -> None:
    q = kube.queue("q-small", {"cpu": 1})
    kube.create(labelled_job(TFJOB, "big", q, wait_then_exit(tmp_path / "go"), cpu="2"))
    reason = "ExceedsMaxQuota" if new(kube) else "Pending"
    wl = kube.wait_workload(TFJOB, "big", reason_is(reason), reason)
    message = ("couldn't assign flavors to pod set worker: insufficient quota for cpu in flavor q-small-flavor, "
               "previously considered podsets requests (0) + current podset request (2) > maximum capacity (1)")
    assert cond(wl, "QuotaReserved") == ("False", reason, message)
    # requeueAndUpdate's Warning event carries the condition's reason.
    until(lambda: (reason, message) in warnings(kube, wl["metadata"]["name"]), f"the {reason} event")


def test_a_resource_the_queue_does_not_cover_has_no_matching_flavor_on_0_20(kube: Kube, tmp_path: Path) -> None:
    q = kube.queue("q-memory", {"memory": "1Gi"})
    kube.create(labelled_job(TFJOB, "cpu-only", q, wait_then_exit(tmp_path / "go")))
    reason = "NoMatchingFlavor" if new(kube) else "Pending"
    wl = kube.wait_workload(TFJOB, "cpu-only", reason_is(reason), reason)
    assert cond(wl, "QuotaReserved") == (
        "False", reason, "couldn't assign flavors to pod set worker: resource cpu unavailable in ClusterQueue")


def test_a_job_behind_another_waits_for_quota_on_0_20_and_is_admitted_after(kube: Kube, tmp_path: Path) -> None:
    q = kube.queue("q-one", {"cpu": 1})
    kube.create(labelled_job(TFJOB, "first", q, wait_then_exit(tmp_path / "first")))
    kube.wait_workload(TFJOB, "first", admitted, "admitted")
    kube.create(labelled_job(TFJOB, "second", q, wait_then_exit(tmp_path / "second")))
    reason = "WaitingForQuota" if new(kube) else "Pending"
    wl = kube.wait_workload(TFJOB, "second", reason_is(reason), reason)
    assert cond(wl, "QuotaReserved") == ("False", reason, "couldn't assign flavors to pod set worker: "
                                         "insufficient unused quota for cpu in flavor q-one-flavor, 1 more needed")
    (tmp_path / "first").touch()
    kube.wait_workload(TFJOB, "second", admitted, "admitted once the quota is free")
    (tmp_path / "second").touch()
    kube.wait_workload(TFJOB, "second", lambda w: is_true(w, "Finished"), "finished")


# ---- kubernetes-sigs/kueue#13063's changed cases, ported
# #13063 (24698d2c36, in main before v0.20.0) turned UnadmittedWorkloadsObservability on by default and
# rewrote the expectations of the integration tests under test/integration/singlecluster/ that read a
# pending Workload's conditions; each case below names its file and case, and runs on both profiles: the
# v0.19.2 expectation (the gate off) and main's at ff69552e79 (on). Standalone Workloads, as upstream
# creates them (test_kueue_upstream.py's builders).


def admitted_condition(wl: dict[str, Any]) -> tuple[str, ...] | None:
    return cond(wl, "Admitted")


@pytest.mark.parametrize("blocked", ["no queue name", "no local queue", "no cluster queue"])
def test_workload_controller_update_status_when_workloads_are_created(kube: Kube, blocked: str) -> None:
    """workload_controller_test.go, "Workload controller": When "the queue is not defined in the workload",
    "the queue doesn't exist" and "the clusterqueue doesn't exist", each "Should update status when
    workloads are created": QuotaReserved=False Misconfigured (Inadmissible on 0.19) with the queue's
    message; on 0.20 also Admitted=False NoReservation (SyncAdmittedCondition with the gate on), on 0.19
    that one condition only."""
    queue, message = {
        "no queue name": ("", "LocalQueue  doesn't exist"),
        "no local queue": ("non-created-queue", "LocalQueue non-created-queue doesn't exist"),
        "no cluster queue": (upstream.unique("queue"), "ClusterQueue fooclusterqueue doesn't exist"),
    }[blocked]
    if blocked == "no cluster queue":
        upstream.local_queue(kube, queue, "fooclusterqueue")
    name = upstream.workload(kube, upstream.unique("wl"), queue)
    reason = "Misconfigured" if new(kube) else "Inadmissible"
    until(lambda: reason_is(reason)(upstream.get(kube, name)), f"{name} {reason}")
    wl = upstream.get(kube, name)
    assert cond(wl, "QuotaReserved") == ("False", reason, message)
    if new(kube):
        assert admitted_condition(wl) == ("False", "NoReservation", "The workload has no reservation")
    else:
        assert [c["type"] for c in wl["status"]["conditions"]] == ["QuotaReserved"]


def test_scheduler_admits_workloads_from_the_selected_namespaces(kube: Kube) -> None:
    """scheduler_test.go, "Using clusterQueue NamespaceSelector", "Should admit workloads from the selected
    namespaces": a Workload of a namespace the selector refuses is inadmissible (ExpectWorkloadsToBePending
    there on v0.19.2: the scheduler's Pending; ExpectWorkloadsToBeInadmissible after #13063: Misconfigured),
    and admitted once its namespace is labelled; the other namespace's stays so. Moved here from
    test_kueue_upstream.py, which ran it on 0.19 only."""
    selector = {"matchExpressions": [{"key": "dep", "operator": "In", "values": ["eng"]}]}
    cq = upstream.cluster_queue(kube, upstream.unique("cq-selector"),
                                [(upstream.flavor(kube, upstream.unique("on-demand")), {"cpu": "5"})],
                                namespaceSelector=selector)
    ns, ns_foo = upstream.namespace(kube, "core"), upstream.namespace(kube, "foo")
    name = upstream.workload(kube, "wl1", upstream.local_queue(kube, "queue", cq, ns), ns=ns)
    other = upstream.workload(kube, "wl2", upstream.local_queue(kube, "foo", cq, ns_foo), ns=ns_foo)
    reason = "Misconfigured" if new(kube) else "Pending"
    refused = ("False", reason, "workload namespace doesn't match ClusterQueue selector")
    for ref in (name, other):
        until(lambda r=ref: cond(upstream.get(kube, r), "QuotaReserved") == refused,  # type: ignore[misc]
              f"{ref} {reason}")
    client.CoreV1Api(kube.api).patch_namespace(ns, {"metadata": {"labels": {"dep": "eng"}}})
    upstream.expect_reserved(kube, cq, name)
    assert cond(upstream.get(kube, other), "QuotaReserved") == refused


def test_scheduler_a_cluster_queue_is_inactive_until_its_flavor_exists(kube: Kube) -> None:
    """scheduler_test.go, "Referencing resourceFlavors in clusterQueue", "Should be inactive until the flavor
    is created": the Workload frozen (util.ExpectWorkloadsToBeFrozen: Inadmissible on v0.19.2, Suspended too
    after #13063) with "ClusterQueue ... is inactive", then admitted once the flavor exists. Moved here
    from test_kueue_upstream.py, which ran it on 0.19 only."""
    missing = upstream.unique("foo-flavor")
    cq = upstream.cluster_queue(kube, upstream.unique("foo-cq"), [(missing, {"cpu": "15"})],
                                queueingStrategy="BestEffortFIFO")
    name = upstream.workload(kube, upstream.unique("workload"),
                             upstream.local_queue(kube, upstream.unique("foo-queue"), cq))
    reason = "Suspended" if new(kube) else "Inadmissible"
    until(lambda: cond(upstream.get(kube, name), "QuotaReserved") == ("False", reason, f"ClusterQueue {cq} is inactive"),
          f"{name} frozen")
    upstream.flavor(kube, missing, spec={})
    upstream.expect_reserved(kube, cq, name)
    assert admitted_condition(upstream.get(kube, name)) == ("True", "Admitted", "The workload is admitted")


def test_scheduler_a_workload_behind_another_waits_for_quota(kube: Kube) -> None:
    """job_controller_test.go, "Interacting with scheduler", the step "checking that the third workload is
    not admitted" of its priority-change cases ("running workload priority is decreased ..."), as #13063
    rewrote it: a Workload that does not fit beside the admitted ones is QuotaReserved=False
    WaitingForQuota (Pending on v0.19.2), then admitted when one of them finishes. The step only: the
    priority changes and preemptions around it are test_kueue_upstream.py's."""
    cq = upstream.cluster_queue(kube, upstream.unique("cq-wait"),
                                [(upstream.flavor(kube, upstream.unique("on-demand")), {"cpu": "2"})])
    q = upstream.local_queue(kube, upstream.unique("q-wait"), cq)
    first, second = (upstream.workload(kube, upstream.unique(n), q, [("main", 1, {"cpu": "1"})]) for n in ("a", "b"))
    upstream.expect_reserved(kube, cq, first, second)
    third = upstream.workload(kube, upstream.unique("c"), q, [("main", 1, {"cpu": "1"})])
    reason = "WaitingForQuota" if new(kube) else "Pending"
    until(lambda: reason_is(reason)(upstream.get(kube, third)), f"{third} {reason}")
    flavor = upstream.get(kube, first)["status"]["admission"]["podSetAssignments"][0]["flavors"]["cpu"]
    assert cond(upstream.get(kube, third), "QuotaReserved") == (
        "False", reason, f"couldn't assign flavors to pod set main: insufficient unused quota for cpu in flavor "
        f"{flavor}, 1 more needed")
    upstream.finish(kube, first)
    upstream.expect_reserved(kube, cq, third)
