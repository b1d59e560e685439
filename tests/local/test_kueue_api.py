"""The Kueue emulation's API surface, through the official client over real HTTP: the kinds it serves
(v1beta2 and the deprecated v1beta1 view of the same objects), discovery, printer columns, the options'
errors, the per-kind integration switch, and the Workload a labelled job gets
(docs/reference/kueue-behaviour.md §1, §4.3, §9)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, watch
from kueue_support import KUEUE, NS, V2, Kube, admitted, cond, labelled_job, suspended, wait_then_exit
from waiting import until

from airflow_tfjob.jobs.kinds import TFJOB
from airflow_tfjob.local import LocalCluster
from airflow_tfjob.local.apiserver.tables import to_table
from airflow_tfjob.local.cli import build_parser, build_runtime
from airflow_tfjob.local.kueue import KUBEFLOW_V1, KueueOptions, queue_objects
from airflow_tfjob.local.model.resources import RESOURCES

PRIORITIES = {"high": 1000}


@pytest.fixture(scope="module")
def kube(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kube]:
    objects = queue_objects(cluster_queue="cq", local_queue="lq", quota={"cpu": 8, "memory": "8Gi"},
                            priorities=PRIORITIES, node_labels={"pool": "cpu"})
    with LocalCluster(workdir=tmp_path_factory.mktemp("kueue-api"),
                      kueue={"integrations": KUBEFLOW_V1, "objects": objects}) as cluster:
        yield Kube.on(cluster)


@pytest.fixture(scope="module")
def kube_default(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kube]:
    """Kueue with v0.19.2's shipped integrations: the kubeflow.org v1 kinds are off."""
    with LocalCluster(workdir=tmp_path_factory.mktemp("kueue-default"),
                      kueue={"objects": queue_objects(local_queue="lq")}) as cluster:
        yield Kube.on(cluster)


# ---- served kinds and discovery


def test_discovery_lists_kueue_kinds_in_both_versions_and_the_visibility_group(kube: Kube) -> None:
    groups = {g.name: g for g in client.ApisApi(kube.api).get_api_versions().groups}
    assert [v.version for v in groups[KUEUE].versions] == ["v1beta2", "v1beta1"]
    assert groups[KUEUE].preferred_version.version == "v1beta2"
    assert "visibility.kueue.x-k8s.io" in groups
    for version in ("v1beta2", "v1beta1"):
        listed = {r.name: r for r in kube.crd.get_api_resources(KUEUE, version).resources}
        assert set(listed) == {f"{p}{s}" for p in ("resourceflavors", "clusterqueues", "localqueues",
                                                   "workloadpriorityclasses", "workloads") for s in ("", "/status")}
        assert listed["workloads"].namespaced and listed["localqueues"].namespaced
        assert not listed["clusterqueues"].namespaced
        assert listed["workloads"].short_names == ["kwl", "kueueworkload", "kueueworkloads"]
        assert listed["clusterqueues"].short_names == ["cq"]
    visibility = kube.crd.get_api_resources("visibility.kueue.x-k8s.io", "v1beta1").resources
    assert {r.name: r.verbs for r in visibility} == {
        "clusterqueues": [], "clusterqueues/pendingworkloads": ["get"],
        "localqueues": [], "localqueues/pendingworkloads": ["get"]}


def test_without_kueue_nothing_of_it_is_served(local_cluster: LocalCluster) -> None:
    api = Kube.on(local_cluster)
    names = [g.name for g in client.ApisApi(api.api).get_api_versions().groups]
    assert KUEUE not in names and "visibility.kueue.x-k8s.io" not in names
    with pytest.raises(client.ApiException) as caught:
        api.crd.list_cluster_custom_object(KUEUE, V2, "clusterqueues")
    assert caught.value.status == 404
    with pytest.raises(client.ApiException) as caught:
        api.visibility("clusterqueues/cq/pendingworkloads")
    assert caught.value.status == 404


def test_objects_given_at_start_exist_with_their_status(kube: Kube) -> None:
    until(lambda: cond(kube.crd.get_cluster_custom_object(KUEUE, V2, "clusterqueues", "cq"), "Active")
          == ("True", "Ready", "Can admit new workloads"), "ClusterQueue cq to be active")
    lq = kube.crd.get_namespaced_custom_object(KUEUE, V2, NS, "localqueues", "lq")
    until(lambda: cond(kube.crd.get_namespaced_custom_object(KUEUE, V2, NS, "localqueues", "lq"), "Active")
          == ("True", "Ready", "Can submit new workloads to localQueue"), "LocalQueue lq to be active")
    assert lq["spec"] == {"clusterQueue": "cq", "stopPolicy": "None"}  # with the CRD's default
    wpc = kube.crd.get_cluster_custom_object(KUEUE, V2, "workloadpriorityclasses", "high")
    assert wpc["value"] == 1000


