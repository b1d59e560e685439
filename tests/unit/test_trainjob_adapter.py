"""The TrainJob adapter (airflow_tfjob/jobs/trainjob/), on objects shaped exactly as
docs/reference/trainjob-behaviour.md shows them: status (§6.2, §6.6, §7), pod naming (§5.3), the
manifest and its validation (§1.1, §2.2, §5.6), the TFJob mapping and its refusals (§10), TF_CONFIG
computed by the launcher in a real `python3` process, the shipped runtimes (§1.2, §2.3) and discovery.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from airflow_tfjob.build.checker import JobValidationError
from airflow_tfjob.build.manifest import build_job
from airflow_tfjob.follow.logs_parsing import pod_replica, replica_name
from airflow_tfjob.jobs.adapter import adapter_for
from airflow_tfjob.jobs.kinds import TFJOB, TRAINJOB, kind_named, kind_of
from airflow_tfjob.jobs.status import JobState, interpret
from airflow_tfjob.jobs.trainjob import pods, tfconfig
from airflow_tfjob.jobs.trainjob.discovery import NoTrainingApi, choose_api
from airflow_tfjob.jobs.trainjob.from_tfjob import to_trainjob
from airflow_tfjob.jobs.trainjob.manifest import build_trainjob
from airflow_tfjob.jobs.trainjob.runtimes import NAMES, load_runtimes
from airflow_tfjob.jobs.trainjob.status import trainer_progress
from airflow_tfjob.jobs.trainjob.validation import max_name_length, validate_trainjob


def trainjob(status: dict[str, Any] | None = None, **meta: Any) -> dict[str, Any]:
    job: dict[str, Any] = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "mnist", "namespace": "ml", "creationTimestamp": "2026-01-01T00:00:00Z", **meta},
        "spec": {"runtimeRef": {"name": "torch-distributed"}, "trainer": {"numNodes": 2}},
    }
    if status is not None:
        job["status"] = status
    return job


def node_status(**counts: int) -> dict[str, int]:
    return {"name": "node", "ready": 0, "succeeded": 0, "failed": 0, "active": 0, "suspended": 0, **counts}


# ------------------------------------------------------------------------------------------ status


def test_the_kind_row_is_found_by_name_and_manifest() -> None:
    assert kind_named("TrainJob") is TRAINJOB and kind_named("trainjobs") is TRAINJOB
    assert kind_of(trainjob()) is TRAINJOB
    assert TRAINJOB.api_version == "trainer.kubeflow.org/v1alpha1"


def test_no_status_is_created_and_an_active_job_is_running() -> None:
    assert interpret(trainjob()).state is JobState.CREATED
    running = interpret(trainjob({"jobsStatus": [node_status(ready=1, active=1)]}))
    assert running.state is JobState.RUNNING
    assert running.replica_statuses == {"node": {"active": 1, "succeeded": 0, "failed": 0}}
    assert running.start_time == "2026-01-01T00:00:00Z" and running.completion_time is None


def test_complete_is_succeeded_with_the_jobsets_reason_and_time() -> None:
    status = interpret(trainjob({
        "conditions": [{"type": "Complete", "status": "True", "reason": "AllJobsCompleted",
                        "message": "jobset completed successfully", "lastTransitionTime": "2026-01-01T00:05:00Z"}],
        "jobsStatus": [node_status(succeeded=1)],
    }))  # fmt: skip
    assert (status.state, status.reason, status.completion_time) == (
        JobState.SUCCEEDED, "AllJobsCompleted", "2026-01-01T00:05:00Z"
    )
    assert status.finished


def test_failed_names_the_first_failed_job_as_the_logs_name_its_replicas() -> None:
    message = "jobset failed due to one or more job failures (first failed job: mnist-node-0)"
    status = interpret(trainjob({
        "conditions": [{"type": "Failed", "status": "True", "reason": "FailedJobs", "message": message}],
        "jobsStatus": [node_status(failed=1)],
    }))  # fmt: skip
    assert status.state is JobState.FAILED and status.reason == "FailedJobs"
    assert status.failed_replica_types == ("node-0",)
    deadline = interpret(trainjob({"conditions": [
        {"type": "Failed", "status": "True", "reason": "DeadlineExceeded", "message": "TrainJob exceeded its active deadline"}
    ]}))  # fmt: skip
    assert (deadline.state, deadline.reason) == (JobState.FAILED, "DeadlineExceeded")


def test_suspended_and_resumed() -> None:
    suspended = {"type": "Suspended", "status": "True", "reason": "Suspended", "message": "TrainJob is suspended"}
    assert interpret(trainjob({"conditions": [suspended]})).state is JobState.SUSPENDED
    resumed = {**suspended, "status": "False", "reason": "Resumed", "lastTransitionTime": "2026-01-01T00:09:00Z"}
    status = interpret(trainjob({"conditions": [resumed], "jobsStatus": [node_status(active=1)]}))
    assert status.state is JobState.RUNNING
    assert status.start_time == "2026-01-01T00:09:00Z"  # the deadline clock restarts at the resume too


def pod(phase: str, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "mnist-node-0-0-x"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:10:00Z"
    return {"metadata": meta, "status": {"phase": phase}}


def test_a_kueue_managed_trainjob_whose_pods_run_is_running_before_its_jobs_status_says_so() -> None:
    """Resumed by Kueue (Suspended=False/Resumed), no Running condition, jobsStatus not yet counting the
    active Job (it follows the JobSet's status): the running pods say it runs (kubeflow/sdk#803)."""
    adapter = adapter_for(TRAINJOB)
    resumed = {"type": "Suspended", "status": "False", "reason": "Resumed", "message": "TrainJob is resumed"}
    job = trainjob({"conditions": [resumed], "jobsStatus": [node_status(suspended=1)]})
    created = interpret(job)
    assert created.state is JobState.CREATED
    assert adapter.with_pods(created, [pod("Running")]).state is JobState.RUNNING
    assert adapter.with_pods(created, [pod("Pending")]).state is JobState.CREATED
    assert adapter.with_pods(created, [pod("Running", deleting=True)]).state is JobState.CREATED
    # A suspended job's pods (being deleted, or not yet) do not make it run; nor does v1 read pods.
    suspended = interpret(trainjob({"conditions": [{**resumed, "status": "True", "reason": "Suspended"}]}))
    assert adapter.with_pods(suspended, [pod("Running")]).state is JobState.SUSPENDED
    assert adapter_for(TFJOB).with_pods(created, [pod("Running")]) is created


def test_the_progress_status_is_read_when_filled() -> None:
    assert trainer_progress(trainjob({"jobsStatus": []})) is None
    filled = trainjob({"trainerStatus": {
        "progressPercentage": 40, "estimatedRemainingSeconds": 120,
        "metrics": [{"name": "loss", "value": "0.23"}, {"name": "phase", "value": "warmup"}],
        "lastUpdatedTime": "2026-01-01T00:02:00Z",
    }})  # fmt: skip
    assert trainer_progress(filled) == {
        "percentage": 40, "remaining_seconds": 120, "metrics": {"loss": 0.23, "phase": "warmup"},
        "updated": "2026-01-01T00:02:00Z",
    }  # fmt: skip


# ------------------------------------------------------------------------------------------ pods


def jobset_pod(rjob: str, index: int) -> dict[str, Any]:
    return {"metadata": {"name": f"mnist-{rjob}-0-{index}-x7k2p", "labels": {
        "jobset.sigs.k8s.io/jobset-name": "mnist", "jobset.sigs.k8s.io/replicatedjob-name": rjob,
        "jobset.sigs.k8s.io/job-index": "0", "batch.kubernetes.io/job-completion-index": str(index),
    }}}  # fmt: skip


def test_a_jobset_pod_is_named_by_its_stable_dns_name() -> None:
    ident = pod_replica(jobset_pod("node", 1))
    assert ident == ("node-0", 1) and replica_name(*ident) == "node-0-1"
    assert pod_replica({"metadata": {"labels": {}}}) is None
    assert pods.rank0(trainjob()) == ("node-0", 0)
    assert pods.rank0(trainjob(annotations={pods.ANNOTATION_RANK0: "chief-0-0"})) == ("chief-0", 0)
    assert pods.expected_pods(trainjob()) == 2
    assert pods.pod_dns_name("mnist", "node", 1) == "mnist-node-0-1.mnist"


# ------------------------------------------------------------------------------------------ manifest


def test_parameters_build_the_trainjob() -> None:
    manifest = build_trainjob(
        name="digits", runtime="torch-distributed", image="python:3.12", command="python train.py",
        args=["--data=/d"], hyperparameters={"epochs": 3}, env={"A": 1}, secret_env={"TOKEN": "t"},
        num_nodes=2, resources_per_node={"limits": {"cpu": "2"}}, num_proc_per_node=1,
        dataset_storage_uri="hf://tatsu-lab/alpaca", runtime_patches=[{"trainingRuntimeSpec": {}}],
        suspend=True, active_deadline_seconds=600, managed_by="kueue.x-k8s.io/multikueue", labels={"team": "a"},
    )  # fmt: skip
    assert manifest["spec"] == {
        "runtimeRef": {"name": "torch-distributed", "kind": "ClusterTrainingRuntime", "apiGroup": "trainer.kubeflow.org"},
        "trainer": {
            "image": "python:3.12", "command": ["python", "train.py"], "args": ["--data=/d", "--epochs=3"],
            "env": [{"name": "A", "value": "1"}, {"name": "TOKEN", "value": "t"}],
            "numNodes": 2, "resourcesPerNode": {"limits": {"cpu": "2"}}, "numProcPerNode": 1,
        },
        "initializer": {"dataset": {"storageUri": "hf://tatsu-lab/alpaca"}},
        "runtimePatches": [{"manager": "airflow.apache.org/tfjob-provider", "trainingRuntimeSpec": {}}],
        "suspend": True, "activeDeadlineSeconds": 600, "managedBy": "kueue.x-k8s.io/multikueue",
    }  # fmt: skip
    assert manifest["metadata"]["labels"] == {"team": "a"}
    assert json.loads(manifest["metadata"]["annotations"]["tfjob.airflow.apache.org/secret-env"]) == ["TOKEN"]
    assert validate_trainjob(manifest) == []


def test_every_problem_is_named_by_its_parameter_with_a_fix() -> None:
    bad = build_trainjob(
        name="x" * 50, num_nodes=0, env={"PET_NNODES": "3"}, runtime="torch-distributed", managed_by="me",
        active_deadline_seconds=0, dataset_storage_uri="no-scheme", runtime_kind="Runtime",
    )  # fmt: skip
    with pytest.raises(JobValidationError) as raised:
        validate_trainjob(bad)
    fields = [p.field for p in raised.value.problems]
    assert fields == [
        "name", "runtime_kind", "num_nodes", "env", "dataset_storage_uri", "active_deadline_seconds", "managed_by",
    ]  # fmt: skip
    assert all(p.fix for p in raised.value.problems)
    with pytest.raises(JobValidationError, match="runtime: is missing"):
        validate_trainjob(build_trainjob(name="ok"))


def test_name_limits_follow_jobsets_generated_pod_names() -> None:
    assert max_name_length(2) == 48 and max_name_length(100) == 47
    assert max_name_length(1, "dataset-initializer") == 33


# ------------------------------------------------------------------------------------------ TFJob -> TrainJob


def tfjob(**params: Any) -> dict[str, Any]:
    manifest = build_job(TFJOB, **{"image": "tf:1", "command": ["python", "train.py"], **params})
    manifest["metadata"] = {**manifest.get("metadata", {}), "name": "digits", "namespace": "ml"}
    return manifest


def test_a_worker_only_tfjob_runs_on_the_tensorflow_distributed_runtime() -> None:
    manifest = to_trainjob(tfjob(replicas={"Worker": 2}, args=["--x=1"], env={"A": "1"}, working_dir="/w",
                                 pvc="data:/data", clean_pod_policy="Running", active_deadline_seconds=60))
    spec = manifest["spec"]
    assert spec["runtimeRef"]["name"] == "tensorflow-distributed"
    trainer = spec["trainer"]
    assert trainer["numNodes"] == 2 and trainer["image"] == "tf:1"
    assert trainer["command"] == ["python3", "-c", tfconfig.LAUNCHER, "python", "train.py"]
    assert trainer["args"] == ["--x=1"]
    env = {e["name"]: e["value"] for e in trainer["env"]}
    assert json.loads(env["TFJOB_TF_CLUSTER"]) == {"worker": ["digits-node-0-0.digits:2222", "digits-node-0-1.digits:2222"]}
    assert env["TFJOB_TF_TASK_TYPE"] == "worker" and env["TFJOB_TF_WORKING_DIR"] == "/w" and env["A"] == "1"
    (patch,) = spec["runtimePatches"]
    (node,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    pod = node["template"]["spec"]["template"]["spec"]
    assert pod["volumes"][0]["persistentVolumeClaim"]["claimName"] == "data"
    assert pod["containers"] == [{"name": "node", "volumeMounts": [{"name": pod["volumes"][0]["name"], "mountPath": "/data"}]}]
    assert spec["activeDeadlineSeconds"] == 60
    assert manifest["metadata"]["annotations"]["tfjob.airflow.apache.org/clean-pod-policy"] == "Running"
    assert validate_trainjob(manifest) == []


def test_a_tfjob_run_as_a_trainjob_reports_its_replicas_as_the_tfjob_would() -> None:
    manifest = to_trainjob(tfjob(replicas={"Chief": 1, "Worker": 2}))
    assert json.loads(manifest["metadata"]["annotations"][pods.ANNOTATION_TF_REPLICAS]) == {
        "Chief": ["chief", 1], "Worker": ["node", 2],
    }  # fmt: skip
    done = {**manifest, "status": {
        "conditions": [{"type": "Complete", "status": "True", "reason": "AllJobsCompleted"}],
        "jobsStatus": [node_status(succeeded=1), {**node_status(succeeded=1), "name": "chief"}],
    }}  # fmt: skip
    assert pods.tf_type(manifest, "node-0") == "worker" and pods.tf_type(manifest, "chief-0") == "chief"
    assert pods.tf_type(trainjob(), "node-0") == "node-0"
    assert interpret(done).replica_statuses == {
        "Chief": {"active": 0, "succeeded": 1, "failed": 0}, "Worker": {"active": 0, "succeeded": 2, "failed": 0},
    }  # fmt: skip


def test_chief_and_ps_run_the_launcher_in_their_own_replicated_jobs() -> None:
    from airflow_tfjob.build.secrets import redact

    manifest = to_trainjob(tfjob(replicas={"Chief": 1, "PS": 1, "Worker": 2}, secret_env={"TOKEN": "s3cr3t"}))
    assert "s3cr3t" in json.dumps(manifest) and "s3cr3t" not in json.dumps(redact(manifest))
    assert manifest["spec"]["runtimeRef"]["name"] == "tensorflow-ps"
    assert manifest["metadata"]["annotations"][pods.ANNOTATION_RANK0] == "chief-0-0"
    rjobs = manifest["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert [r["name"] for r in rjobs] == ["chief", "ps"]
    env = {e["name"]: e["value"] for e in rjobs[1]["template"]["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["TFJOB_TF_TASK_TYPE"] == "ps" and json.loads(env["TFJOB_TF_COMMAND"]) == ["python", "train.py"]
    assert json.loads(env["TFJOB_TF_CLUSTER"]) == tfconfig.cluster("digits", {"chief": 1, "ps": 1, "worker": 2})


@pytest.mark.parametrize(
    ("params", "field", "words"),
    [
        ({"replicas": {"Worker": 2, "Evaluator": 1}}, "evaluator", "Evaluator replicas (Worker=2, Evaluator=1)"),
        ({"replicas": {"Master": 1, "Worker": 1}}, "master", "use chief=1 instead of master"),
        ({"replicas": {"PS": 1, "Worker": 2}}, "ps", "PS without a Chief"),
        ({"replicas": {"Chief": 1, "PS": 2, "Worker": 2}}, "ps", "2 PS replicas"),
        ({"replicas": {"Chief": 1, "Worker": 2}, "images": {"Chief": "other:1"}}, "images (Chief)", "differs"),
        ({"replicas": {"Worker": 2}, "backoff_limit": 3}, "backoff_limit", "runtime's"),
        ({"replicas": {"Worker": 2}, "ttl_seconds_after_finished": 60}, "ttl_seconds_after_finished", "no TTL"),
        ({"replicas": {"Worker": 2}, "env_from": ["secret:s"]}, "env_from", "envFrom"),
    ],
)
def test_what_cannot_be_mapped_is_refused_naming_it(params: dict[str, Any], field: str, words: str) -> None:
    with pytest.raises(JobValidationError) as raised:
        to_trainjob(tfjob(**params))
    problem = next(p for p in raised.value.problems if p.field == field)
    assert words in problem.problem + problem.fix
    assert problem.fix


def test_the_launcher_writes_each_tasks_tf_config_in_a_plain_python(tmp_path: Any) -> None:
    cluster = tfconfig.cluster_env("digits", {"worker": 2})
    show = "import json, os, sys; print(json.dumps([os.environ['TF_CONFIG'], os.getcwd(), sys.argv[1:]]))"
    env = {**os.environ, "TFJOB_TF_CLUSTER": cluster, "TFJOB_TF_TASK_TYPE": "worker", "JOB_COMPLETION_INDEX": "1",
           "TFJOB_TF_WORKING_DIR": str(tmp_path)}  # fmt: skip
    out = subprocess.run(
        [sys.executable, "-c", tfconfig.LAUNCHER, sys.executable, "-c", show, "--epochs=2"],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    tf_config, cwd, argv = json.loads(out.stdout)
    assert json.loads(tf_config) == tfconfig.tf_config("digits", {"worker": 2}, "worker", 1)
    assert cwd == str(tmp_path) and argv == ["--epochs=2"]
    # Chief and PS: the command comes from the env, the launcher from the runtime's `exec`.
    env |= {"TFJOB_TF_COMMAND": json.dumps([sys.executable, "-c", show]), "TFJOB_TF_LAUNCHER": tfconfig.LAUNCHER,
            "TFJOB_TF_TASK_TYPE": "chief", "JOB_COMPLETION_INDEX": "0"}  # fmt: skip
    out = subprocess.run([sys.executable, "-c", "import os; exec(os.environ['TFJOB_TF_LAUNCHER'])"],
                         env=env, capture_output=True, text=True, check=True)  # fmt: skip
    assert json.loads(json.loads(out.stdout)[0])["task"] == {"type": "chief", "index": 0}


# ------------------------------------------------------------------------------------------ runtimes, discovery


def test_the_shipped_runtimes_have_the_shape_trainer_validates() -> None:
    runtimes = load_runtimes(image="me/tf:2")
    assert [r["metadata"]["name"] for r in runtimes] == list(NAMES)
    for runtime in runtimes:
        assert runtime["metadata"]["labels"]["trainer.kubeflow.org/framework"] == "tensorflow"
        rjobs = runtime["spec"]["template"]["spec"]["replicatedJobs"]
        trainers = [r for r in rjobs if (r["template"].get("metadata") or {}).get("labels", {}).get(
            "trainer.kubeflow.org/trainjob-ancestor-step") == "trainer"]  # fmt: skip
        assert [r["name"] for r in trainers] == ["node"]
        node = trainers[0]["template"]["spec"]["template"]["spec"]["containers"][0]
        assert node["name"] == "node" and node["image"] == "me/tf:2"
        for rjob in rjobs:
            assert rjob["template"]["spec"]["template"]["spec"]["restartPolicy"] == "Never"
            for container in rjob["template"]["spec"]["template"]["spec"]["containers"]:
                if rjob["name"] != "node":
                    assert container["name"] == "tensorflow"


class FakeDiscovery:
    def __init__(self, served: dict[str, set[str]]) -> None:
        self.served = served

    def served_resources(self, group_version: str) -> set[str] | None:
        return self.served.get(group_version)


def test_auto_prefers_tfjob_where_served_else_trainjob_else_an_error() -> None:
    both = {"kubeflow.org/v1": {"tfjobs", "pytorchjobs"}, "trainer.kubeflow.org/v1alpha1": {"trainjobs"}}
    assert choose_api(FakeDiscovery(both)) == "tfjob"
    assert choose_api(FakeDiscovery({"trainer.kubeflow.org/v1alpha1": {"trainjobs"}})) == "trainjob"
    assert choose_api(FakeDiscovery({"kubeflow.org/v1": {"pytorchjobs"}, "trainer.kubeflow.org/v1alpha1": {"trainjobs"}})) == "trainjob"
    with pytest.raises(NoTrainingApi, match=r"neither kubeflow\.org/v1 tfjobs"):
        choose_api(FakeDiscovery({}))
