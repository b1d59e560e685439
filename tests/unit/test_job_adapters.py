"""The job-API adapters at their own level (airflow_tfjob/jobs/): the registry, then each answer of the
v1 kinds' adapter and Trainer v2's on plain objects (status, replica of a pod, rank 0, expected pods,
the summary's layout, result extras, name limits, the manifest steps). The objects are the ones
test_status.py and test_trainjob_adapter.py read, so both levels agree on the same inputs."""

from __future__ import annotations

from typing import Any

import pytest
from test_status import cond
from test_status import job as tfjob
from test_trainjob_adapter import jobset_pod, node_status, trainjob

from airflow_tfjob.build.checker import JobValidationError
from airflow_tfjob.jobs import adapter as registry
from airflow_tfjob.jobs import kinds
from airflow_tfjob.jobs.adapter import JobAdapter, ResultExtras, adapter_for, adapter_of, pod_replica
from airflow_tfjob.jobs.kinds import (
    ALL_KINDS,
    JAXJOB,
    KINDS,
    PADDLEJOB,
    PYTORCHJOB,
    TFJOB,
    TRAINJOB,
    XGBOOSTJOB,
)
from airflow_tfjob.jobs.status import JobState
from airflow_tfjob.jobs.trainjob import pods
from airflow_tfjob.jobs.trainjob.adapter import TrainJobAdapter
from airflow_tfjob.jobs.trainjob.pods import ANNOTATION_RANK0, ANNOTATION_TF_REPLICAS
from airflow_tfjob.jobs.v1 import V1Adapter

#: Every method the core may ask (the interface's), so that both adapters are held to all of them.
# Every method of the interface, whichever phase Protocol declares it (jobs/adapter.py).
INTERFACE = sorted(
    name for name in dir(JobAdapter) if not name.startswith("_") and callable(getattr(JobAdapter, name))
)


def v1_pod(rtype: str, index: int, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": f"mnist-{rtype}-{index}", "labels": {
        "training.kubeflow.org/job-name": "mnist", "training.kubeflow.org/replica-type": rtype,
        "training.kubeflow.org/replica-index": str(index), **labels,
    }}}  # fmt: skip


def pytorchjob(specs: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "p", "namespace": "ml"},
            "spec": {"pytorchReplicaSpecs": specs}}  # fmt: skip


# ------------------------------------------------------------------------------------------ registry


def test_each_kind_row_names_its_api_and_gets_that_apis_adapter() -> None:
    assert {k.api for k in KINDS} == {"kubeflow.org/v1"} and TRAINJOB.api == "trainer.kubeflow.org"
    for kind in KINDS:
        made = adapter_for(kind)
        assert isinstance(made, V1Adapter) and made.kind is kind
    assert isinstance(adapter_for(TRAINJOB), TrainJobAdapter) and adapter_for(TRAINJOB).kind is TRAINJOB
    assert adapter_for("pytorchjobs") is adapter_for(
        PYTORCHJOB
    )  # any name the kind table takes, one instance
    assert set(registry.ADAPTER_MODULES) == {k.api for k in ALL_KINDS}


@pytest.mark.parametrize("kind", ALL_KINDS, ids=lambda k: k.kind)
def test_every_adapter_answers_the_whole_interface(kind: kinds.JobKind) -> None:
    made = adapter_for(kind)
    assert INTERFACE and all(callable(getattr(made, name, None)) for name in INTERFACE)


def test_an_object_finds_its_adapter_and_an_odd_one_reads_as_the_default_kinds() -> None:
    assert adapter_of(trainjob()).kind is TRAINJOB
    assert adapter_of(pytorchjob({})).kind is PYTORCHJOB
    assert adapter_of({"kind": "MPIJob"}).kind is kinds.DEFAULT_KIND is TFJOB
    assert adapter_of({}).kind is TFJOB  # templates written before other kinds name none


def test_an_api_without_an_adapter_is_named() -> None:
    stray = kinds.JobKind(**{**TFJOB.__dict__, "kind": "FutureJob", "api": "future.kubeflow.org"})
    with pytest.raises(ValueError, match=r"future\.kubeflow\.org"):
        adapter_for(stray)


def test_a_pod_is_the_replica_its_apis_controller_labelled() -> None:
    assert pod_replica(v1_pod("worker", 1)) == ("worker", 1)
    assert pod_replica(jobset_pod("node", 1)) == ("node-0", 1)
    assert pod_replica({"metadata": {"labels": {"training.kubeflow.org/replica-type": "worker"}}}) is None
    assert pod_replica({"metadata": {}}) is None


