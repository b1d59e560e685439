"""Kueue v0.19.2's own tests of its TrainJob integration, replayed black-box against the local cluster
(Kueue with its default integrations, Trainer v2 and JobSet; the "Trainjob controller" cases on a cluster
configured as upstream's manager there, manageJobsWithoutQueueName on and `unmanaged-ns` left out) through
the official client only.

Ported from kubernetes-sigs/kueue v0.19.2:
- test/integration/singlecluster/controller/jobs/trainjob/trainjob_controller_test.go (CONTROLLER)
- test/integration/singlecluster/webhook/jobs/trainjob_webhook_test.go (WEBHOOK)

Upstream drives a manager without a scheduler in some cases and writes the Workload's admission or the
TrainJob's status itself; here Kueue's scheduler and Trainer's controllers run, so those steps are
produced by the cluster (quota that fits, replicas that really start and stop) and the same outcomes are
checked. The cases table with what is not reproduced is in docs/reference/kueue-behaviour.md, "Kueue's
TrainJob tests, ported"."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from waiting import until, written

from airflow_tfjob.local import LocalCluster

G, V = "trainer.kubeflow.org", "v1alpha1"
KUEUE, KV = "kueue.x-k8s.io", "v1beta2"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
MANAGER = "kueue.x-k8s.io/manager"
INSTANCE = "cloud.provider.com/instance"
ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"
_names = itertools.count()


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[client.ApiClient]:
    with LocalCluster(
        workdir=tmp_path_factory.mktemp("kueue-trainjob"), apis=["trainjob"], kueue=True
    ) as cluster:
        yield config.new_client_from_config(str(cluster.kubeconfig_path))


UNMANAGED_NS = "unmanaged-ns"


@pytest.fixture(scope="module")
def api_all_jobs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[client.ApiClient]:
    """The manager of CONTROLLER's "Trainjob controller" (its "basic setup" cases):
    WithManageJobsWithoutQueueName(true) and WithManagedJobsNamespaceSelector(NewNamespaceSelectorExcluding
    ("unmanaged-ns")), the namespace `unmanaged-ns` created."""
    selector = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                                      "values": [UNMANAGED_NS]}]}
    with LocalCluster(
        workdir=tmp_path_factory.mktemp("kueue-trainjob-all-jobs"),
        apis=["trainjob"],
        kueue={"manage_jobs_without_queue_name": True, "managed_jobs_namespace_selector": selector},
    ) as cluster:
        api = config.new_client_from_config(str(cluster.kubeconfig_path))
        client.CoreV1Api(api).create_namespace({"metadata": {"name": UNMANAGED_NS}})
        yield api


def crd(api: client.ApiClient) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api)


def namespace(api: client.ApiClient) -> str:
    """util.CreateNamespaceFromPrefixWithLog("trainjob-")."""
    name = f"trainjob-{next(_names)}"
    client.CoreV1Api(api).create_namespace({"metadata": {"name": name}})
    return name


def flavor(api: client.ApiClient, name: str) -> None:
    """MakeResourceFlavor(name).NodeLabel(instanceKey, name)."""
    crd(api).create_cluster_custom_object(
        KUEUE,
        KV,
        "resourceflavors",
        {
            "apiVersion": f"{KUEUE}/{KV}",
            "kind": "ResourceFlavor",
            "metadata": {"name": name},
            "spec": {"nodeLabels": {INSTANCE: name}},
        },
    )


def queues(api: client.ApiClient, ns: str, cq: str, quotas: list[tuple[str, str]]) -> str:
    """A ClusterQueue with one resource group of cpu over the flavors (name, quota) in order, and the
    LocalQueue `local-queue` in `ns` pointing at it."""
    crd(api).create_cluster_custom_object(
        KUEUE,
        KV,
        "clusterqueues",
        {
            "apiVersion": f"{KUEUE}/{KV}",
            "kind": "ClusterQueue",
            "metadata": {"name": cq},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": ["cpu"],
                        "flavors": [
                            {"name": f, "resources": [{"name": "cpu", "nominalQuota": q}]} for f, q in quotas
                        ],
                    }
                ],
            },
        },
    )
    crd(api).create_namespaced_custom_object(
        KUEUE,
        KV,
        ns,
        "localqueues",
        {
            "apiVersion": f"{KUEUE}/{KV}",
            "kind": "LocalQueue",
            "metadata": {"name": "local-queue", "namespace": ns},
            "spec": {"clusterQueue": cq},
        },
    )
    return "local-queue"


def replicated_job(
    name: str,
    script: str,
    replicas: int = 1,
    *,
    trainer: bool = False,
    parallelism: int | None = None,
    cpu: str | None = None,
) -> dict[str, Any]:
    """testingjobset.ReplicatedJobRequirements: a replicated job whose container runs `script`."""
    container: dict[str, Any] = {"name": name, "image": "python:3.12", "command": ["python", "-c", script]}
    if cpu:
        container["resources"] = {"requests": {"cpu": cpu}}
    job_spec: dict[str, Any] = {"template": {"spec": {"containers": [container], "restartPolicy": "Never"}}}
    if parallelism is not None:
        job_spec["parallelism"] = job_spec["completions"] = parallelism
    rjob: dict[str, Any] = {"name": name, "replicas": replicas, "template": {"spec": job_spec}}
    if trainer:
        rjob["template"]["metadata"] = {"labels": {ANCESTOR: "trainer"}}
    return rjob


def runtime(api: client.ApiClient, ns: str | None, name: str, rjobs: list[dict[str, Any]]) -> None:
    """MakeTrainingRuntime (in `ns`) or MakeClusterTrainingRuntime (ns None) around a JobSet spec."""
    kind = "TrainingRuntime" if ns else "ClusterTrainingRuntime"
    body = {
        "apiVersion": f"{G}/{V}",
        "kind": kind,
        "metadata": {"name": name},
        "spec": {"template": {"spec": {"replicatedJobs": rjobs}}},
    }
    if ns:
        crd(api).create_namespaced_custom_object(G, V, ns, "trainingruntimes", body)
    else:
        crd(api).create_cluster_custom_object(G, V, "clustertrainingruntimes", body)


def trainjob(
    api: client.ApiClient,
    ns: str,
    name: str,
    runtime_name: str,
    *,
    queue: str | None = None,
    cluster_runtime: bool = False,
    suspend: bool | None = None,
    num_nodes: int | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "runtimeRef": {
            "apiGroup": G,
            "name": runtime_name,
            "kind": "ClusterTrainingRuntime" if cluster_runtime else "TrainingRuntime",
        }
    }
    if suspend is not None:
        spec["suspend"] = suspend
    if num_nodes is not None:
        spec["trainer"] = {"numNodes": num_nodes}
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if queue:
        meta["labels"] = {QUEUE_LABEL: queue}
    body = {"apiVersion": f"{G}/{V}", "kind": "TrainJob", "metadata": meta, "spec": spec}
    return dict(crd(api).create_namespaced_custom_object(G, V, ns, "trainjobs", body))


def get(api: client.ApiClient, ns: str, name: str) -> dict[str, Any]:
    return dict(crd(api).get_namespaced_custom_object(G, V, ns, "trainjobs", name))


def kueue_patch(tj: dict[str, Any]) -> dict[str, Any] | None:
    """testingtrainjob.KueueRuntimePatch: the runtime patch whose manager is Kueue's."""
    return next((p for p in tj["spec"].get("runtimePatches") or [] if p.get("manager") == MANAGER), None)