def test_a_cluster_queue_naming_a_missing_flavor_is_inactive(kube: Kube) -> None:
    cq = queue_objects(cluster_queue="orphan", flavor="nowhere")[1]
    kube.crd.create_cluster_custom_object(KUEUE, V2, "clusterqueues", cq)
    until(lambda: cond(kube.crd.get_cluster_custom_object(KUEUE, V2, "clusterqueues", "orphan"), "Active")
          == ("False", "FlavorNotFound", "Can't admit new workloads: references missing ResourceFlavor(s): nowhere."),
          "ClusterQueue orphan to be inactive")


# ---- the integration switch


def test_a_queue_label_is_ignored_when_the_kinds_integration_is_off(kube_default: Kube, tmp_path: Path) -> None:
    kube = kube_default
    created = kube.create(labelled_job(TFJOB, "ignored", "lq", wait_then_exit(tmp_path / "go")))
    assert not suspended(created)  # no webhook default
    until(lambda: is_running(kube.job(TFJOB, "ignored")), "the labelled TFJob to run outside Kueue")
    assert kube.workload(TFJOB, "ignored") is None
    assert kube.crd.list_namespaced_custom_object(KUEUE, V2, NS, "workloads")["items"] == []
    (tmp_path / "go").touch()
    until(lambda: cond(kube.job(TFJOB, "ignored"), "Succeeded") is not None, "the TFJob to succeed")


def is_running(job: dict[str, Any]) -> bool:
    found = cond(job, "Running")
    return found is not None and found[0] == "True"


def test_integrations_default_to_v0_19_2s_shipped_set() -> None:
    options = KueueOptions()
    assert "kubeflow.org/mpijob" in options.integrations and "batch/job" in options.integrations
    assert not any(name in options.integrations for name in KUBEFLOW_V1)
    assert KUBEFLOW_V1 == ("kubeflow.org/tfjob", "kubeflow.org/pytorchjob", "kubeflow.org/xgboostjob",
                           "kubeflow.org/jaxjob", "kubeflow.org/paddlejob")


def test_the_managed_namespaces_are_a_kubernetes_label_selector() -> None:
    """managedJobsNamespaceSelector: v0.19.2's default leaves out kube-system and kueue-system; an empty
    selector selects every namespace (LabelSelectorAsSelector), matchLabels and matchExpressions AND."""
    name = "kubernetes.io/metadata.name"
    default = KueueOptions().namespace_selector()
    assert [default.matches({name: n}) for n in ("kube-system", "kueue-system", "team-a")] == [False, False, True]
    assert KueueOptions(managed_jobs_namespace_selector={}).namespace_selector().matches({name: "kube-system"})
    team = KueueOptions(managed_jobs_namespace_selector={
        "matchLabels": {"team": "a"}, "matchExpressions": [{"key": "tier", "operator": "Exists"}]}).namespace_selector()
    assert team.matches({"team": "a", "tier": "batch"}) and not team.matches({"team": "a"})
    assert not team.matches({"team": "b", "tier": "batch"})


@pytest.mark.parametrize(("value", "message"), [
    ({"integrations": ["kubeflow.org/tfjobs"]}, "kueue integrations: unsupported value 'kubeflow.org/tfjobs'"),
    ({"integrations": "kubeflow.org/tfjob"}, "kueue integrations must be a list of names"),
    ({"queues": []}, "kueue: unknown option 'queues'; known: backoff_base_seconds, integrations, "
                     "manage_jobs_without_queue_name, managed_jobs_namespace_selector, multikueue, "
                     "multikueue_gc_interval, multikueue_worker_lost_timeout, objects, pods_ready_timeout, "
                     "wait_for_pods_ready"),
    ({"manage_jobs_without_queue_name": "yes"},
     "kueue manage_jobs_without_queue_name must be true or false, got 'yes'"),
    ({"multikueue_worker_lost_timeout": 0},
     "kueue multikueue_worker_lost_timeout must be a positive number of seconds, got 0"),
    ({"managed_jobs_namespace_selector": {"matchExpressions": [{"key": "team", "operator": "Bogus"}]}},
     "kueue managed_jobs_namespace_selector.matchExpressions[0].operator: 'Bogus' is not one of In, NotIn, "
     "Exists, DoesNotExist"),
    ({"managed_jobs_namespace_selector": {"matchExpressions": [{"key": "team", "operator": "In"}]}},
     "kueue managed_jobs_namespace_selector.matchExpressions[0].values: must be specified when operator is "
     "In or NotIn"),
    ({"managed_jobs_namespace_selector": {"matchLabel": {"team": "a"}}},
     "kueue managed_jobs_namespace_selector: unknown field 'matchLabel'; use matchLabels and matchExpressions"),
    ({"pods_ready_timeout": 0}, "kueue pods_ready_timeout must be a positive number of seconds, got 0"),
    ({"objects": [{"metadata": {}}]}, "kueue objects[0]: kind None is not one the emulation creates"),
    ({"objects": [{"kind": "Workload", "metadata": {"name": "w"}}]}, "kueue objects[0]: kind 'Workload' is not one"),
    ("yes", "kueue must be True, a mapping"),
])
def test_bad_options_are_refused_before_anything_starts(value: Any, message: str) -> None:
    with pytest.raises(ValueError, match="^" + message.replace("[", r"\[").replace("(", r"\(")):
        LocalCluster(kueue=value)


