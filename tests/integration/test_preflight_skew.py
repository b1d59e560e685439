"""The preflight's verdict on the Kueue and the Trainer a cluster runs together, against local clusters
started with a version profile (`LocalCluster(profile=...)`): Kueue's line is read from the versions it
serves (0.20 serves kueue.x-k8s.io at v1beta2 only), Trainer's release from its install's ConfigMap. A
mismatched pair is MISSING with its fix (exit 1) for a TrainJob that asks for a queue, a warning without
one; a matching pair passes."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from cli_support import run_main
from kubernetes import client, config
from operator_support import TaskInstance, context_for

from airflow_tfjob.local import LocalCluster
from airflow_tfjob.local.kueue import queue_objects
from airflow_tfjob.operators.trainjob import TrainJobOperator
from airflow_tfjob.preflight.cli import main
from airflow_tfjob.preflight.needs import KUEUE_CONFIG, kueue_line, release_of
from airflow_tfjob.version_compat import AirflowException

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240)]

PREFLIGHT = Path(sys.executable).parent / "tfjob-preflight"
PART = "Kueue with Trainer"


def preflight(cluster: LocalCluster, *args: str, process: bool = False) -> subprocess.CompletedProcess[str]:
    """``tfjob-preflight`` for a TrainJob on torch-distributed: its main in this process as a new process
    would run it (tests/cli_support.py), or (``process``) the installed command itself."""
    argv = ["--kubeconfig", str(cluster.kubeconfig_path), "--kind", "TrainJob", "--runtime", "torch-distributed",
            *args]
    if process:
        return subprocess.run([str(PREFLIGHT), *argv], capture_output=True, text=True, timeout=120)
    return run_main(main, argv)


def verdict(done: subprocess.CompletedProcess[str]) -> str:
    lines = [line for line in done.stdout.splitlines() if line.startswith(PART)]
    assert len(lines) == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    return lines[0]


def record_trainer(cluster: LocalCluster, release: str) -> None:
    """What an install of another Trainer release leaves in kubeflow-system/kubeflow-trainer-public."""
    api = config.new_client_from_config(str(cluster.kubeconfig_path))
    try:
        client.CoreV1Api(api).patch_namespaced_config_map(
            "kubeflow-trainer-public", "kubeflow-system", {"data": {"kubeflow_trainer_version": release}})
    finally:
        api.close()


@pytest.fixture(scope="module", params=["kueue=0.19,trainer=2.3", "kueue=0.20,trainer=2.4"])
def cluster(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    with LocalCluster(workdir=tmp_path_factory.mktemp("skew"), runner=False, profile=request.param,
                      kueue={"objects": queue_objects(local_queue="lq")}) as started:
        yield started


def test_the_profiles_own_pair_fits(cluster: LocalCluster) -> None:
    record_trainer(cluster, cluster.runtime.profile.trainer.tag.removeprefix("v"))
    done = preflight(cluster, "--queue", "lq")
    line = verdict(done)
    assert done.returncode == 0, done.stdout
    assert "they fit" in line and line.split()[3] == "ok", line
    later = cluster.runtime.profile.kueue.version == "0.20"
    assert ("Kueue 0.20 or later (serves v1beta2, not v1beta1)" if later else "Kueue before 0.20") in line


def preflight_task_failure(cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch) -> str:
    """A TrainJobOperator with a queue and preflight=True run against the cluster: its failure's message;
    no TrainJob was created."""
    extra = {"kube_config_path": str(cluster.kubeconfig_path), "namespace": "default"}
    monkeypatch.setenv("AIRFLOW_CONN_KUBERNETES_DEFAULT", json.dumps({"conn_type": "kubernetes", "extra": extra}))
    op = TrainJobOperator(task_id="skewed", runtime="torch-distributed", image="python:3.12", command=["true"],
                          namespace="default", kueue_queue="lq", preflight=True)
    with pytest.raises(AirflowException) as raised:
        op.execute(context_for(TaskInstance(task_id="skewed")))
    api = config.new_client_from_config(str(cluster.kubeconfig_path))
    try:
        jobs = client.CustomObjectsApi(api).list_namespaced_custom_object(
            "trainer.kubeflow.org", "v1alpha1", "default", "trainjobs")["items"]
    finally:
        api.close()
    assert jobs == [], [j["metadata"]["name"] for j in jobs]
    return str(raised.value)


def test_a_trainer_too_old_for_the_kueue_is_missing_with_its_fix(
    cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    later = cluster.runtime.profile.kueue.version == "0.20"
    # Kueue 0.20 wants Trainer 2.3; every Kueue line needs 2.2 (runtimePatches).
    old, needed = ("2.2.0", "2.3") if later else ("2.1.0", "2.2")
    record_trainer(cluster, old)
    try:
        # The status a shell sees, from the installed command, once (a process importing Airflow costs
        # seconds); the other profile's pair in this process.
        queued = preflight(cluster, "--queue", "lq", process=later)
        line = verdict(queued)
        assert queued.returncode == 1, queued.stdout
        assert "MISSING" in line and f"Trainer {needed}+ for this Kueue, found {old[:3]}" in line
        assert f"upgrade Trainer to {needed} or later: kubectl apply" in line
        assert ("kubernetes-sigs/kueue#14504" if later else "kubernetes-sigs/kueue#11931") in line
        # Without a queue the integration admits nothing of these jobs: a warning, the job can run.
        unqueued = preflight(cluster)
        assert unqueued.returncode == 0, unqueued.stdout
        assert "warning" in verdict(unqueued)
        # preflight=True: the task fails before creating anything, with the same verdict and fix.
        message = preflight_task_failure(cluster, monkeypatch)
        assert f"Trainer {needed}+ for this Kueue, found {old[:3]}" in message
        assert f"upgrade Trainer to {needed} or later" in message
    finally:
        record_trainer(cluster, cluster.runtime.profile.trainer.tag.removeprefix("v"))


def test_a_trainer_of_no_known_release_is_a_warning(cluster: LocalCluster) -> None:
    record_trainer(cluster, "main")
    try:
        done = preflight(cluster, "--queue", "lq")
        line = verdict(done)
        assert done.returncode == 0 and "warning" in line and "unknown release" in line, done.stdout
    finally:
        record_trainer(cluster, cluster.runtime.profile.trainer.tag.removeprefix("v"))


def test_a_v1_kind_behind_kueue_names_why_its_integration_is_off(cluster: LocalCluster) -> None:
    done = run_main(main, ["--kubeconfig", str(cluster.kubeconfig_path), "--kind", "TFJob", "--queue", "lq"])
    assert done.returncode == 1, done.stdout + done.stderr
    line = next(x for x in done.stdout.splitlines() if x.startswith("Kueue integration kubeflow.org/tfjob"))
    assert "MISSING" in line and "off by default from Kueue 0.19 (kubernetes-sigs/kueue#12606)" in line
    assert "integrations.frameworks" in line
    assert PART not in done.stdout  # no TrainJob: the pair is not asked about


LONG = "node-with-a-long-name"  # 21 characters: one over Trainer 2.4's limit (kubeflow/trainer#4394)


def long_named_runtime(cluster: LocalCluster, name: str, *, validated: bool = True) -> None:
    """A copy of torch-distributed whose node ReplicatedJob is named LONG, sent to the runtime webhook
    (`validated`: without the shipped runtimes' `webhook-validation: disabled` label) or not."""
    api = config.new_client_from_config(str(cluster.kubeconfig_path))
    try:
        objects = client.CustomObjectsApi(api)
        args = ("trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes")
        runtime = objects.get_cluster_custom_object(*args, "torch-distributed")
        for rjob in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
            rjob["name"] = LONG if rjob["name"] == "node" else rjob["name"]
        labels = dict(runtime["metadata"].get("labels") or {})
        if validated:
            labels.pop("trainer.kubeflow.org/webhook-validation", None)
        runtime["metadata"] = {"name": name, "labels": labels}
        objects.create_cluster_custom_object(*args, runtime)
    finally:
        api.close()


def test_a_runtimes_replicated_job_name_over_20_characters_is_named_with_its_fix(cluster: LocalCluster) -> None:
    """The preflight agrees with the cluster. On Trainer 2.3 the runtime is created and the preflight warns
    that 2.4 will refuse it (exit 0); on 2.4 the runtime webhook refuses it at create time, and one that is
    there all the same (kept from before the upgrade; here: labelled out of the webhook) is MISSING
    (exit 1). The runtime the profiles install passes on both: its names fit."""
    record_trainer(cluster, cluster.runtime.profile.trainer.tag.removeprefix("v"))
    on_24 = cluster.runtime.profile.trainer.version == "2.4"
    runtime = f"long-{cluster.runtime.profile.trainer.version.replace('.', '-')}"
    if on_24:
        with pytest.raises(client.ApiException) as refused:
            long_named_runtime(cluster, runtime)
        assert refused.value.status == 403, refused.value.body
        assert (f'spec.template.spec.replicatedJobs[0].name: Invalid value: "{LONG}": must be no more than 20 '
                "characters") in json.loads(refused.value.body)["message"]
    long_named_runtime(cluster, runtime, validated=not on_24)
    done = run_main(main, ["--kubeconfig", str(cluster.kubeconfig_path), "--kind", "TrainJob", "--runtime", runtime])
    (line,) = [x for x in done.stdout.splitlines() if "ReplicatedJob names" in x]
    assert line.startswith(f"ClusterTrainingRuntime {runtime}: ReplicatedJob names"), line
    assert f"{LONG} (21) over 20 characters" in line and "kubeflow/trainer#4394" in line
    assert f"rename {LONG} to at most 20 characters in ClusterTrainingRuntime {runtime}" in line
    if on_24:
        assert (done.returncode, line.split()[4]) == (1, "MISSING"), done.stdout
        assert "Trainer 2.4+ refuses ReplicatedJob names over 20 characters" in line
    else:
        assert (done.returncode, line.split()[4]) == (0, "warning"), done.stdout
        assert "will be refused after upgrading to Trainer 2.4" in line
    fits = run_main(main, ["--kubeconfig", str(cluster.kubeconfig_path), "--kind", "TrainJob",
                           "--runtime", "torch-distributed"])
    assert "ReplicatedJob names" not in fits.stdout and fits.returncode == 0, fits.stdout
    assert "without a queue" not in fits.stdout  # Kueue does not manage jobs without a queue name by default


def test_release_and_line_reading() -> None:
    assert release_of("2.3.0") == (2, 3) and release_of("v2.10.1") == (2, 10)
    assert release_of("main") is None and release_of(None) is None and release_of("2") is None
    assert kueue_line(["v1beta2", "v1beta1"]).startswith("Kueue before 0.20")
    assert kueue_line(["v1beta2"]).startswith("Kueue 0.20 or later")


# -- Kueue's configuration, as the preflight reads it ------------------------------------------------


@contextlib.contextmanager
def kueue_config(cluster: LocalCluster, change: Callable[[dict[str, Any]], None]) -> Iterator[None]:
    """Kueue's configuration (kueue-system/kueue-manager-config) changed as an admin edits it, put back
    after. The local Kueue keeps running with its own options (a real one reads the file at its restart):
    what is asked here is the preflight's reading of the file."""
    namespace, name, key = KUEUE_CONFIG
    api = config.new_client_from_config(str(cluster.kubeconfig_path))
    core = client.CoreV1Api(api)
    try:
        before = core.read_namespaced_config_map(name, namespace).data[key]
        changed = yaml.safe_load(before)
        change(changed)
        core.patch_namespaced_config_map(name, namespace, {"data": {key: yaml.safe_dump(changed)}})
        try:
            yield
        finally:
            core.patch_namespaced_config_map(name, namespace, {"data": {key: before}})
    finally:
        api.close()


def run(cluster: LocalCluster, *args: str) -> subprocess.CompletedProcess[str]:
    return run_main(main, ["--kubeconfig", str(cluster.kubeconfig_path), *args])


def row(done: subprocess.CompletedProcess[str], part: str) -> str:
    (line,) = [x for x in done.stdout.splitlines() if x.startswith(part)]
    return line


def test_a_v1_kind_whose_integration_is_on_passes(cluster: LocalCluster) -> None:
    """The matching pair of the row above: with kubeflow.org/tfjob in integrations.frameworks, a TFJob
    with a queue passes on either Kueue."""
    def enable(changed: dict[str, Any]) -> None:
        changed["integrations"]["frameworks"].append("kubeflow.org/tfjob")

    with kueue_config(cluster, enable):
        done = run(cluster, "--kind", "TFJob", "--queue", "lq")
    assert done.returncode == 0, done.stdout + done.stderr
    assert row(done, "Kueue integration kubeflow.org/tfjob").split()[3:5] == ["ok", "on"]


def test_a_job_without_a_queue_where_kueue_manages_every_job_needs_the_default_local_queue(
    cluster: LocalCluster,
) -> None:
    """manageJobsWithoutQueueName: Kueue suspends a TrainJob without a queue and queues it in LocalQueue
    `default`: none there is MISSING with the fix (exit 1); with one, or in a namespace the selector leaves
    out, it passes; with the option off (the default) there is no row."""
    part = "Kueue for TrainJob without a queue"  # no row with the option off: the long-name test's `fits`

    def manage(changed: dict[str, Any]) -> None:
        changed["manageJobsWithoutQueueName"] = True

    with kueue_config(cluster, manage):
        done = run(cluster, "--kind", "TrainJob", "--runtime", "torch-distributed")
        line = row(done, part)
        assert done.returncode == 1 and "MISSING" in line, done.stdout
        assert "never admits it" in line and "create LocalQueue 'default' in default" in line
        api = config.new_client_from_config(str(cluster.kubeconfig_path))
        objects = client.CustomObjectsApi(api)
        lq = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue", "metadata": {"name": "default"},
              "spec": {"clusterQueue": "cq"}}
        objects.create_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", "default", "localqueues", lq)
        try:
            queued = run(cluster, "--kind", "TrainJob", "--runtime", "torch-distributed")
        finally:
            objects.delete_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", "default", "localqueues", "default")
            api.close()
        assert queued.returncode == 0 and "queued in LocalQueue 'default' of default" in row(queued, part)

    def leave_out(changed: dict[str, Any]) -> None:
        manage(changed)
        changed["managedJobsNamespaceSelector"] = {"matchLabels": {"team": "ml"}}

    with kueue_config(cluster, leave_out):
        outside = run(cluster, "--kind", "TrainJob", "--runtime", "torch-distributed")
    assert outside.returncode == 0 and "default is not a managed namespace" in row(outside, part), outside.stdout