def patched_jobs(tj: dict[str, Any]) -> list[dict[str, Any]]:
    patch = kueue_patch(tj) or {}
    return list(
        ((patch.get("trainingRuntimeSpec") or {}).get("template") or {}).get("spec", {}).get("replicatedJobs")
        or []
    )


def workload(api: client.ApiClient, ns: str, tj: dict[str, Any]) -> dict[str, Any] | None:
    """The Workload owned by the TrainJob (its name has the UID's hash: found by the job-uid label)."""
    found = crd(api).list_namespaced_custom_object(
        KUEUE, KV, ns, "workloads", label_selector=f"kueue.x-k8s.io/job-uid={tj['metadata']['uid']}"
    )["items"]
    return dict(found[0]) if found else None


def cond(obj: dict[str, Any] | None, type_: str) -> dict[str, Any] | None:
    return next(
        (c for c in ((obj or {}).get("status") or {}).get("conditions") or [] if c["type"] == type_), None
    )


def is_true(obj: dict[str, Any] | None, type_: str) -> bool:
    found = cond(obj, type_)
    return found is not None and found["status"] == "True"


def events(api: client.ApiClient, ns: str, name: str) -> list[tuple[str, str]]:
    return [
        (e.reason, e.message)
        for e in client.CoreV1Api(api).list_namespaced_event(ns).items
        if e.involved_object.name == name and e.involved_object.kind == "TrainJob"
    ]


