"""The reasons a pending Workload's QuotaReserved=False carries, on each Kueue profile, over real HTTP with
the official client (local/kueue/reasons.py): Kueue 0.19's default gates write the fallbacks
(``Inadmissible`` for a missing or stopped queue, ``Pending`` for the scheduler's verdicts), Kueue 0.20
(UnadmittedWorkloadsObservability on by default, kubernetes-sigs/kueue#13063) the granular reason of each
case; the messages are the same on both (read at kueue main ff69552e79: workload_controller.go
getQueueBlocker, scheduler.go nominate/schedule/requeueAndUpdate, flavorassigner.go fitsResourceQuota)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
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