# ------------------------------------------------------------------------------------------ v1 kinds


def test_v1_status_reads_the_conditions_by_precedence() -> None:
    tf = adapter_for(TFJOB)
    failed = tf.interpret(tfjob([cond("Running"), cond("Succeeded"), cond("Failed")]))
    assert (failed.state, failed.reason) == (JobState.FAILED, "TFJobFailed")
    running = tf.interpret(tfjob([cond("Running")], replicaStatuses={"worker": {"active": 2}}))
    assert running.state is JobState.RUNNING
    # Types in the kind's casing and order, every spec type counted even before the status has it.
    assert list(running.replica_statuses) == ["PS", "Worker"]
    assert running.replica_statuses["Worker"] == {"active": 2, "succeeded": 0, "failed": 0}
    message = "TFJob ml/mnist has failed because 1 PS replica(s) failed."
    assert tf.interpret(tfjob([cond("Failed", message=message)])).failed_replica_types == ("PS",)


def test_v1_replica_of_a_pod_is_the_training_operators_labels_only() -> None:
    tf = adapter_for(TFJOB)
    assert tf.replica_of(v1_pod("ps", 0)) == ("ps", 0)
    assert tf.replica_of(jobset_pod("node", 0)) is None
    assert (
        tf.replica_of(
            v1_pod("worker", 0) | {"metadata": {"labels": {"training.kubeflow.org/replica-index": "x"}}}
        )
        is None
    )


def test_v1_rank0_is_worker_0_only_without_a_chief_or_master() -> None:
    assert adapter_for(TFJOB).rank0(tfjob(None)) == ("worker", 0)
    chief = {"spec": {"tfReplicaSpecs": {"chief": {}, "Worker": {}}}}
    assert adapter_for(TFJOB).rank0(chief) is None
    assert adapter_for(PYTORCHJOB).rank0(pytorchjob({"Master": {}, "Worker": {}})) is None
    assert adapter_for(PADDLEJOB).rank0({"spec": {"paddleReplicaSpecs": {"Worker": {"replicas": 4}}}}) == (
        "worker",
        0,
    )
    assert adapter_for(JAXJOB).rank0({}) == ("worker", 0)  # nothing known: worker 0, as the labels would say


def test_v1_expected_pods_sum_the_replica_specs() -> None:
    assert adapter_for(TFJOB).expected_pods(tfjob(None)) == 3  # PS 1, Worker 2
    assert adapter_for(PYTORCHJOB).expected_pods(pytorchjob({"Master": {}, "Worker": {"replicas": 3}})) == 4
    assert (
        adapter_for(PYTORCHJOB).expected_pods(pytorchjob({"Worker": {"replicas": "2"}})) == 1
    )  # not a count
    assert adapter_for(XGBOOSTJOB).expected_pods({}) == 0


def test_v1_selects_a_replica_by_its_own_type() -> None:
    assert adapter_for(TFJOB).selected_as(tfjob(None), "worker") == "worker"


def test_v1_summary_layout_lists_types_and_images() -> None:
    manifest = tfjob(None)
    manifest["spec"]["tfReplicaSpecs"]["Worker"]["template"] = {"spec": {"containers": [{"image": "tf:2"}]}}
    manifest["spec"]["tfReplicaSpecs"]["PS"]["template"] = {"spec": {"containers": [{"image": "tf:1"}]}}
    assert adapter_for(TFJOB).layout(manifest) == ("1 PS, 2 Worker", "PS tf:1, Worker tf:2")
    assert adapter_for(TFJOB).layout({"kind": "TFJob"}) == ("no replicas", "no image")


def test_v1_adds_nothing_to_the_result_and_keeps_validations_name_limit() -> None:
    tf = adapter_for(TFJOB)
    assert tf.result_extras(tfjob([cond("Succeeded")])) == ResultExtras()
    assert tf.max_name_length(tfjob(None)) is None
    assert tf.holds_pods_by_run_policy()
    assert tf.replica_specs(tfjob(None)) == {"PS": {"replicas": 1}, "Worker": {"replicas": 2}}