def wait_file(path: Path) -> str:
    return f"import os, time\nwhile not os.path.exists({str(path)!r}): time.sleep(0.05)\n"


def test_should_reconcile_trainjobs(api_all_jobs: client.ApiClient, tmp_path: Path) -> None:
    """CONTROLLER "Trainjob controller" / "basic setup" / "Should reconcile Trainjobs": a non-suspended
    labelled TrainJob is suspended by the webhook; its Workload has one pod set per replicated job of the
    child JobSet (node: numNodes 2, foo: 1); on admission it is unsuspended with the Started event; when
    it completes the Workload is Finished. (Upstream writes the admission and Complete by hand.)"""
    api = api_all_jobs
    ns = namespace(api)
    for name in ("on-demand-basic", "spot-basic"):
        flavor(api, name)
    queue = queues(api, ns, "cq-basic", [("on-demand-basic", "5"), ("spot-basic", "5")])
    go = tmp_path / "go"
    runtime(
        api,
        None,
        "test-basic",
        [replicated_job("node", wait_file(go), trainer=True), replicated_job("foo", wait_file(go))],
    )
    created = trainjob(
        api, ns, "trainjob-test", "test-basic", queue=queue, cluster_runtime=True, suspend=False, num_nodes=2
    )
    assert created["spec"]["suspend"] is True
    until(lambda: workload(api, ns, created) is not None, "the Workload")
    wl = workload(api, ns, created)
    assert wl is not None and wl["spec"]["queueName"] == queue
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("node", 2), ("foo", 1)]
    assert wl["metadata"]["name"].startswith("trainjob-trainjob-test-")
    assert wl["metadata"]["ownerReferences"][0]["apiVersion"] == f"{G}/{V}"
    until(lambda: get(api, ns, "trainjob-test")["spec"]["suspend"] is False, "unsuspended on admission")
    until(
        lambda: ("Started", "Admitted by clusterQueue cq-basic") in events(api, ns, "trainjob-test"),
        "Started",
    )
    assert is_true(workload(api, ns, created), "QuotaReserved")
    go.touch()
    until(lambda: is_true(workload(api, ns, created), "Finished"), "the Workload finished")
    finished = cond(workload(api, ns, created), "Finished")
    assert finished is not None and finished["reason"] == "Succeeded"


def test_a_trainjob_in_an_unmanaged_namespace_is_not_suspended(api_all_jobs: client.ApiClient) -> None:
    """CONTROLLER "basic setup" / "A trainjob created in an unmanaged namespace is not suspended and a
    workload is not created": with manageJobsWithoutQueueName on, an unsuspended TrainJob without a queue
    name in `unmanaged-ns`, which the managedJobsNamespaceSelector excludes, is not suspended (it runs to
    its end) and gets no Workload. (Upstream watches it for a while; here it completes.)"""
    api = api_all_jobs
    runtime(api, None, "test-unmanaged", [replicated_job("node", "print('ok')", trainer=True)])
    created = trainjob(api, UNMANAGED_NS, "trainjob-test", "test-unmanaged", cluster_runtime=True, suspend=False)
    assert created["spec"]["suspend"] is False

    def completed() -> bool:
        got = get(api, UNMANAGED_NS, "trainjob-test")
        return got["spec"]["suspend"] is False and is_true(got, "Complete")

    until(completed, "the TrainJob to complete, never suspended")
    assert workload(api, UNMANAGED_NS, created) is None
    assert crd(api).list_namespaced_custom_object(KUEUE, KV, UNMANAGED_NS, "workloads")["items"] == []


def test_a_trainjob_without_a_queue_name_in_a_managed_namespace_is_managed(
    api_all_jobs: client.ApiClient, tmp_path: Path
) -> None:
    """The other side of the case above, under the same manager (jobframework WorkloadShouldBeSuspended and
    ReconcileGenericJob with manageJobsWithoutQueueName): an unsuspended TrainJob without a queue name in a
    managed namespace is suspended by the webhook and gets a Workload without `spec.queueName`, which no
    queue admits; it stays suspended."""
    api = api_all_jobs
    ns = namespace(api)
    runtime(api, ns, "test", [replicated_job("node", wait_file(tmp_path / "go"))])
    created = trainjob(api, ns, "trainjob-test", "test", suspend=False)
    assert created["spec"]["suspend"] is True
    until(lambda: workload(api, ns, created) is not None, "the Workload")
    wl = workload(api, ns, created)
    assert wl is not None and "queueName" not in wl["spec"]
    until(lambda: cond(workload(api, ns, created), "QuotaReserved") is not None, "the scheduler's verdict")
    assert not is_true(workload(api, ns, created), "QuotaReserved")
    assert get(api, ns, "trainjob-test")["spec"]["suspend"] is True


