"""Version profiles (model/profiles.py): `--profile` / `LocalCluster(profile=...)` read and refused as the
other options are, and what a profile changes seen as a client sees it, over real HTTP with the official
client: Kueue 0.20 serves kueue.x-k8s.io and its visibility API at v1beta2 only (kubernetes-sigs/kueue#14558),
the default profile serves both versions as before, and the Trainer release recorded follows the profile;
Trainer 2.4's runtime webhook refuses a ReplicatedJob name over 20 characters (kubeflow/trainer#4394) and
its controller sets the TrainJob's image on an MPI runtime's nodes as well as its launcher (#4301), where
2.3 takes the name and sets the image on the launcher only."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config
from kubernetes.client.rest import ApiException
from kueue_support import KUEUE, Kube
from process_support import start_serve, stop_serve
from waiting import until

from airflow_tfjob.local import LocalCluster
from airflow_tfjob.local.cli import main
from airflow_tfjob.local.kueue import queue_objects
from airflow_tfjob.local.model.profiles import (
    KUEUE_0_19,
    KUEUE_0_20,
    RELEASE_NOTES_ONLY,
    RELEASES,
    TRAINER_2_3,
    TRAINER_2_4,
    Profile,
    TrainerRules,
)

VISIBILITY = "visibility.kueue.x-k8s.io"
V1BETA1 = ("kueue.x-k8s.io/v1beta1", "visibility.kueue.x-k8s.io/v1beta1")


# ---- the option


def test_a_profile_names_a_release_per_project_and_the_default_is_todays_cluster() -> None:
    assert Profile() == Profile.parse("kueue=0.19,trainer=2.3") == Profile.of(None)
    assert Profile().withdrawn() == frozenset() and Profile().is_default
    later = Profile.parse(" trainer=2.4 , kueue=0.20 ")
    assert (later.kueue, later.trainer) == (KUEUE_0_20, TRAINER_2_4) and later.name == "kueue=0.20,trainer=2.4"
    assert later.withdrawn() == frozenset(V1BETA1)
    # One project named: the others keep the default.
    assert Profile.of({"kueue": "0.20"}) == Profile(kueue=KUEUE_0_20, trainer=TRAINER_2_3)
    assert Profile.parse("trainer=2.4").withdrawn() == frozenset()
    assert Profile.of(later) is later


def test_every_row_cites_its_source_and_says_how_far_it_was_checked() -> None:
    for versions in RELEASES.values():
        for release in versions.values():
            assert release.served and release.rows, release.name
            for row in release.rows:
                assert row.part and row.says and row.source and row.checked, (release.name, row)
    assert KUEUE_0_19.served[KUEUE] == ("v1beta2", "v1beta1") and KUEUE_0_20.served[KUEUE] == ("v1beta2",)
    assert KUEUE_0_20.gates["UnadmittedWorkloadsObservability"] is True
    assert KUEUE_0_19.gates["UnadmittedWorkloadsObservability"] is False


@pytest.mark.parametrize(("value", "said"), [
    ("kueue=0.21", "--profile 'kueue=0.21': no kueue 0.21 profile; kueue is one of 0.19, 0.20"),
    ("trainer=2.2", "no trainer 2.2 profile; trainer is one of 2.3, 2.4"),
    ("kueue", "--profile 'kueue': expected PROJECT=VERSION with PROJECT one of kueue, trainer, training-operator"),
    ("jobset=0.12", "expected PROJECT=VERSION"),
    ("kueue=0.19,kueue=0.20", "kueue is named twice"),
    (",", "empty; give PROJECT=VERSION pairs"),
])
def test_a_bad_profile_is_a_usage_error_naming_the_option_and_the_versions(
        value: str, said: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["serve", "--profile", value])
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and said in err and "Traceback" not in err
    with pytest.raises(ValueError, match="profile"):
        LocalCluster(profile=value)


def test_a_bad_profile_exits_2_from_the_command_line_without_a_traceback() -> None:
    done = subprocess.run([sys.executable, "-m", "airflow_tfjob.local.cli", "serve", "--profile", "kueue=0.21"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "--profile 'kueue=0.21': no kueue 0.21 profile; kueue is one of 0.19, 0.20" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_kueue_object_at_a_version_the_profile_does_not_serve_is_refused_before_start(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    flavor = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "ResourceFlavor", "metadata": {"name": "f"}}
    with pytest.raises(ValueError, match=r"apiVersion kueue.x-k8s.io/v1beta1 is not served by kueue 0.20 "
                                         r"\(profile kueue=0.20,trainer=2.3\); write it as kueue.x-k8s.io/v1beta2"):
        LocalCluster(workdir=tmp_path / "c", kueue={"objects": [flavor]}, profile="kueue=0.20")
    objects = tmp_path / "objects.yaml"
    objects.write_text(yaml.safe_dump(flavor))
    with pytest.raises(SystemExit) as exit_:
        main(["serve", "--kueue-objects", str(objects), "--profile", "kueue=0.20", "--workdir", str(tmp_path / "w")])
    assert exit_.value.code == 2 and "--kueue-objects" in capsys.readouterr().err
    # The default profile takes the same object (v1beta1 is served there).
    LocalCluster(workdir=tmp_path / "d", kueue={"objects": [flavor]}, controller=False, runner=False)


# ---- what a client sees


@pytest.fixture(scope="module", params=["kueue=0.19,trainer=2.3", "kueue=0.20,trainer=2.4"])
def kube(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Kube]:
    with LocalCluster(workdir=tmp_path_factory.mktemp("profile"), runner=False,
                      kueue={"objects": queue_objects(cluster_queue="cq", local_queue="lq")},
                      profile=request.param) as cluster:
        yield Kube.on(cluster)


def _get(kube: Kube, path: str) -> Any:
    return kube.api.call_api(path, "GET", response_types_map={200: "object"}, auth_settings=["BearerToken"],
                             _return_http_data_only=True)


def test_discovery_lists_the_kueue_versions_the_profile_serves(kube: Kube) -> None:
    profile = kube.cluster.runtime.profile
    groups = {g.name: g for g in client.ApisApi(kube.api).get_api_versions().groups}
    for group in (KUEUE, VISIBILITY):
        assert [v.version for v in groups[group].versions] == list(profile.kueue.served[group])
        assert groups[group].preferred_version.version == "v1beta2"
        assert [v["version"] for v in _get(kube, f"/apis/{group}")["versions"]] == list(profile.kueue.served[group])
    assert [r.name for r in kube.crd.get_api_resources(KUEUE, "v1beta2").resources][:2] == [
        "resourceflavors", "resourceflavors/status"]


def test_v1beta1_answers_only_where_the_profile_serves_it(kube: Kube) -> None:
    serves_v1beta1 = "v1beta1" in kube.cluster.runtime.profile.kueue.served[KUEUE]
    assert [c["metadata"]["name"] for c in
            kube.crd.list_cluster_custom_object(KUEUE, "v1beta2", "clusterqueues")["items"]] == ["cq"]
    wpc = {"apiVersion": "kueue.x-k8s.io/v1beta1", "kind": "WorkloadPriorityClass", "metadata": {"name": "p"},
           "value": 5}
    reads = [
        lambda: kube.crd.list_cluster_custom_object(KUEUE, "v1beta1", "clusterqueues"),
        lambda: kube.crd.get_cluster_custom_object(KUEUE, "v1beta1", "clusterqueues", "cq"),
        lambda: kube.crd.get_namespaced_custom_object(KUEUE, "v1beta1", "default", "localqueues", "lq"),
        lambda: kube.crd.list_cluster_custom_object(KUEUE, "v1beta1", "workloads", watch=True, timeout_seconds=1,
                                                    _preload_content=False),
        lambda: kube.crd.create_cluster_custom_object(KUEUE, "v1beta1", "workloadpriorityclasses", wpc),
        lambda: kube.crd.get_api_resources(KUEUE, "v1beta1"),
        lambda: _get(kube, f"/apis/{VISIBILITY}/v1beta1"),
        lambda: _get(kube, f"/apis/{VISIBILITY}/v1beta1/clusterqueues/cq/pendingworkloads"),
    ]
    for read in reads:
        if serves_v1beta1:
            answer = read()
            if hasattr(answer, "release_conn"):  # the watch's stream: hung up, not read
                answer.close()
                answer.release_conn()
        else:
            with pytest.raises(ApiException) as refused:
                read()
            assert refused.value.status == 404
            assert "the server could not find the requested resource" in str(refused.value.body)
    # The v1beta2 visibility API answers on both.
    assert _get(kube, f"/apis/{VISIBILITY}/v1beta2/clusterqueues/cq/pendingworkloads")["items"] == []
    assert kube.crd.get_cluster_custom_object(KUEUE, "v1beta2", "clusterqueues", "cq")["metadata"]["name"] == "cq"


def test_the_trainer_release_recorded_is_the_profiles(kube: Kube) -> None:
    recorded = client.CoreV1Api(kube.api).read_namespaced_config_map("kubeflow-trainer-public", "kubeflow-system")
    assert recorded.data == {"kubeflow_trainer_version": kube.cluster.runtime.profile.trainer.tag.removeprefix("v")}
    assert recorded.data["kubeflow_trainer_version"] in ("2.3.0", "2.4.0")


def test_serve_with_a_profile_serves_v1beta2_only(tmp_path: Path) -> None:
    proc, _url, kubeconfig = start_serve("--kubeconfig", str(tmp_path / "kc.yaml"), "--kueue",
                                         "--profile", "kueue=0.20,trainer=2.4")
    try:
        api = config.new_client_from_config(str(kubeconfig))
        groups = {g.name: [v.version for v in g.versions] for g in client.ApisApi(api).get_api_versions().groups}
        assert groups[KUEUE] == ["v1beta2"] and groups[VISIBILITY] == ["v1beta2"]
        with pytest.raises(ApiException) as refused:
            client.CustomObjectsApi(api).list_cluster_custom_object(KUEUE, "v1beta1", "resourceflavors")
        assert refused.value.status == 404
        version = client.CoreV1Api(api).read_namespaced_config_map("kubeflow-trainer-public", "kubeflow-system")
        assert version.data["kubeflow_trainer_version"] == "2.4.0"
        api.close()
    finally:
        code, _ = stop_serve(proc, signal.SIGTERM)
    assert code == 0


# ---- Trainer 2.4's rules (from its release notes as issue 38 quotes them; the source is not stored)

TRAINER = ("trainer.kubeflow.org", "v1alpha1")
LONG = "node-with-a-long-name"  # 21 characters


def test_the_trainer_24_rows_the_cluster_acts_on_say_their_source_is_the_release_notes() -> None:
    acted = [row for row in TRAINER_2_4.rows if row.emulated and row.source.startswith("kubeflow/trainer#")]
    assert [row.source.split()[0] for row in acted] == [
        "kubeflow/trainer#4394", "kubeflow/trainer#4301", "kubeflow/trainer#4029"]
    assert all(row.checked.startswith(RELEASE_NOTES_ONLY) for row in acted[:2])
    assert "issue 38's word" in acted[2].checked  # the PRTE row is read in its pull request, not the notes
    assert TRAINER_2_4.trainer_rules == TrainerRules(replicated_job_name_max=20, image_on_mpi_nodes=True,
                                                     prte_env=True)
    assert TRAINER_2_3.trainer_rules == TrainerRules()


def _runtime(name: str, rjob: str, *, validated: bool = True) -> dict[str, Any]:
    labels = {"trainer.kubeflow.org/framework": "torch"}
    if not validated:
        labels["trainer.kubeflow.org/webhook-validation"] = "disabled"
    return {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime",
            "metadata": {"name": name, "labels": labels},
            "spec": {"mlPolicy": {"numNodes": 1, "torch": {}}, "template": {"spec": {"replicatedJobs": [
                {"name": "n" * 20, "template": {"spec": {"template": {"spec": {"containers": [
                    {"name": "node", "image": "registry.invalid/n:1"}]}}}}},
                {"name": rjob, "template": {"metadata": {"labels": {
                    "trainer.kubeflow.org/trainjob-ancestor-step": "trainer"}},
                    "spec": {"template": {"spec": {"containers": [
                        {"name": "node", "image": "registry.invalid/t:1"}]}}}}}]}}}}


def test_a_replicated_job_name_over_20_characters_is_refused_by_the_24_runtime_webhook(kube: Kube) -> None:
    profile = kube.cluster.runtime.profile
    tag = profile.trainer.version.replace(".", "-")
    # 20 characters is the limit itself: taken on both.
    kube.crd.create_cluster_custom_object(*TRAINER, "clustertrainingruntimes", _runtime(f"fits-{tag}", "n" * 20))
    long = _runtime(f"long-{tag}", LONG)
    if profile.trainer is TRAINER_2_3:
        kube.crd.create_cluster_custom_object(*TRAINER, "clustertrainingruntimes", long)
        return
    with pytest.raises(ApiException) as refused:
        kube.crd.create_cluster_custom_object(*TRAINER, "clustertrainingruntimes", long)
    assert refused.value.status == 403
    assert json.loads(refused.value.body)["message"] == (
        'admission webhook "validator.clustertrainingruntime.trainer.kubeflow.org" denied the request: '
        f'spec.template.spec.replicatedJobs[1].name: Invalid value: "{LONG}": must be no more than 20 characters '
        "(21 given)")
    with pytest.raises(ApiException) as gone:
        kube.crd.get_cluster_custom_object(*TRAINER, "clustertrainingruntimes", f"long-{tag}")
    assert gone.value.status == 404
    # An update is refused as well; a runtime labelled out of the webhooks (the shipped ones are) is not
    # sent to them, on 2.4 as on 2.3.
    fits = kube.crd.get_cluster_custom_object(*TRAINER, "clustertrainingruntimes", f"fits-{tag}")
    fits["spec"]["template"]["spec"]["replicatedJobs"][1]["name"] = LONG
    with pytest.raises(ApiException) as update:
        kube.crd.replace_cluster_custom_object(*TRAINER, "clustertrainingruntimes", f"fits-{tag}", fits)
    assert update.value.status == 403 and LONG in str(update.value.body)
    kube.crd.create_cluster_custom_object(*TRAINER, "clustertrainingruntimes",
                                          _runtime(f"unchecked-{tag}", LONG, validated=False))
    namespaced = {**_runtime(f"ns-{tag}", LONG), "kind": "TrainingRuntime"}
    with pytest.raises(ApiException) as local:
        kube.crd.create_namespaced_custom_object(*TRAINER, "default", "trainingruntimes", namespaced)
    assert local.value.status == 403 and "validator.trainingruntime.trainer.kubeflow.org" in str(local.value.body)


def test_the_trainjobs_image_reaches_the_mpi_nodes_and_prte_env_the_launcher_on_24_only(kube: Kube) -> None:
    profile = kube.cluster.runtime.profile
    name = f"ds-{profile.trainer.version.replace('.', '-')}"
    image = "registry.invalid/team/deepspeed:1.0"
    # Suspended: the JobSet is built (and kept suspended), no MPI process is asked to start.
    kube.crd.create_namespaced_custom_object(*TRAINER, "default", "trainjobs", {
        "apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": name},
        "spec": {"runtimeRef": {"name": "deepspeed-distributed"}, "suspend": True,
                 "trainer": {"image": image, "numNodes": 2}}})
    jobsets = ("jobset.x-k8s.io", "v1alpha2", "default", "jobsets")
    found: list[dict[str, Any]] = []

    def built() -> bool:
        try:
            found[:] = [kube.crd.get_namespaced_custom_object(*jobsets, name)]
        except ApiException as exc:
            if exc.status != 404:
                raise
            return False
        return True

    until(built, f"the JobSet of {name}")
    images = {r["name"]: [c["image"] for c in r["template"]["spec"]["template"]["spec"]["containers"]]
              for r in found[0]["spec"]["replicatedJobs"]}
    shipped = "ghcr.io/kubeflow/trainer/deepspeed-runtime:v2.3.0"
    on_24 = profile.trainer is TRAINER_2_4
    assert images == {"launcher": [image], "node": [image if on_24 else shipped]}
    (launcher,) = [r for r in found[0]["spec"]["replicatedJobs"] if r["name"] == "launcher"]
    env = {e["name"]: e["value"] for e in launcher["template"]["spec"]["template"]["spec"]["containers"][0]["env"]
           if e["name"].startswith(("OMPI_MCA_", "PRTE_MCA_"))}
    orte = {"OMPI_MCA_orte_default_hostfile": "/etc/mpi/hostfile", "OMPI_MCA_orte_keep_fqdn_hostnames": "true",
            "OMPI_MCA_orte_set_default_slots": "1", "OMPI_MCA_plm_rsh_args": "-o ConnectionAttempts=10"}
    prte = {"PRTE_MCA_prte_default_hostfile": "/etc/mpi/hostfile", "PRTE_MCA_prte_keep_fqdn_hostnames": "false",
            "PRTE_MCA_prte_set_default_slots": "1", "PRTE_MCA_plm_ssh_args": "-o ConnectionAttempts=10"}
    assert list(env.items()) == list({**orte, **(prte if on_24 else {})}.items())
    # The PRTE names are reserved on 2.4 (a TrainJob may not set them), free on 2.3.
    own = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob", "metadata": {"name": f"{name}-env"},
           "spec": {"runtimeRef": {"name": "deepspeed-distributed"}, "suspend": True,
                    "trainer": {"env": [{"name": "PRTE_MCA_plm_ssh_args", "value": "-p 22"}]}}}
    if not on_24:
        kube.crd.create_namespaced_custom_object(*TRAINER, "default", "trainjobs", own)
        return
    with pytest.raises(ApiException) as refused:
        kube.crd.create_namespaced_custom_object(*TRAINER, "default", "trainjobs", own)
    assert refused.value.status == 403
    assert json.loads(refused.value.body)["message"] == (
        'admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request: spec.trainer.env: '
        "Invalid value: ...: must not have reserved envs, invalid envs configured: [PRTE_MCA_plm_ssh_args]")