def test_cli_options_build_the_same_setup(tmp_path: Path) -> None:
    objects = tmp_path / "queues.yaml"
    import yaml

    objects.write_text(yaml.safe_dump_all(queue_objects(cluster_queue="c1", local_queue="l1")))
    args = build_parser().parse_args(["serve", "--kueue-integrations", "kubeflow.org/tfjob,kubeflow.org/jaxjob",
                                      "--kueue-objects", str(objects), "--workdir", str(tmp_path)])
    runtime = build_runtime(args)
    assert runtime.kueue is not None
    assert runtime.kueue.options.integrations == ("kubeflow.org/tfjob", "kubeflow.org/jaxjob")
    assert runtime.store.get("clusterqueues", None, "c1")["spec"]["queueingStrategy"] == "BestEffortFIFO"
    with pytest.raises(SystemExit):
        build_runtime_or_exit(["serve", "--kueue-integrations", "tfjob"])
    off = build_runtime(build_parser().parse_args(["serve", "--workdir", str(tmp_path / "off")]))
    assert off.kueue is None
    timed = build_runtime(build_parser().parse_args(["serve", "--kueue-pods-ready-timeout", "5", "--workdir",
                                                     str(tmp_path / "timed")]))
    assert timed.kueue is not None and timed.kueue.options.pods_ready_timeout == 5


