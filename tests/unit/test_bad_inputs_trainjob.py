"""Careless and hostile input to TrainJobOperator, TFJobOperator(api=...) and the v1 kinds' operators.

Each case is written as a DAG author writes it and run at parse or at ``execute`` with the connection
pointed at a RequestCounter: a refusal must name the field and the fix before any request (the
default ``api="auto"`` included, which asks the cluster only once the input is known to be valid).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from badinput_support import Case, FigureLine, RequestCounter, TaskInstance, judge, task_context

from airflow_tfjob.build.checker import JobValidationError
from airflow_tfjob.operators.pytorchjob import PyTorchJobOperator
from airflow_tfjob.operators.tfjob import TFJobOperator
from airflow_tfjob.operators.trainjob import TrainJobOperator
from airflow_tfjob.operators.xgboostjob import XGBoostJobOperator
from airflow_tfjob.sensors.pytorchjob import PyTorchJobSensor
from airflow_tfjob.sensors.trainjob import TrainJobSensor
from airflow_tfjob.version_compat import AirflowException

GPU = "nvidia.com/gpu"
PRIORITY = "kueue.x-k8s.io/priority-class"
REFUSALS = (JobValidationError, AirflowException)


def _execute(op: Any) -> Any:
    return op.execute(task_context())


def trainjob(**kwargs: Any) -> Callable[[], Any]:
    """A TrainJobOperator as a DAG author writes it, built and executed."""
    given = {"task_id": "train", "runtime": "torch-distributed", "image": "python:3.12", **kwargs}
    return lambda: _execute(TrainJobOperator(**given))


def tfjob(**kwargs: Any) -> Callable[[], Any]:
    given = {"task_id": "train", "image": "python:3.12", "worker": 2, **kwargs}
    return lambda: _execute(TFJobOperator(**given))


def kind(cls: type, **kwargs: Any) -> Callable[[], Any]:
    given = {"task_id": "train", "image": "python:3.12", **kwargs}
    return lambda: _execute(cls(**given))


def _resources(part: str, values: dict[str, Any]) -> dict[str, Any]:
    return {part: values}


CASES: list[Case] = [
    # ---------------------------------------------------------------- resources (TrainJob)
    Case(
        "tj-fractional-gpu-limit",
        trainjob(resources_per_node={"limits": {GPU: "0.5"}}),
        f"resources_per_node.limits.{GPU}",
        "whole GPUs",
    ),
    Case(
        "tj-fractional-gpu-request",
        trainjob(resources_per_node={"requests": {GPU: 1.5}, "limits": {GPU: 2}}),
        f"resources_per_node.requests.{GPU}",
        "whole GPUs",
    ),
    Case(
        "tj-fractional-gpu-milli",
        trainjob(resources_per_node={"limits": {GPU: "500m"}}),
        f"resources_per_node.limits.{GPU}",
        "whole GPUs",
    ),
    Case(
        "tj-cpu-request-above-limit",
        trainjob(resources_per_node={"requests": {"cpu": "4"}, "limits": {"cpu": "2"}}),
        "resources_per_node.requests.cpu",
        "raise the limit",
    ),
    Case(
        "tj-memory-request-above-limit",
        trainjob(resources_per_node={"requests": {"memory": "8Gi"}, "limits": {"memory": "1Gi"}}),
        "resources_per_node.requests.memory",
        "raise the limit",
    ),
    Case(
        "tj-storage-request-above-limit",
        trainjob(
            resources_per_node={
                "requests": {"ephemeral-storage": "2Gi"},
                "limits": {"ephemeral-storage": "1Gi"},
            }
        ),
        "resources_per_node.requests.ephemeral-storage",
        "raise the limit",
    ),
    Case(
        "tj-gpu-request-without-limit",
        trainjob(resources_per_node={"requests": {GPU: 1}}),
        f"resources_per_node.limits.{GPU}",
        "equal the request",
    ),
    Case(
        "tj-gpu-request-unequal-limit",
        trainjob(resources_per_node={"requests": {GPU: 1}, "limits": {GPU: 2}}),
        f"resources_per_node.limits.{GPU}",
        "equal the request",
    ),
    Case(
        "tj-gpu-name-gpus",
        trainjob(resources_per_node={"limits": {"gpus": 1}}),
        "resources_per_node.limits.gpus",
        GPU,
    ),
    Case(
        "tj-cpu-not-quantity",
        trainjob(resources_per_node={"limits": {"cpu": "four"}}),
        "resources_per_node.limits.cpu",
        "quantity",
    ),
    Case(
        "tj-memory-negative",
        trainjob(resources_per_node={"limits": {"memory": "-1Gi"}}),
        "resources_per_node.limits.memory",
        "quantity",
    ),
    Case(
        "tj-resources-string",
        trainjob(resources_per_node="4 cpus"),
        "resources_per_node",
        "resources_per_node={",
    ),
    Case(
        "tj-resources-list",
        trainjob(resources_per_node=["cpu", "4"]),
        "resources_per_node",
        "resources_per_node={",
    ),
    Case("tj-resources-int", trainjob(resources_per_node=4), "resources_per_node", "resources_per_node={"),
    Case(
        "tj-resources-limits-string",
        trainjob(resources_per_node={"limits": "cpu=4"}),
        "resources_per_node.limits",
        "resources_per_node={",
    ),
    Case(
        "tj-resources-misspelt-key",
        trainjob(resources_per_node={"limit": {"cpu": "1"}}),
        "resources_per_node",
        "limits",
    ),
    Case("tj-resources-flat", trainjob(resources_per_node={"cpu": "4"}), "resources_per_node", "limits"),
    # ---------------------------------------------------------------- image
    Case("tj-image-zero-width-space", trainjob(image="python:3.12\u200b"), "image", "retype the image"),
    Case("tj-image-tab", trainjob(image="python:\t3.12"), "image", "retype the image"),
    Case("tj-image-newline", trainjob(image="python:3.12\n"), "image", "retype the image"),
    Case("tj-image-space", trainjob(image="python 3.12"), "image", "retype the image"),
    Case("tj-image-bom", trainjob(image="\ufeffpython:3.12"), "image", "retype the image"),
    Case("tj-image-nbsp", trainjob(image="python:3.12\u00a0"), "image", "retype the image"),
    Case("tj-image-empty", trainjob(image=""), "image", "python:3.12"),
    Case("tj-image-list", trainjob(image=["python:3.12"]), "image", "image="),
    Case(
        "tfjob-as-trainjob-image-zwsp",
        tfjob(api="trainjob", command=["python", "train.py"], image="python:3.12\u200b"),
        "image",
        "retype the image",
    ),
    Case(
        "pytorch-image-tab",
        kind(PyTorchJobOperator, image="python:\t3.12", master=1),
        "image",
        "retype the image",
    ),
    # ---------------------------------------------------------------- priority class
    Case("tj-priority-class-label", trainjob(labels={PRIORITY: "High_Priority"}), PRIORITY, "lower-case"),
    Case(
        "tj-patch-priority-class",
        trainjob(
            runtime_patches=[
                {
                    "manager": "example.com/team",
                    "trainingRuntimeSpec": {
                        "template": {
                            "spec": {
                                "replicatedJobs": [
                                    {
                                        "name": "node",
                                        "template": {
                                            "spec": {
                                                "template": {"spec": {"priorityClassName": "High_Priority"}}
                                            }
                                        },
                                    }
                                ]
                            }
                        }
                    },
                }
            ]
        ),
        "priorityClassName",
        "PriorityClass",
    ),
    Case(
        "pytorch-priority-class-label",
        kind(PyTorchJobOperator, master=1, labels={PRIORITY: "urgent!"}),
        PRIORITY,
        "lower-case",
    ),
    Case(
        "tfjob-priority-class-upper",
        tfjob(scheduling={"priority_class": "High Priority"}),
        "priorityClass",
        "lower-case",
    ),
    Case(
        "tfjob-as-trainjob-fractional-gpu",
        tfjob(api="trainjob", command=["python", "train.py"], gpus=0.5),
        "gpus",
        "gpus=1",
    ),
    Case(
        "pytorch-priority-class-long",
        kind(PyTorchJobOperator, master=1, replica_placement={"master": {"priority_class": "p" * 300}}),
        "priority_class",
        "lower-case",
    ),
    # ---------------------------------------------------------------- log_replicas
    Case("tj-log-replicas-chief", trainjob(log_replicas="chief"), "log_replicas", "node"),
    Case("tj-log-replicas-ps", trainjob(log_replicas="ps"), "log_replicas", "node"),
    Case(
        "tj-log-replicas-worker-index", trainjob(num_nodes=2, log_replicas="worker:5"), "log_replicas", "node"
    ),
    Case("tj-log-replicas-node-index", trainjob(num_nodes=2, log_replicas="node:5"), "log_replicas", "node"),
    Case("tj-log-replicas-evaluator", trainjob(log_replicas="evaluator"), "log_replicas", "node"),
    # ---------------------------------------------------------------- runtime patches
    Case(
        "tj-patch-duplicate-manager",
        trainjob(runtime_patches=[{"manager": "example.com/a"}, {"manager": "example.com/a"}]),
        "runtime_patches[1].manager",
        "once",
    ),
    Case(
        "tj-patch-misspelt-spec",
        trainjob(runtime_patches=[{"manager": "example.com/a", "trainingRuntimeSpc": {}}]),
        "runtime_patches[0]",
        "trainingRuntimeSpec",
    ),
    Case(
        "tj-patch-misspelt-template",
        trainjob(runtime_patches=[{"manager": "example.com/a", "trainingRuntimeSpec": {"templte": {}}}]),
        "runtime_patches[0].trainingRuntimeSpec",
        "template",
    ),
    Case(
        "tj-patch-misspelt-replicated-jobs",
        trainjob(
            runtime_patches=[
                {
                    "manager": "example.com/a",
                    "trainingRuntimeSpec": {"template": {"spec": {"replicatedJob": []}}},
                }
            ]
        ),
        "runtime_patches[0].trainingRuntimeSpec.template.spec",
        "replicatedJobs",
    ),
    Case(
        "tj-patch-not-mapping", trainjob(runtime_patches=["example.com/a"]), "runtime_patches[0]", "manager"
    ),
    Case(
        "tj-patches-mapping",
        trainjob(runtime_patches={"manager": "example.com/a"}),
        "runtime_patches",
        "runtime_patches=[",
    ),
    # ---------------------------------------------------------------- names and their derived lengths
    Case("tj-long-name", trainjob(name="a" * 60), "name", "at most"),
    Case("tj-long-name-many-nodes", trainjob(name="a" * 50, num_nodes=100), "name", "at most"),
    Case(
        "tfjob-as-trainjob-chief-long-name",
        tfjob(api="trainjob", command=["python", "train.py"], name="x" * 48, chief=1),
        "name",
        "at most",
    ),
    Case("tj-name-upper", trainjob(name="Digits_Train"), "name", "digits-train"),
    Case("tj-name-int", trainjob(name=5), "name", "name="),
    # ---------------------------------------------------------------- other parameter types
    Case("tj-num-nodes-string", trainjob(num_nodes="two"), "num_nodes", "whole number"),
    Case("tj-num-nodes-float", trainjob(num_nodes=2.5), "num_nodes", "whole number"),
    Case("tj-num-nodes-zero", trainjob(num_nodes=0), "num_nodes", "at least 1"),
    Case("tj-num-proc-bool", trainjob(num_proc_per_node=True), "num_proc_per_node", "whole number"),
    Case(
        "tj-runtime-patches-string",
        trainjob(runtime_patches="example.com/a"),
        "runtime_patches",
        "runtime_patches=[",
    ),
    Case("tj-namespace-invalid", trainjob(namespace="My_Team"), "namespace", "lower-case"),
    Case("tj-namespace-long", trainjob(namespace="n" * 70), "namespace", "lower-case"),
    Case("tfjob-namespace-invalid", tfjob(namespace="Team A"), "namespace", "lower-case"),
    # ---------------------------------------------------------------- the real kind in messages
    Case("tj-type-error-names-trainjob", trainjob(env="A=1"), "Invalid TrainJob", "env={"),
    Case(
        "pytorch-type-error-names-pytorchjob",
        kind(PyTorchJobOperator, master=1, env="A=1"),
        "Invalid PyTorchJob",
        "env={",
    ),
    Case(
        "xgboost-type-error-names-xgboostjob",
        kind(XGBoostJobOperator, master=1, container_resources="4 cpus"),
        "Invalid XGBoostJob",
        "container_resources={",
    ),
    Case(
        "trainjob-sensor-names-trainjob",
        lambda: TrainJobSensor(task_id="wait", name="Bad Name"),
        "Invalid TrainJob",
        "name",
    ),
    Case(
        "pytorch-sensor-names-pytorchjob",
        lambda: PyTorchJobSensor(task_id="wait", name="x", namespace="Bad NS"),
        "Invalid PyTorchJob",
        "lower-case",
    ),
    Case(
        "trainjob-sensor-deferrable-type",
        lambda: TrainJobSensor(task_id="wait", name="x", deferrable="yes"),
        "Invalid TrainJob",
        "True or False",
    ),
    # ---------------------------------------------------------------- each TrainJob parameter's type
    Case("tj-runtime-int", trainjob(runtime=5), "runtime", "runtime='torch-distributed'"),
    Case("tj-runtime-kind-list", trainjob(runtime_kind=["TrainingRuntime"]), "runtime_kind", "runtime_kind="),
    Case("tj-num-proc-string", trainjob(num_proc_per_node="4"), "num_proc_per_node", "num_proc_per_node=4"),
    Case("tj-dataset-uri-int", trainjob(dataset_storage_uri=5), "dataset_storage_uri", "hf://"),
    Case("tj-model-uri-list", trainjob(model_storage_uri=["hf://a/b"]), "model_storage_uri", "hf://"),
    Case(
        "tj-dataset-uri-no-scheme",
        trainjob(dataset_storage_uri="tatsu-lab/alpaca"),
        "dataset_storage_uri",
        "hf://",
    ),
    Case("tj-patch-int-entry", trainjob(runtime_patches=[5]), "runtime_patches[0]", "runtime_patches=["),
    Case(
        "tj-patch-manager-not-domain",
        trainjob(runtime_patches=[{"manager": "my-team"}]),
        "runtime_patches[0].manager",
        "example.com/my-team",
    ),
    Case(
        "tj-patch-misspelt-pod-key",
        trainjob(
            runtime_patches=[
                {
                    "manager": "example.com/a",
                    "trainingRuntimeSpec": {
                        "template": {
                            "spec": {
                                "replicatedJobs": [
                                    {
                                        "name": "node",
                                        "template": {
                                            "spec": {"template": {"spec": {"nodeSelecter": {"pool": "gpu"}}}}
                                        },
                                    }
                                ]
                            }
                        }
                    },
                }
            ]
        ),
        "nodeSelecter",
        "nodeSelector",
    ),
    Case(
        "tj-patch-misspelt-rjob-key",
        trainjob(
            runtime_patches=[
                {
                    "manager": "example.com/a",
                    "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [{"nme": "node"}]}}},
                }
            ]
        ),
        "replicatedJobs[0].nme",
        "name",
    ),
    Case("tj-labels-string", trainjob(labels="team=ml"), "labels", "labels={"),
    Case(
        "tj-active-deadline-string",
        trainjob(active_deadline_seconds="1h"),
        "active_deadline_seconds",
        "active_deadline_seconds=7200",
    ),
    Case("tj-suspend-string", trainjob(suspend="yes"), "suspend", "suspend=True"),
    Case("tj-env-name-space", trainjob(env={"MY VAR": "1"}), "env[0].name", "no spaces"),
    Case(
        "tj-cpu-request-above-limit-milli",
        trainjob(resources_per_node={"requests": {"cpu": "1500m"}, "limits": {"cpu": "1"}}),
        "resources_per_node.requests.cpu",
        "raise the limit",
    ),
    # ---------------------------------------------------------------- api="auto": validate before discovery
    Case(
        "auto-request-above-limit",
        tfjob(container_resources={"requests": {"memory": "2Gi"}, "limits": {"memory": "1Gi"}}),
        "memory",
        "raise the limit",
    ),
    Case("auto-long-name", tfjob(name="n" * 80), "name", "at most"),
    Case("auto-priority-class-label", tfjob(labels={PRIORITY: "Top_Priority"}), PRIORITY, "lower-case"),
    Case("auto-fractional-gpu", tfjob(gpus=0.5), "gpus", "whole"),
    Case("auto-image-zwsp", tfjob(image="python:3.12\u200b"), "image", "retype the image"),
    Case("auto-env-type", tfjob(env="A=1"), "env", "env={"),
    Case("auto-replicas-type", tfjob(worker="2"), "worker", "worker="),
    Case("auto-log-replicas-unknown", tfjob(log_replicas="evaluator"), "log_replicas", "name replicas"),
    Case(
        "auto-priority-class",
        tfjob(replica_placement={"worker": {"priority_class": "High Priority"}}),
        "priority_class",
        "lower-case",
    ),
]


def _problem_free(case: Case) -> str:
    return case.id


@pytest.fixture(scope="module")
def counter(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RequestCounter]:
    with RequestCounter(tmp_path_factory.mktemp("counter")) as c:
        yield c


@pytest.fixture
def counted(counter: RequestCounter, monkeypatch: pytest.MonkeyPatch) -> RequestCounter:
    extra = {"kube_config_path": str(counter.kubeconfig), "namespace": "default"}
    monkeypatch.setenv(
        "AIRFLOW_CONN_KUBERNETES_DEFAULT", json.dumps({"conn_type": "kubernetes", "extra": extra})
    )
    return counter


@pytest.mark.parametrize("case", CASES, ids=_problem_free)
def test_case_refused(case: Case, counted: RequestCounter) -> None:
    judgement = judge(case, refusals=REFUSALS, counter=counted)
    assert judgement.outcome == "refused" and not judgement.leaked, str(judgement)


def test_figure_line(counted: RequestCounter) -> None:
    line = FigureLine("trainjob-and-kinds")
    for case in CASES:
        line.add(judge(case, refusals=REFUSALS, counter=counted))
    line.write()
    print(line.line())
    assert len(CASES) >= 50
    assert line.failures() == [], "\n".join(str(f) for f in line.failures())


# ------------------------------------------------------------------ what must be accepted, or said once


@pytest.mark.parametrize(
    "dag_id,task_id", [("my_dag", "train"), ("etl.daily", "fine_tune_llm"), ("d" * 60, "t" * 60)]
)
def test_storage_uris_with_ordinary_ids_build(dag_id: str, task_id: str) -> None:
    """The name the operator derives with initializers fits their pods' limit: never refused."""
    from airflow.sdk import DAG

    with DAG(dag_id, schedule=None):
        op = TrainJobOperator(
            task_id=task_id, runtime="torch-distributed", image="python:3.12", render_only=True,
            dataset_storage_uri="hf://tatsu-lab/alpaca", model_storage_uri="hf://meta-llama/Llama-3.2-1B",
        )  # fmt: skip
    manifest = op.execute(task_context(TaskInstance(dag_id=dag_id, task_id=task_id)))["manifest"]
    assert manifest["spec"]["initializer"]["dataset"]["storageUri"] == "hf://tatsu-lab/alpaca"


def test_missing_namespace_is_one_clear_error(counted: RequestCounter) -> None:
    """A namespace the cluster lacks can only be known there: one error naming it, no 404 dump."""
    with pytest.raises(REFUSALS) as caught:
        trainjob(namespace="no-such-team")()
    text = str(caught.value)
    assert "no-such-team" in text and "namespace" in text
    assert "HTTP response headers" not in text and "Traceback" not in text


def test_trainjob_fix_lists_no_tfjob_replica_types(counted: RequestCounter) -> None:
    with pytest.raises(JobValidationError) as caught:
        trainjob(log_replicas="chief")()
    text = str(caught.value)
    for tfjob_type in ("Chief", "PS", "Evaluator", "chief, ", "'ps'"):
        assert tfjob_type not in text.split("Fix:")[-1], text
