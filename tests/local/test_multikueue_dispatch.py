"""MultiKueue's dispatch in one local cluster (issue 37, part 1): jobs queued on the manager run on a
worker cluster, through the official client only. Kueue v0.19.2's own MultiKueue cases for these kinds
are ported (each test names its upstream file and case). Upstream's integration tests run the workers
without a scheduler and write the remote Workload's reservation and the remote job's status themselves;
here each worker's Kueue and operators run, so those steps are produced by the workers (quota that fits,
replicas that really run) and the same outcomes are checked. With two workers that both have room, the
worker whose Kueue admits the copy first wins: the tests find out which, and check the other has none.

Shares one manager with two workers for the module; the lost-worker case stops a worker for good, so it
runs last (in file order)."""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from jobset_support import JOBSET, JV, create_jobset, get_jobset, jobset_pods, jobset_workload, make_jobset
from kubernetes import client, config
from kueue_support import KUEUE, NS, V2, Kube, cond, labelled_job, wait_then_exit
from waiting import until

from airflow_tfjob.jobs.kinds import PADDLEJOB, PYTORCHJOB, TFJOB, XGBOOSTJOB, JobKind
from airflow_tfjob.local import LocalCluster
from airflow_tfjob.local.kueue import KUBEFLOW_V1, queue_objects
from airflow_tfjob.local.multikueue import CHECK_NAME

MK = "kueue.x-k8s.io/multikueue"
ORIGIN = "kueue.x-k8s.io/multikueue-origin"
PREBUILT = "kueue.x-k8s.io/prebuilt-workload-name"
TRAINER, TV = "trainer.kubeflow.org", "v1alpha1"
#: The worker-lost timeout (8 s): a brief loss (the connection broken and put back) must fit in it on a
#: loaded machine, where the two steps take up to a second or two.
LOST_TIMEOUT = 8.0  # 3 s was outlasted once by a brief break in a clean-clone run (the job went to the other worker)
# (The cause, found later: the MultiKueueCluster's own status write reconciled it again and started a second
# reach of the broken kubeconfig; the put-back found that reach in flight and started none, so the worker
# stayed away until the broken reach's 10 s backoff. Fixed in local/kueue/mkclusters.py: 2 failures in 15
# loaded runs of the brief-loss test before, 0 in 14 after.)
GC_INTERVAL = 0.5
QUEUES = queue_objects(cluster_queue="cq", local_queue="lq", quota={"cpu": 8, "nvidia.com/gpu": 4},
                       admission_checks=[CHECK_NAME])