def test_cli_manages_jobs_without_queue_name_in_the_selected_namespaces(tmp_path: Path) -> None:
    """--kueue-manage-jobs-without-queue-name and --kueue-managed-jobs-namespace-selector (kubectl's -l
    syntax) become Kueue's manageJobsWithoutQueueName and managedJobsNamespaceSelector, in the options and
    in the manager's ConfigMap as a release install keeps them; each implies --kueue."""
    import yaml

    args = build_parser().parse_args([
        "serve", "--kueue-manage-jobs-without-queue-name", "--kueue-managed-jobs-namespace-selector",
        "kubernetes.io/metadata.name notin (kube-system,team-b),tier=batch", "--workdir", str(tmp_path)])
    runtime = build_runtime(args)
    assert runtime.kueue is not None
    options = runtime.kueue.options
    selector = {"matchLabels": {"tier": "batch"}, "matchExpressions": [
        {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system", "team-b"]}]}
    assert options.manage_jobs_without_queue_name is True
    assert options.managed_jobs_namespace_selector == selector
    config = yaml.safe_load(runtime.store.get("configmaps", "kueue-system", "kueue-manager-config")["data"][
        "controller_manager_config.yaml"])
    assert config["manageJobsWithoutQueueName"] is True and config["managedJobsNamespaceSelector"] == selector
    plain = build_runtime(build_parser().parse_args(["serve", "--kueue", "--workdir", str(tmp_path / "plain")]))
    assert plain.kueue is not None and not plain.kueue.options.manage_jobs_without_queue_name
    plain_config = yaml.safe_load(plain.store.get("configmaps", "kueue-system", "kueue-manager-config")["data"][
        "controller_manager_config.yaml"])
    assert "manageJobsWithoutQueueName" not in plain_config and "managedJobsNamespaceSelector" not in plain_config
    with pytest.raises(SystemExit):
        build_runtime_or_exit(["serve", "--kueue-managed-jobs-namespace-selector", "a in b"])


def build_runtime_or_exit(argv: list[str]) -> None:
    from airflow_tfjob.local.cli import main

    main(argv)


# ---- the Workload a labelled job gets


def test_a_labelled_job_is_created_suspended_and_gets_its_workload(kube: Kube, tmp_path: Path) -> None:
    replicas = {"Evaluator": 1, "Worker": 2, "PS": 1, "Chief": 1}
    created = kube.create(labelled_job(TFJOB, "shape", "lq", wait_then_exit(tmp_path / "go"), cpu="500m",
                                       priority="high", replicas=replicas))
    assert suspended(created)  # the mutating webhook, on create
    uid = created["metadata"]["uid"]
    wl = kube.wait_workload(TFJOB, "shape", admitted, "admitted")
    digest = hashlib.sha1(f"TFJob\nkubeflow.org\nshape\n{uid}".encode()).hexdigest()[:5]
    assert wl["metadata"]["name"] == f"tfjob-shape-{digest}"
    assert wl["metadata"]["labels"] == {"kueue.x-k8s.io/job-uid": uid}
    assert wl["metadata"]["finalizers"] == ["kueue.x-k8s.io/resource-in-use"]
    assert wl["metadata"]["ownerReferences"] == [{"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "name": "shape",
                                                  "uid": uid, "controller": True, "blockOwnerDeletion": True}]
    spec = wl["spec"]
    assert [(p["name"], p["count"]) for p in spec["podSets"]] == [("chief", 1), ("ps", 1), ("worker", 2),
                                                                  ("evaluator", 1)]
    assert spec["podSets"][2]["template"] == created["spec"]["tfReplicaSpecs"]["Worker"]["template"]
    assert (spec["queueName"], spec["priority"]) == ("lq", 1000)
    assert spec["priorityClassRef"] == {"group": KUEUE, "kind": "WorkloadPriorityClass", "name": "high"}
    assert wl["status"]["admission"] == {"clusterQueue": "cq", "podSetAssignments": [
        {"name": name, "flavors": {"cpu": "default-flavor"}, "count": n, "resourceUsage": {"cpu": usage}}
        for name, n, usage in (("chief", 1, "500m"), ("ps", 1, "500m"), ("worker", 2, "1"), ("evaluator", 1, "500m"))]}
    assert cond(wl, "QuotaReserved") == ("True", "QuotaReserved", "Quota reserved in ClusterQueue cq")
    assert cond(wl, "Admitted") == ("True", "Admitted", "The workload is admitted")
    until(lambda: not suspended(kube.job(TFJOB, "shape")), "the admitted job to be unsuspended")
    worker = kube.job(TFJOB, "shape")["spec"]["tfReplicaSpecs"]["Worker"]["template"]
    assert worker["metadata"]["labels"] == {"kueue.x-k8s.io/podset": "worker"}
    assert worker["spec"]["nodeSelector"] == {"pool": "cpu"}  # the flavor's nodeLabels
    until(lambda: len(kube.pods("shape")) == 5, "the five replica pods")
    events = client.CoreV1Api(kube.api).list_namespaced_event(NS, field_selector="involvedObject.name=shape").items
    reasons = {(e.reason, e.message) for e in events}
    assert ("CreatedWorkload", f"Created Workload: {NS}/{wl['metadata']['name']}") in reasons
    assert ("Started", "Admitted by clusterQueue cq") in reasons
    (tmp_path / "go").touch()
    done = kube.wait_workload(TFJOB, "shape", lambda w: cond(w, "Finished") and not w["metadata"].get("finalizers"),
                              "finished, its finalizer removed")
    assert cond(done, "Finished") == ("True", "Succeeded", cond(kube.job(TFJOB, "shape"), "Succeeded")[2])  # type: ignore[index]


def test_the_v1beta1_view_shows_the_same_workload_with_a_deprecation_warning(kube: Kube, tmp_path: Path) -> None:
    kube.create(labelled_job(TFJOB, "old-api", "lq", wait_then_exit(tmp_path / "go"), priority="high"))
    v2 = kube.wait_workload(TFJOB, "old-api", admitted, "admitted")
    name = v2["metadata"]["name"]
    v1, status, headers = kube.crd.get_namespaced_custom_object_with_http_info(KUEUE, "v1beta1", NS, "workloads", name)
    assert status == 200
    assert headers.getlist("Warning") == ['299 - "This version is deprecated. Use v1beta2 instead."']
    assert v1["apiVersion"] == "kueue.x-k8s.io/v1beta1"
    assert (v1["spec"]["priorityClassName"], v1["spec"]["priorityClassSource"], v1["spec"]["priority"]) == (
        "high", "kueue.x-k8s.io/workloadpriorityclass", 1000)
    assert "priorityClassRef" not in v1["spec"]
    assert v1["status"]["admission"] == v2["status"]["admission"]
    assert [cond(v1, t) for t in ("QuotaReserved", "Admitted")] == [cond(v2, t) for t in ("QuotaReserved", "Admitted")]
    cq = kube.crd.get_cluster_custom_object(KUEUE, "v1beta1", "clusterqueues", "cq")
    assert cq["apiVersion"] == "kueue.x-k8s.io/v1beta1" and cq["spec"]["namespaceSelector"] == {}
    # Written through v1beta1, stored as v1beta2.
    body = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ClusterQueue", "metadata": {"name": "via-v1beta1"},
            "spec": {"cohort": "team", "resourceGroups": []}}
    kube.crd.create_cluster_custom_object(KUEUE, "v1beta1", "clusterqueues", body)
    stored = kube.crd.get_cluster_custom_object(KUEUE, V2, "clusterqueues", "via-v1beta1")
    assert stored["spec"] == {  # renamed, and the CRD's defaults written
        "cohortName": "team", "resourceGroups": [], "queueingStrategy": "BestEffortFIFO", "stopPolicy": "None",
        "flavorFungibility": {"whenCanBorrow": "MayStopSearch", "whenCanPreempt": "TryNextFlavor"},
        "preemption": {"withinClusterQueue": "Never", "reclaimWithinCohort": "Never",
                       "borrowWithinCohort": {"policy": "Never"}}}
    (tmp_path / "go").touch()


def test_a_v1beta1_watch_streams_converted_workloads(kube: Kube, tmp_path: Path) -> None:
    kube.create(labelled_job(TFJOB, "watched", "lq", wait_then_exit(tmp_path / "go"), priority="high"))
    name = kube.wait_workload(TFJOB, "watched", admitted, "admitted")["metadata"]["name"]
    stream = watch.Watch().stream(kube.crd.list_namespaced_custom_object, KUEUE, "v1beta1", NS, "workloads",
                                  field_selector=f"metadata.name={name}", timeout_seconds=5)
    obj = next(iter(stream))["object"]  # the initial ADDED event
    assert (obj["apiVersion"], obj["spec"]["priorityClassName"]) == ("kueue.x-k8s.io/v1beta1", "high")
    raw = kube.crd.list_namespaced_custom_object(KUEUE, "v1beta1", NS, "workloads", watch=True, timeout_seconds=1,
                                                 _preload_content=False)
    assert raw.headers.getlist("Warning") == ['299 - "This version is deprecated. Use v1beta2 instead."']
    raw.release_conn()
    (tmp_path / "go").touch()


def test_printer_columns_are_kueues() -> None:
    wl = {"metadata": {"name": "w", "creationTimestamp": "2026-01-01T00:00:00Z"}, "spec": {"queueName": "lq"},
          "status": {"admission": {"clusterQueue": "cq"},
                     "conditions": [{"type": "Admitted", "status": "True"}]}}
    table = to_table(RESOURCES["workloads"], [wl], "1", "None")
    assert [c["name"] for c in table["columnDefinitions"]] == ["Name", "Queue", "Reserved in", "Admitted",
                                                               "Finished", "Age"]
    assert table["rows"][0]["cells"][:5] == ["w", "lq", "cq", "True", ""]
    cq = to_table(RESOURCES["clusterqueues"], [], "1", "None")["columnDefinitions"]
    assert [(c["name"], c["priority"]) for c in cq] == [("Name", 0), ("Cohort", 0), ("Strategy", 1),
                                                        ("Pending Workloads", 0), ("Admitted Workloads", 1), ("Age", 0)]


def test_a_local_queue_named_default_queues_unlabelled_jobs_of_its_namespace(kube: Kube, tmp_path: Path) -> None:
    kube.apply([{"apiVersion": f"{KUEUE}/{V2}", "kind": "LocalQueue",
                 "metadata": {"name": "default", "namespace": "kubeflow"}, "spec": {"clusterQueue": "cq"}}])
    job = labelled_job(TFJOB, "unlabelled", None, wait_then_exit(tmp_path / "go"))
    created = kube.crd.create_namespaced_custom_object("kubeflow.org", "v1", "kubeflow", "tfjobs", job)
    assert created["metadata"]["labels"] == {"kueue.x-k8s.io/queue-name": "default"} and suspended(created)
    elsewhere = kube.create(labelled_job(TFJOB, "unlabelled", None, wait_then_exit(tmp_path / "go")))
    assert elsewhere["metadata"].get("labels") in (None, {}) and not suspended(elsewhere)  # no default queue here
    (tmp_path / "go").touch()