def test_v1_assembles_and_validates_its_kinds_manifest() -> None:
    py = adapter_for(PYTORCHJOB)
    built = py.assemble_manifest(
        None, {"name": "p", "namespace": "ml", "image": "i", "replicas": {"worker": 2}}
    )
    assert built["kind"] == "PyTorchJob" and set(built["spec"]["pytorchReplicaSpecs"]) == {"Worker"}
    warnings = py.validate_manifest(built)  # the kind's own rules ran: PyTorchJob's warnings
    assert [w.split(":")[0] for w in warnings] == [
        "spec.pytorchReplicaSpecs",
        "spec.pytorchReplicaSpecs.Worker.restartPolicy",
    ]
    built["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 0
    with pytest.raises(JobValidationError, match="Worker"):
        py.validate_manifest(built)


# ------------------------------------------------------------------------------------------ Trainer v2


def test_trainjob_status_is_the_jobsets() -> None:
    tj = adapter_for(TRAINJOB)
    assert tj.interpret(trainjob()).state is JobState.CREATED
    assert tj.interpret(trainjob({"jobsStatus": [node_status(active=1)]})).state is JobState.RUNNING


def test_trainjob_replicas_rank0_and_expected_pods() -> None:
    tj = adapter_for(TRAINJOB)
    assert tj.replica_of(jobset_pod("node", 1)) == ("node-0", 1)
    assert tj.replica_of(v1_pod("worker", 1)) is None
    assert tj.rank0(trainjob()) == ("node-0", 0)
    assert tj.rank0(trainjob(annotations={ANNOTATION_RANK0: "chief-0-0"})) == ("chief-0", 0)
    assert tj.expected_pods(trainjob()) == 2
    assert tj.expected_pods({"spec": {"trainer": {}}}) == 0  # the runtime's count


def test_a_tfjob_run_as_a_trainjob_is_selected_by_its_tfjob_types() -> None:
    tj = adapter_for(TRAINJOB)
    annotated = trainjob(
        annotations={ANNOTATION_TF_REPLICAS: '{"Worker": ["node", 2], "Chief": ["chief", 1]}'}
    )
    assert tj.selected_as(annotated, "node-0") == "worker"
    assert tj.selected_as(annotated, "chief-0") == "chief"
    assert tj.selected_as(trainjob(), "node-0") == "node-0"


def test_trainjob_summary_layout_is_its_nodes_and_runtime() -> None:
    tj = adapter_for(TRAINJOB)
    assert tj.layout(trainjob()) == ("2 node on runtime torch-distributed", "the runtime's")
    with_image = trainjob()
    with_image["spec"]["trainer"]["image"] = "pytorch:2"
    del with_image["spec"]["trainer"]["numNodes"]
    assert tj.layout(with_image) == ("the runtime's node on runtime torch-distributed", "pytorch:2")


def test_trainjob_result_extras_are_its_progress_status() -> None:
    tj = adapter_for(TRAINJOB)
    assert tj.result_extras(trainjob({"jobsStatus": []})) == ResultExtras()
    filled = trainjob(
        {"trainerStatus": {"progressPercentage": 100, "metrics": [{"name": "loss", "value": "0.1"}]}}
    )
    extras = tj.result_extras(filled)
    assert extras.fields["trainer_status"]["percentage"] == 100
    assert extras.metrics == {"loss": 0.1}


def test_trainjob_name_limits_from_its_nodes() -> None:
    from airflow_tfjob.jobs.trainjob.validation import max_name_length

    tj = adapter_for(TRAINJOB)
    assert tj.max_name_length(trainjob()) == max_name_length(2)
    assert tj.max_name_length({"kind": "TrainJob", "spec": {}}) == max_name_length(100)
    assert not tj.holds_pods_by_run_policy()


def test_the_bridge_names_a_tfjobs_limit_by_the_replicated_jobs_it_runs_in() -> None:
    from airflow_tfjob.jobs.trainjob import from_tfjob
    from airflow_tfjob.jobs.trainjob.validation import max_name_length

    # Its largest replica count is the node count JobSet names pods by.
    assert from_tfjob.name_limit(tfjob(None)) == max_name_length(2)
    chief = {"spec": {"tfReplicaSpecs": {"Chief": {"replicas": 1}, "Worker": {"replicas": 1}}}}
    # A chief's "-chief-0-0" is one character longer than a worker's "-node-0-0".
    assert from_tfjob.name_limit(chief) == max_name_length(1, "chief") == max_name_length(1) - 1
    assert from_tfjob.name_limit({"spec": {}}) == max_name_length(1)


def test_the_api_choice_alone_runs_a_tfjob_as_a_trainjob() -> None:
    """The bridge is the API choice's (asked through operators/api_bridge.py by a try's builder): a TFJob
    task on Trainer v2 gets the TrainJob and the bridge's name limit; a TFJob task on the TFJob API and a
    TrainJob task get their manifest as it is and their own adapter's limit; no adapter maps another
    kind's manifest."""
    from airflow_tfjob.build.manifest import build_job
    from airflow_tfjob.jobs.trainjob.validation import max_name_length
    from airflow_tfjob.operators.api_bridge import name_limit, on_chosen_api
    from airflow_tfjob.operators.runs import TaskTry
    from airflow_tfjob.operators.tfjob import TFJobOperator
    from airflow_tfjob.operators.trainjob import TrainJobOperator

    tf = build_job(
        TFJOB,
        "mnist",
        "ml",
        image="tensorflow/tensorflow:2.21.0",
        command=["python", "train.py"],
        replicas={"worker": 2},
    )
    on_trainer = TaskTry(TFJobOperator(task_id="t", api="trainjob")).api
    mapped = on_chosen_api(on_trainer, tf)
    assert mapped["kind"] == "TrainJob" and mapped["spec"]["trainer"]["numNodes"] == 2
    assert name_limit(on_trainer, tf) == max_name_length(2)
    on_v1 = TaskTry(TFJobOperator(task_id="t", api="tfjob")).api
    assert on_chosen_api(on_v1, tf) is tf and name_limit(on_v1, tf) is None
    own = trainjob()
    trainjob_task = TaskTry(TrainJobOperator(task_id="t", runtime="torch-distributed")).api
    assert on_chosen_api(trainjob_task, own) is own
    assert name_limit(trainjob_task, own) == max_name_length(2)
    for made in (adapter_for(TFJOB), adapter_for(TRAINJOB)):
        assert not hasattr(made, "on_chosen_api")


def test_trainjob_replica_specs_are_its_nodes_in_the_v1_shape() -> None:
    specs = adapter_for(TRAINJOB).replica_specs(trainjob())
    assert specs == {"Node": {"replicas": 2, "template": {"spec": {"containers": [{"name": "node"}]}}}}
    assert pods.TRAINER_RJOB == "node"


def test_each_adapter_finds_the_env_where_its_api_holds_it_and_none_elsewhere() -> None:
    manifest = tfjob(None)
    manifest["spec"]["tfReplicaSpecs"]["Worker"]["template"] = {"spec": {
        "containers": [{"env": [{"name": "A", "value": "1"}, "odd"]}], "initContainers": [{"env": [{"name": "B"}]}],
    }}  # fmt: skip
    assert [e["name"] for e in adapter_for(TFJOB).env_entries(manifest)] == ["A", "B"]
    assert list(adapter_for(PYTORCHJOB).env_entries(manifest)) == []  # not under its spec key
    assert list(adapter_for(TRAINJOB).env_entries(manifest)) == []
    tj = trainjob()
    tj["spec"]["trainer"]["env"] = [{"name": "T", "value": "x"}]
    rjob = {"template": {"spec": {"template": {"spec": {"containers": [{"env": [{"name": "P"}]}]}}}}}
    tj["spec"]["runtimePatches"] = [
        {"trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [rjob]}}}}
    ]
    assert [e["name"] for e in adapter_for(TRAINJOB).env_entries(tj)] == ["T", "P"]
    assert list(adapter_for(TFJOB).env_entries(tj)) == []
    entry = next(adapter_for(TRAINJOB).env_entries(tj))
    assert entry is tj["spec"]["trainer"]["env"][0]  # the entry itself: redaction edits it in place


def test_each_api_reads_from_its_conditions_whether_the_job_ever_ran() -> None:
    tf = adapter_for(TFJOB)
    assert not tf.ever_started(tfjob([cond("Created")])) and not tf.ever_started({})
    assert tf.ever_started(tfjob([cond("Created"), cond("Running", status="False")]))  # history, any status
    assert tf.ever_started(tfjob([cond("Failed")]))
    tj = adapter_for(TRAINJOB)
    suspended = {"type": "Suspended", "status": "True", "reason": "Suspended"}
    assert not tj.ever_started(trainjob({"conditions": [suspended]}))
    assert tj.ever_started(trainjob({"conditions": [{"type": "Complete", "status": "True"}]}))
    assert tj.ever_started(trainjob({"conditions": [{"type": "Failed", "status": "True"}]}))