@pytest.fixture(scope="module")
def manager(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(workdir=tmp_path_factory.mktemp("mk-dispatch"), multikueue_workers=2,
                      apis=["v1", "trainjob"],
                      kueue={"integrations": (*KUBEFLOW_V1, "trainer.kubeflow.org/trainjob", "jobset.x-k8s.io/jobset"),
                             "objects": QUEUES,
                             "multikueue_worker_lost_timeout": LOST_TIMEOUT,
                             "multikueue_gc_interval": GC_INTERVAL}) as cluster:
        crd = Kube.on(cluster).crd
        for worker in cluster.workers:
            until(functools.partial(_active, crd, "multikueueclusters", worker), f"{worker} connected")
        yield cluster


def _active(crd: client.CustomObjectsApi, plural: str, name: str) -> bool:
    obj = crd.get_cluster_custom_object(KUEUE, V2, plural, name)
    return any(c["type"] == "Active" and c["status"] == "True" for c in (obj.get("status") or {}).get("conditions") or [])


@pytest.fixture(scope="module")
def kube(manager: LocalCluster) -> Kube:
    return Kube.on(manager)


@pytest.fixture(scope="module")
def workers(manager: LocalCluster) -> dict[str, client.CustomObjectsApi]:
    return {w: client.CustomObjectsApi(config.new_client_from_config(str(manager.worker_kubeconfig(w))))
            for w in manager.workers}


def _status(obj: dict[str, Any], type_: str) -> str:
    """The status of a condition ("" without it)."""
    return (cond(obj, type_) or ("",))[0]


def _check(wl: dict[str, Any]) -> dict[str, Any]:
    return next(s for s in wl["status"].get("admissionChecks") or [] if s["name"] == CHECK_NAME)


def _remote(crd: client.CustomObjectsApi, group: str, version: str, plural: str, name: str) -> dict[str, Any] | None:
    try:
        return dict(crd.get_namespaced_custom_object(group, version, NS, plural, name))
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise


def _admitted_on(kube: Kube, kind: JobKind, name: str) -> tuple[str, dict[str, Any]]:
    """helpers_test.go admitWorkloadAndCheckWorkerCopies' last step: the manager's Workload Admitted, its
    check Ready naming the worker, `status.clusterName` that worker. Returns (worker, Workload)."""
    wl = kube.wait_workload(kind, name, lambda w: cond(w, "Admitted") == (
        "True", "Admitted", "The workload is admitted") and _check(w)["state"] == "Ready", "admitted on a worker")
    worker = wl["status"]["clusterName"]
    assert _check(wl)["message"] == f'The workload was admitted on "{worker}"'
    assert "nominatedClusterNames" not in wl["status"]
    return worker, wl


def _gone(crd: client.CustomObjectsApi, group: str, version: str, plural: str, name: str) -> Callable[[], bool]:
    return lambda: _remote(crd, group, version, plural, name) is None


@pytest.mark.parametrize(("kind", "replicas"), [
    (TFJOB, {"Chief": 1, "PS": 1, "Worker": 2}), (PYTORCHJOB, {"Master": 1, "Worker": 2}),
    (XGBOOSTJOB, {"Master": 1, "Worker": 2}), (PADDLEJOB, {"Master": 1, "Worker": 2})],
    ids=["TFJob", "PyTorchJob", "XGBoostJob", "PaddleJob"])
def test_a_kubeflow_job_runs_on_the_worker_that_admits_it(kube: Kube, workers: dict[str, client.CustomObjectsApi],
                                                          tmp_path: Path, kind: JobKind,
                                                          replicas: dict[str, int]) -> None:
    """Kueue v0.19.2 test/integration/multikueue/trainingoperator_test.go, "Should run a TFJob on worker if
    admitted", "Should run a PyTorchJob ...", "... a XGBoostJob ...", "... a PaddleJob ..." (with
    helpers_test.go admitWorkloadAndCheckWorkerCopies and waitForWorkloadToFinishAndRemoteWorkloadToBeDeleted),
    and defaults.go ApplyDefaultForManagedBy: the manager's copy is managed by MultiKueue and runs nothing;
    a worker's copy of the Workload and of the job run there; the job's status comes back; its end
    finishes the manager's Workload and removes the worker's copies."""
    go = tmp_path / "go"
    name = f"{kind.singular}-1"
    job = kube.create(labelled_job(kind, name, "lq", wait_then_exit(go), replicas=replicas))
    assert job["spec"]["runPolicy"]["managedBy"] == MK
    worker, wl = _admitted_on(kube, kind, name)
    other = next(w for w in workers if w != worker)
    remote_wl = _remote(workers[worker], KUEUE, V2, "workloads", wl["metadata"]["name"])
    assert remote_wl is not None and remote_wl["spec"] == wl["spec"]
    assert remote_wl["metadata"]["labels"][ORIGIN] == "multikueue"
    until(_gone(workers[other], KUEUE, V2, "workloads", wl["metadata"]["name"]), f"no Workload left on {other}")
    events = client.CoreV1Api(kube.api).list_namespaced_event(NS).items
    assert any(e.reason == "MultiKueue" and e.message == f'The workload was admitted on "{worker}"' for e in events)

    remote_job = _remote(workers[worker], "kubeflow.org", "v1", kind.plural, name)
    assert remote_job is not None
    assert remote_job["metadata"]["labels"][ORIGIN] == "multikueue"
    assert remote_job["metadata"]["annotations"][PREBUILT] == wl["metadata"]["name"]
    assert "managedBy" not in remote_job["spec"]["runPolicy"]
    assert _remote(workers[other], "kubeflow.org", "v1", kind.plural, name) is None

    def mirrored() -> bool:
        there = (_remote(workers[worker], "kubeflow.org", "v1", kind.plural, name) or {}).get("status") or {}
        here = kube.job(kind, name).get("status") or {}
        return bool(there.get("replicaStatuses", {}).get("Worker", {}).get("active") == 2) and here == there

    until(mirrored, f"the worker's status, with its running replicas, on the manager's {kind.kind}")
    assert kube.pods(name) == []  # the manager runs no replica

    go.touch()
    kube.wait_workload(kind, name, lambda w: (cond(w, "Finished") or ())[:2] == ("True", "Succeeded"),
                       "finished as the worker's job")
    for group, version, plural, copy in ((KUEUE, V2, "workloads", wl["metadata"]["name"]),
                                         ("kubeflow.org", "v1", kind.plural, name)):
        until(_gone(workers[worker], group, version, plural, copy), f"{plural}/{copy} removed from {worker}")
    assert _status(kube.job(kind, name), "Succeeded") == "True"


def test_deleting_the_managers_job_deletes_the_workers_copies(kube: Kube,
                                                              workers: dict[str, client.CustomObjectsApi],
                                                              tmp_path: Path) -> None:
    """Kueue v0.19.2 workload.go Reconcile, a deleted Workload (the deletedWlCache path; the manager's
    job deleted, its Workload collected with it), as jobs_test.go "Should remove the worker's workload
    and job after reconnect when the managers job and workload are deleted" ends once connected: the
    worker's job and Workload are removed."""
    kube.create(labelled_job(PYTORCHJOB, "pt1", "lq", wait_then_exit(tmp_path / "never"),
                             replicas={"Master": 1, "Worker": 1}))
    worker, wl = _admitted_on(kube, PYTORCHJOB, "pt1")
    until(lambda: _remote(workers[worker], "kubeflow.org", "v1", "pytorchjobs", "pt1") is not None,
          f"the PyTorchJob's copy on {worker}")
    kube.crd.delete_namespaced_custom_object("kubeflow.org", "v1", NS, "pytorchjobs", "pt1")
    until(_gone(workers[worker], "kubeflow.org", "v1", "pytorchjobs", "pt1"), f"the PyTorchJob gone from {worker}")
    until(_gone(workers[worker], KUEUE, V2, "workloads", wl["metadata"]["name"]), f"the Workload gone from {worker}")


def _runtime(crd: client.CustomObjectsApi, go: Path) -> None:
    container = {"name": "node", "image": "python:3.11",
                 "command": [sys.executable, "-c", wait_then_exit(go)], "resources": {"requests": {"cpu": "1"}}}
    crd.create_cluster_custom_object(TRAINER, TV, "clustertrainingruntimes", {
        "apiVersion": f"{TRAINER}/{TV}", "kind": "ClusterTrainingRuntime", "metadata": {"name": "mk-test"},
        "spec": {"template": {"spec": {"replicatedJobs": [{"name": "node", "replicas": 1, "template": {
            "spec": {"template": {"spec": {"restartPolicy": "Never", "containers": [container]}}}}}]}}}})


def test_a_trainjob_runs_on_the_worker_that_admits_it(kube: Kube, workers: dict[str, client.CustomObjectsApi],
                                                      tmp_path: Path) -> None:
    """Kueue v0.19.2 test/integration/multikueue/trainjob_test.go, "Should run a TrainJob on worker if
    admitted" (the runtime on the manager and both workers), with trainjob_multikueue_adapter.go's SyncJob:
    the worker's copy without Kueue's runtime patch of the manager (the worker's Kueue writes its own)."""
    go = tmp_path / "go"
    for crd in (kube.crd, *workers.values()):
        _runtime(crd, go)
    created = kube.crd.create_namespaced_custom_object(TRAINER, TV, NS, "trainjobs", {
        "apiVersion": f"{TRAINER}/{TV}", "kind": "TrainJob",
        "metadata": {"name": "tj1", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
        "spec": {"runtimeRef": {"apiGroup": TRAINER, "kind": "ClusterTrainingRuntime", "name": "mk-test"}}})
    assert created["spec"]["managedBy"] == MK
    found: dict[str, Any] = {}

    def admitted() -> bool:
        items = kube.crd.list_namespaced_custom_object(KUEUE, V2, NS, "workloads", label_selector=(
            f"kueue.x-k8s.io/job-uid={created['metadata']['uid']}"))["items"]
        if items and cond(items[0], "Admitted") == ("True", "Admitted", "The workload is admitted"):
            found.update(items[0])
        return bool(found)

    until(admitted, "the TrainJob's Workload admitted on a worker")
    worker = found["status"]["clusterName"]
    assert _check(found)["message"] == f'The workload was admitted on "{worker}"'
    until(lambda: _remote(workers[worker], TRAINER, TV, "trainjobs", "tj1") is not None, f"the copy on {worker}")
    copy = _remote(workers[worker], TRAINER, TV, "trainjobs", "tj1")
    assert copy is not None and copy["spec"].get("managedBy") != MK
    # One Kueue runtime patch, the worker's own (it carries the worker's admission).
    assert [p["manager"] for p in copy["spec"]["runtimePatches"]] == ["kueue.x-k8s.io/manager"]

    def mirrored() -> bool:
        there = (_remote(workers[worker], TRAINER, TV, "trainjobs", "tj1") or {}).get("status") or {}
        here = kube.crd.get_namespaced_custom_object(TRAINER, TV, NS, "trainjobs", "tj1").get("status") or {}
        return bool(there.get("jobsStatus")) and here == there

    until(mirrored, "the worker's jobsStatus on the manager's TrainJob")
    go.touch()
    until(lambda: (_remote(kube.crd, KUEUE, V2, "workloads", found["metadata"]["name"]) or {}).get("status", {})
          .get("conditions") and cond(_remote(kube.crd, KUEUE, V2, "workloads", found["metadata"]["name"]) or {},
                                      "Finished") is not None, "the manager's Workload finished")
    until(_gone(workers[worker], KUEUE, V2, "workloads", found["metadata"]["name"]), f"the Workload gone from {worker}")


def _jobset_admitted_on(kube: Kube, uid: str) -> tuple[str, dict[str, Any]]:
    """util.ExpectWorkloadsToBeAdmittedAndGetWorkerName for a JobSet's Workload: (worker, Workload)."""
    found: dict[str, Any] = {}

    def admitted() -> bool:
        wl = jobset_workload(kube.crd, uid) or {}
        if cond(wl, "Admitted") == ("True", "Admitted", "The workload is admitted") and _check(wl)["state"] == "Ready":
            found.update(wl)
        return bool(found)

    until(admitted, "the JobSet's Workload admitted on a worker")
    worker = found["status"]["clusterName"]
    assert _check(found)["message"] == f'The workload was admitted on "{worker}"'
    return worker, found


def test_a_jobset_runs_on_the_worker_that_admits_it(kube: Kube, workers: dict[str, client.CustomObjectsApi],
                                                    tmp_path: Path) -> None:
    """Kueue v0.19.2 test/integration/multikueue/jobset_test.go, "Should run a jobSet on worker if
    admitted", and test/e2e/multikueue/extended/e2e_test.go, "Should run a jobSet on worker if admitted"
    (with jobset_multikueue_adapter.go SyncJob and jobset_controller.go CanDefaultManagedBy): the manager's
    JobSet, queued to a MultiKueue ClusterQueue, is managed by MultiKueue and runs nothing; its Workload
    has one pod set per replicated job; the worker that admits its copy gets a copy of the JobSet
    (origin label, prebuilt-workload annotation, no managedBy), the other none; the worker's
    replicatedJobsStatus comes back; its Completed condition finishes the manager's Workload (Succeeded,
    "jobset completed successfully") and the copies are removed from both workers."""
    go = tmp_path / "go"
    created = create_jobset(kube.crd, make_jobset("job-set", "lq", wait_then_exit(go),
                                                  [("replicated-job-1", 2, 2), ("replicated-job-2", 1, 1)]))
    assert created["spec"]["managedBy"] == MK
    worker, wl = _jobset_admitted_on(kube, created["metadata"]["uid"])
    assert [(p["name"], p["count"]) for p in wl["spec"]["podSets"]] == [("replicated-job-1", 4), ("replicated-job-2", 1)]
    other = next(w for w in workers if w != worker)
    remote_wl = _remote(workers[worker], KUEUE, V2, "workloads", wl["metadata"]["name"])
    assert remote_wl is not None and remote_wl["spec"] == wl["spec"]
    until(_gone(workers[other], KUEUE, V2, "workloads", wl["metadata"]["name"]), f"no Workload left on {other}")

    until(lambda: get_jobset(workers[worker], "job-set") is not None, f"the JobSet's copy on {worker}")
    copy = get_jobset(workers[worker], "job-set")
    assert copy is not None
    assert copy["metadata"]["labels"][ORIGIN] == "multikueue"
    assert copy["metadata"]["annotations"][PREBUILT] == wl["metadata"]["name"]
    assert "managedBy" not in copy["spec"]
    assert get_jobset(workers[other], "job-set") is None

    def mirrored() -> bool:
        there = (get_jobset(workers[worker], "job-set") or {}).get("status") or {}
        here = (get_jobset(kube.crd, "job-set") or {}).get("status") or {}
        statuses = {s["name"]: (s["ready"], s["active"]) for s in there.get("replicatedJobsStatus") or []}
        return statuses == {"replicated-job-1": (2, 2), "replicated-job-2": (1, 1)} and here == there

    until(mirrored, "the worker's replicatedJobsStatus, its Jobs ready and active, on the manager's JobSet")
    assert jobset_pods(kube.api, "job-set") == []  # the manager runs no replica
    assert client.BatchV1Api(kube.api).list_namespaced_job(NS, label_selector=(
        "jobset.sigs.k8s.io/jobset-name=job-set")).items == []

    go.touch()
    until(lambda: (cond(jobset_workload(kube.crd, created["metadata"]["uid"]) or {}, "Finished") or ("",))[0] == "True",
          "the manager's Workload finished")
    assert cond(jobset_workload(kube.crd, created["metadata"]["uid"]) or {}, "Finished") == (
        "True", "Succeeded", "jobset completed successfully")
    for crd in workers.values():
        until(_gone(crd, KUEUE, V2, "workloads", wl["metadata"]["name"]), "the Workload removed from the workers")
        until(_gone(crd, JOBSET, JV, "jobsets", "job-set"), "the JobSet removed from the workers")
    done = get_jobset(kube.crd, "job-set")
    assert done is not None and done["spec"]["suspend"] is False
    assert cond(done, "Completed") == ("True", "AllJobsCompleted", "jobset completed successfully")


def test_deleting_the_managers_jobset_deletes_the_workers_copies(kube: Kube,
                                                                 workers: dict[str, client.CustomObjectsApi],
                                                                 tmp_path: Path) -> None:
    """As test_deleting_the_managers_job_deletes_the_workers_copies, for a JobSet (jobset_multikueue_adapter.go
    DeleteRemoteObject): the manager's JobSet deleted, the worker's JobSet and Workload are removed."""
    created = create_jobset(kube.crd, make_jobset("js-del", "lq", wait_then_exit(tmp_path / "never"),
                                                  [("rj", 1, 1)]))
    worker, wl = _jobset_admitted_on(kube, created["metadata"]["uid"])
    until(lambda: get_jobset(workers[worker], "js-del") is not None, f"the JobSet's copy on {worker}")
    kube.crd.delete_namespaced_custom_object(JOBSET, JV, NS, "jobsets", "js-del")
    until(_gone(workers[worker], JOBSET, JV, "jobsets", "js-del"), f"the JobSet gone from {worker}")
    until(_gone(workers[worker], KUEUE, V2, "workloads", wl["metadata"]["name"]), f"the Workload gone from {worker}")


def _pending_gpu_job(kube: Kube, name: str, go: Path) -> None:
    """A TFJob whose replica asks for a GPU no worker has: admitted by quota, its pod stays Pending, so
    its status never counts an active replica (the manager's copy then releases its quota on eviction)."""
    body = labelled_job(TFJOB, name, "lq", wait_then_exit(go))
    body["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["resources"] = {
        "requests": {"cpu": "1"}, "limits": {"nvidia.com/gpu": "1"}}
    kube.create(body)


def test_an_eviction_on_the_worker_redoes_the_admission(kube: Kube, workers: dict[str, client.CustomObjectsApi],
                                                        tmp_path: Path) -> None:
    """Kueue v0.19.2 test/integration/multikueue/jobs_test.go, "Should redo the admission process once the
    workload loses Admission in the worker cluster" (workload.go step 4): the worker's copy evicted, the
    manager's check turns Retry, the eviction resets it to Pending and forgets the cluster, and the
    requeued Workload is admitted on a worker again."""
    _pending_gpu_job(kube, "evict1", tmp_path / "never")
    worker, wl = _admitted_on(kube, TFJOB, "evict1")
    until(lambda: _remote(workers[worker], "kubeflow.org", "v1", "tfjobs", "evict1") is not None,
          f"the copy on {worker}")
    # Upstream writes Evicted on the copy of a worker that runs no scheduler; a worker's Kueue here would
    # requeue and admit it again at once, so the worker's queue is drained instead (the eviction a stopped
    # ClusterQueue makes) and holds the copy, and only the other worker can admit the Workload again.
    workers[worker].patch_cluster_custom_object(KUEUE, V2, "clusterqueues", "cq", {"spec": {"stopPolicy": "HoldAndDrain"}})
    try:
        wl = kube.wait_workload(TFJOB, "evict1", lambda w: (_check(w).get("retryCount") == 1
                                and _check(w)["state"] == "Ready" and _status(w, "Admitted") == "True"),
                                "admitted on a worker again")
    finally:
        workers[worker].patch_cluster_custom_object(KUEUE, V2, "clusterqueues", "cq", {"spec": {"stopPolicy": "None"}})
    assert wl["status"]["clusterName"] != worker
    assert _status(wl, "Requeued") == "True"
    retry = (f'Workload evicted on worker cluster: "{worker}", resetting for re-admission. '
             'Previously: "Ready"')
    events = client.CoreV1Api(kube.api).list_namespaced_event(NS).items
    assert any(e.reason == "MultiKueue" and e.message == retry for e in events)
    assert any(e.reason == "EvictedDueToAdmissionCheck" and e.message == (
        f'Evicted due to AdmissionCheck in Retry state: "{CHECK_NAME}" ({retry})') for e in events)
    kube.crd.delete_namespaced_custom_object("kubeflow.org", "v1", NS, "tfjobs", "evict1")


def _inactive(crd: client.CustomObjectsApi, worker: str) -> bool:
    obj = crd.get_cluster_custom_object(KUEUE, V2, "multikueueclusters", worker)
    return any(c["type"] == "Active" and c["status"] == "False" for c in (obj.get("status") or {}).get("conditions") or [])


def _break_connection(kube: Kube, worker: str) -> Callable[[], None]:
    """test/util BreakConnection: the worker's kubeconfig Secret on the manager pointed at a server that
    does not answer, until the worker's MultiKueueCluster is inactive; returns what puts it back (and
    waits for the worker to be connected again)."""
    import base64

    import yaml

    from airflow_tfjob.local.kueue.options import MANAGER_NAMESPACE, MULTIKUEUE_SECRET_KEY
    from airflow_tfjob.local.multikueue import secret_name

    core = client.CoreV1Api(kube.api)
    kept = core.read_namespaced_secret(secret_name(worker), MANAGER_NAMESPACE).data[MULTIKUEUE_SECRET_KEY]

    def put(data: str) -> None:
        core.patch_namespaced_secret(secret_name(worker), MANAGER_NAMESPACE, {"data": {MULTIKUEUE_SECRET_KEY: data}})

    broken = yaml.safe_load(base64.b64decode(kept))
    for entry in broken["clusters"]:
        entry["cluster"]["server"] = "https://127.0.0.1:9"  # the discard port: nothing answers
    put(base64.b64encode(yaml.safe_dump(broken).encode()).decode())
    try:
        until(lambda: _inactive(kube.crd, worker), f"{worker} inactive")
    except BaseException:
        put(kept)
        raise

    def restore() -> None:
        put(kept)
        until(functools.partial(_active, kube.crd, "multikueueclusters", worker), f"{worker} connected again")

    return restore


def _inactive(crd: client.CustomObjectsApi, worker: str) -> bool:
    obj = crd.get_cluster_custom_object(KUEUE, V2, "multikueueclusters", worker)
    return any(c["type"] == "Active" and c["status"] == "False" for c in (obj.get("status") or {}).get("conditions") or [])


def test_a_brief_loss_of_the_admitting_worker_evicts_nothing(kube: Kube, workers: dict[str, client.CustomObjectsApi],
                                                             tmp_path: Path) -> None:
    """Kueue v0.19.2 test/integration/multikueue/jobs_test.go, "Should not evict admitted workloads when the
    connection to the admitting worker is briefly lost" (its connection broken as util.BreakConnection
    breaks it: the worker's kubeconfig Secret pointed at a server that does not answer, then put back):
    the worker's MultiKueueCluster turns Active=False and back before the worker-lost timeout (3 s)
    has passed, and for that timeout after (upstream's expectNoEviction watches twice as long; the
    worker's loss counts from the break, so an eviction it caused would come within one) the Workload
    keeps its admission on that worker: its check Ready with no retry, no eviction, the copy in place.
    (Left broken, the same job is dispatched again to the other worker.)"""
    _pending_gpu_job(kube, "brief1", tmp_path / "never")
    worker, _ = _admitted_on(kube, TFJOB, "brief1")
    until(lambda: _remote(workers[worker], "kubeflow.org", "v1", "tfjobs", "brief1") is not None,
          f"the copy on {worker}")
    _break_connection(kube, worker)()

    deadline = time.monotonic() + LOST_TIMEOUT  # a claim that nothing happens: watched for a while
    while time.monotonic() < deadline:
        wl = kube.workload(TFJOB, "brief1")
        assert wl is not None
        check = _check(wl)
        assert (check["state"], check.get("retryCount"), wl["status"].get("clusterName")) == (
            "Ready", None, worker), wl["status"]
        assert _status(wl, "Evicted") != "True" and not wl["status"].get("schedulingStats", {}).get("evictions")
        time.sleep(0.1)
    assert _remote(workers[worker], "kubeflow.org", "v1", "tfjobs", "brief1") is not None
    kube.crd.delete_namespaced_custom_object("kubeflow.org", "v1", NS, "tfjobs", "brief1")


def test_the_garbage_collector_removes_a_copy_orphaned_while_its_worker_was_away(
        kube: Kube, workers: dict[str, client.CustomObjectsApi], tmp_path: Path) -> None:
    """Kueue v0.19.2 test/integration/multikueue/jobs_test.go, "Should remove the worker's workload and job
    after reconnect when the managers job and workload are deleted" (its worker1 half; the other worker's
    copy is removed here when the first admits, as AllAtOnce does): the admitting worker's connection
    broken, the manager's job deleted (its Workload with it) leaves the worker's job and Workload there;
    once the worker is connected again, the garbage collector (every 0.5 s here) removes both."""
    _pending_gpu_job(kube, "orphan1", tmp_path / "never")
    worker, wl = _admitted_on(kube, TFJOB, "orphan1")
    name = wl["metadata"]["name"]
    until(lambda: _remote(workers[worker], "kubeflow.org", "v1", "tfjobs", "orphan1") is not None,
          f"the copy on {worker}")
    restore = _break_connection(kube, worker)
    try:
        kube.crd.delete_namespaced_custom_object("kubeflow.org", "v1", NS, "tfjobs", "orphan1")
        until(_gone(kube.crd, KUEUE, V2, "workloads", name), "the manager's Workload deleted")
        assert _remote(workers[worker], "kubeflow.org", "v1", "tfjobs", "orphan1") is not None
        assert _remote(workers[worker], KUEUE, V2, "workloads", name) is not None
    finally:
        restore()
    until(_gone(workers[worker], "kubeflow.org", "v1", "tfjobs", "orphan1"), f"the job removed from {worker}")
    until(_gone(workers[worker], KUEUE, V2, "workloads", name), f"the Workload removed from {worker}")


def test_a_lost_worker_s_workload_is_dispatched_again(manager: LocalCluster, kube: Kube,
                                                      workers: dict[str, client.CustomObjectsApi],
                                                      tmp_path: Path) -> None:
    """Kueue v0.19.2 test/integration/multikueue/jobs_test.go, "Should requeue the workload with a delay
    when the connection to the admitting worker is lost" (workload.go step 6a, with a 3 s
    workerLostTimeout): the check turns Retry ("Admitting remote lost"), the eviction resets it to Pending
    with retryCount 1, and the Workload, requeued, is dispatched to the worker still there. Its replicas
    ask for a GPU no worker has, so they stay Pending: a manager's copy that mirrored running replicas
    would keep its quota (Kueue's IsActive; docs/local-cluster.md)."""
    _pending_gpu_job(kube, "lost1", tmp_path / "never")
    worker, wl = _admitted_on(kube, TFJOB, "lost1")
    until(lambda: _remote(workers[worker], "kubeflow.org", "v1", "tfjobs", "lost1") is not None,
          f"the copy on {worker}")
    manager.lose_worker(worker)
    other = next(w for w in workers if w != worker)
    wl = kube.wait_workload(TFJOB, "lost1", lambda w: (_check(w).get("retryCount") == 1
                            and w["status"].get("clusterName") == other and _check(w)["state"] == "Ready"),
                            f"dispatched again, to {other}")
    assert _check(wl)["message"] == f'The workload was admitted on "{other}"'
    assert wl["status"]["schedulingStats"]["evictions"] == [
        {"reason": "AdmissionCheck", "underlyingCause": "", "count": 1}]
    events = client.CoreV1Api(kube.api).list_namespaced_event(NS).items
    assert any(e.reason == "EvictedDueToAdmissionCheck" and e.message == (
        f'Evicted due to AdmissionCheck in Retry state: "{CHECK_NAME}" (Admitting remote lost, Previously: '
        '"Ready")') for e in events)
    until(lambda: _remote(workers[other], "kubeflow.org", "v1", "tfjobs", "lost1") is not None,
          f"the copy on {other}")