def test_should_finish_the_preemption_when_the_trainjob_becomes_inactive(
    api_all_jobs: client.ApiClient, tmp_path: Path
) -> None:
    """CONTROLLER "basic setup" / "Should finish the preemption when the trainjob becomes inactive": an
    admitted, running TrainJob whose Workload gets Evicted=True (Preempted) is suspended; Kueue's runtime
    patch is cleared and the quota released only once no Job of its JobSet is active; then it is requeued
    and, the quota being free, admitted and run again. (Upstream writes jobsStatus by hand and has no
    scheduler to re-admit.)"""
    api = api_all_jobs
    ns = namespace(api)
    for name in ("on-demand-pre", "spot-pre"):
        flavor(api, name)
    queue = queues(api, ns, "cq-pre", [("on-demand-pre", "5"), ("spot-pre", "5")])
    go = tmp_path / "go"
    runtime(
        api,
        None,
        "test-pre",
        [replicated_job("node", wait_file(go), trainer=True), replicated_job("foo", wait_file(go))],
    )
    created = trainjob(api, ns, "trainjob-test", "test-pre", queue=queue, cluster_runtime=True, suspend=False)

    def active() -> bool:
        jobs = get(api, ns, "trainjob-test").get("status", {}).get("jobsStatus") or []
        return sum(j.get("active", 0) for j in jobs) == 2

    until(active, "both Jobs active")
    assert [j["name"] for j in patched_jobs(get(api, ns, "trainjob-test"))] == ["node", "foo"]

    def evicted() -> None:
        wl = workload(api, ns, created)
        assert wl is not None
        status = dict(wl["status"])
        status["conditions"] = [
            *status["conditions"],
            {
                "type": "Evicted",
                "status": "True",
                "reason": "Preempted",
                "message": "By test",
                "lastTransitionTime": "2026-01-01T00:00:00Z",
            },
        ]
        crd(api).replace_namespaced_custom_object_status(
            KUEUE, KV, ns, "workloads", wl["metadata"]["name"], {**wl, "status": status}
        )

    written(evicted, "the Workload evicted")
    until(lambda: ("Stopped", "By test") in events(api, ns, "trainjob-test"), "stopped once inactive")
    until(lambda: is_true(workload(api, ns, created), "Requeued"), "requeued")
    requeued = cond(workload(api, ns, created), "Requeued")
    assert requeued is not None and requeued["reason"] == "Preempted"
    until(lambda: get(api, ns, "trainjob-test")["spec"]["suspend"] is False, "re-admitted and resumed")
    assert [j["name"] for j in patched_jobs(get(api, ns, "trainjob-test"))] == ["node", "foo"]
    go.touch()
    until(lambda: is_true(workload(api, ns, created), "Finished"), "finished after the second run")


def test_should_reconcile_jobs_only_when_queue_is_set(api: client.ApiClient, tmp_path: Path) -> None:
    """CONTROLLER "TrainJob controller for workloads when only jobs with queue are managed" / "Should
    reconcile jobs only when queue is set": no Workload for a TrainJob without a queue name; once the label
    is added (and the TrainJob suspended) the Workload is created."""
    ns = namespace(api)
    go = tmp_path / "go"
    runtime(api, ns, "test", [replicated_job("node", wait_file(go))])
    created = trainjob(api, ns, "trainjob-test", "test", suspend=False)
    until(
        lambda: (get(api, ns, "trainjob-test").get("status") or {}).get("jobsStatus"), "the JobSet to report"
    )
    assert workload(api, ns, created) is None
    crd(api).patch_namespaced_custom_object(
        G,
        V,
        ns,
        "trainjobs",
        "trainjob-test",
        {"metadata": {"labels": {QUEUE_LABEL: "test-queue"}}, "spec": {"suspend": True}},
    )
    until(lambda: workload(api, ns, created) is not None, "the Workload once the queue is set")
    wl = workload(api, ns, created)
    assert wl is not None and wl["spec"]["queueName"] == "test-queue"


def test_should_schedule_trainjobs_as_they_fit_in_their_clusterqueue(api: client.ApiClient) -> None:
    """CONTROLLER "TrainJob controller interacting with scheduler" / "Should schedule TrainJobs as they fit
    in their ClusterQueue": node-1 (1 cpu) fits spot-untainted (1 cpu), node-2 (3 x 1 cpu) only on-demand;
    the TrainJob is admitted and Kueue's runtime patch carries each pod set's flavor node labels in order."""
    ns = namespace(api)
    for name in ("on-demand-sched", "spot-untainted"):
        flavor(api, name)
    queue = queues(api, ns, "dev-clusterqueue", [("spot-untainted", "1"), ("on-demand-sched", "5")])
    runtime(
        api,
        ns,
        "test",
        [
            replicated_job("node-1", "print('one')", 1, parallelism=1, cpu="1"),
            replicated_job("node-2", "print('two')", 3, parallelism=1, cpu="1"),
        ],
    )
    created = trainjob(api, ns, "trainjob-test", "test", queue=queue)
    until(lambda: get(api, ns, "trainjob-test")["spec"]["suspend"] is False, "admitted and unsuspended")
    rjobs = patched_jobs(get(api, ns, "trainjob-test"))
    assert [r["name"] for r in rjobs] == ["node-1", "node-2"]
    selectors = [r["template"]["spec"]["template"]["spec"]["nodeSelector"][INSTANCE] for r in rjobs]
    assert selectors == ["spot-untainted", "on-demand-sched"]
    wl = workload(api, ns, created)
    assert wl is not None and [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [
        ("node-1", 1),
        ("node-2", 3),
    ]
    usage = [a["resourceUsage"]["cpu"] for a in wl["status"]["admission"]["podSetAssignments"]]
    assert usage == ["1", "3"]
    cq = crd(api).get_cluster_custom_object(KUEUE, KV, "clusterqueues", "dev-clusterqueue")["status"]
    assert (cq.get("pendingWorkloads"), cq.get("admittedWorkloads")) == (0, 1)


def _pods(
    name: str, script: str, replicas: int, parallelism: int, completions: int, cpu: str
) -> dict[str, Any]:
    """testingjobset.ReplicatedJobRequirements with parallelism, completions and a cpu request; the container
    knows its Job's index in the replicated job (JobSet's job-index label, through the downward API)."""
    index = {"fieldRef": {"fieldPath": "metadata.labels['jobset.sigs.k8s.io/job-index']"}}
    rjob = replicated_job(name, script, replicas, cpu=cpu)
    job_spec = rjob["template"]["spec"]
    job_spec.update(parallelism=parallelism, completions=completions)
    job_spec["template"]["spec"]["containers"][0]["env"] = [{"name": "JOB_INDEX", "valueFrom": index}]
    return rjob


def _cq_counts(api: client.ApiClient, cq: str) -> tuple[int, int, int]:
    """(pendingWorkloads, reservingWorkloads, admittedWorkloads) of the ClusterQueue's status: what
    upstream reads from the pending, reserving-active and admitted metrics."""
    status = crd(api).get_cluster_custom_object(KUEUE, KV, "clusterqueues", cq).get("status") or {}
    return (
        int(status.get("pendingWorkloads") or 0),
        int(status.get("reservingWorkloads") or 0),
        int(status.get("admittedWorkloads") or 0),
    )


def test_should_allow_reclaim_of_resources_that_are_no_longer_needed(
    api: client.ApiClient, tmp_path: Path
) -> None:
    """CONTROLLER "TrainJob controller interacting with scheduler" / "Should allow reclaim of resources that
    are no longer needed". The first TrainJob (node-1: 2 Jobs of 4 pods, 8 completions; node-2: 3 Jobs of 4
    pods; 250m each: 5 cpus) starts and fills on-demand (pending 0, admitted 1); a second (node-1: 2 x 1 cpu,
    node-2: 1 x 1 cpu) does not fit and stays suspended (pending 1, reserving 1); once node-1's two Jobs
    and one of node-2's succeeded, the first's Workload has `status.reclaimablePods` exactly
    [{node-1, 8}, {node-2, 4}] and the second starts (pending 0, reserving 2). Upstream writes jobsStatus
    (node-1 succeeded 2, node-2 succeeded 1) by hand; here those pods wait for a file until the second is
    seen pending, then succeed for real, while node-2's other Jobs keep running."""
    ns = namespace(api)
    for name in ("on-demand-reclaim", "spot-untainted-reclaim"):
        flavor(api, name)
    cq = "cq-reclaim"
    queue = queues(api, ns, cq, [("spot-untainted-reclaim", "1"), ("on-demand-reclaim", "5")])
    reclaim, go = tmp_path / "reclaim", tmp_path / "go"
    wait_reclaim = wait_file(reclaim)
    first_then_rest = (
        "import os\nif os.environ['JOB_INDEX'] == '0':\n    "
        + wait_reclaim.replace("\n", "\n    ")
        + "\nelse:\n    "
        + wait_file(go).replace("\n", "\n    ")
    )
    runtime(
        api,
        ns,
        "tr-1",
        [_pods("node-1", wait_reclaim, 2, 4, 8, "250m"), _pods("node-2", first_then_rest, 3, 4, 4, "250m")],
    )
    first = trainjob(api, ns, "trainjob-test", "tr-1", queue=queue, suspend=True)
    try:
        until(lambda: get(api, ns, "trainjob-test")["spec"]["suspend"] is False, "the first TrainJob starts")
        until(lambda: _cq_counts(api, cq) == (0, 1, 1), "pending 0, admitted 1")

        done = "print('done')"
        runtime(api, ns, "tr-2", [_pods("node-1", done, 2, 1, 1, "1"), _pods("node-2", done, 1, 1, 1, "1")])
        second = trainjob(api, ns, "trainjob-test-2", "tr-2", queue=queue, suspend=True)
        until(
            lambda: (cond(workload(api, ns, second), "QuotaReserved") or {}).get("status") == "False",
            "the second TrainJob's Workload pending",
        )
        assert get(api, ns, "trainjob-test-2")["spec"]["suspend"] is True
        until(lambda: _cq_counts(api, cq)[:2] == (1, 1), "pending 1, reserving 1")

        reclaim.touch()

        def reclaimable() -> list[dict[str, Any]] | None:
            wl = workload(api, ns, first) or {}
            return (wl.get("status") or {}).get("reclaimablePods")

        until(
            lambda: reclaimable() == [{"name": "node-1", "count": 8}, {"name": "node-2", "count": 4}],
            "node-1's and one node-2 Job's pods reclaimable",
            60,
        )
        until(lambda: get(api, ns, "trainjob-test-2")["spec"]["suspend"] is False, "the second starts", 60)
        until(lambda: _cq_counts(api, cq)[:2] == (0, 2), "pending 0, reserving 2")
        assert get(api, ns, "trainjob-test")["spec"]["suspend"] is False  # the first runs on
    finally:
        reclaim.touch()
        go.touch()
    until(lambda: is_true(workload(api, ns, first), "Finished"), "the first finished", 60)


def test_webhook_should_succeed_creating_the_trainjob(api: client.ApiClient) -> None:
    """WEBHOOK "should succed creating the TrainJob": a labelled TrainJob is created suspended, with
    Kueue's runtime patch."""
    ns = namespace(api)
    runtime(api, ns, "test", [replicated_job("node", "print('ok')")])
    trainjob(api, ns, "trainjob-test", "test", queue="queue", suspend=False)
    created = get(api, ns, "trainjob-test")
    assert created["spec"]["suspend"] is True
    patch = dict(kueue_patch(created) or {})
    # Trainer's own defaulting stamps every runtime patch with the time it was last changed.
    assert patch.pop("time", None), "Trainer's defaulter stamps the patch"
    assert patch == {"manager": MANAGER, "trainingRuntimeSpec": {"template": {"spec": {}}}}


def test_webhook_should_not_suspend_a_trainjob_without_queue(api: client.ApiClient) -> None:
    """WEBHOOK "should not suspend a TrainJob without queue" (the empty runtime patch is added anyway)."""
    ns = namespace(api)
    runtime(api, ns, "test", [replicated_job("node", "print('ok')")])
    created = trainjob(api, ns, "trainjob-test", "test", suspend=False)
    assert created["spec"]["suspend"] is False and kueue_patch(created) is not None
    until(lambda: is_true(get(api, ns, "trainjob-test"), "Complete"), "the TrainJob to complete")
