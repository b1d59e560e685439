"""The job kind threaded through the run path and the public classes, without a cluster.

Collection paths, status interpretation, follow options and triggers (serialised by kind name; a
trigger serialised before kinds existed still follows a TFJob), the operators' and sensors' `kind`,
the provider info, and the @task.pytorchjob bootstrap's rank-0 rule run in a child Python.
"""

from __future__ import annotations

import base64
import importlib
import inspect
import os
import subprocess
import sys
from typing import Any

import pytest

from airflow_tfjob import get_provider_info
from airflow_tfjob.build.validation import JobValidationError
from airflow_tfjob.decorators.pytorchjob import BOOTSTRAP as PYTORCH_BOOTSTRAP
from airflow_tfjob.decorators.replica_function import (
    CALL_ENV,
    RETURN_MARKER,
    SOURCE_ENV,
    decode_return,
    encode_call,
)
from airflow_tfjob.follow.diagnostics import diagnose
from airflow_tfjob.follow.outcome import FollowOptions
from airflow_tfjob.hooks.common import COLLECTIONS, job_path
from airflow_tfjob.jobs.kinds import KINDS, PYTORCHJOB, TFJOB, as_kind
from airflow_tfjob.jobs.status import JobState, interpret
from airflow_tfjob.operators.generic import KubeflowJobOperator
from airflow_tfjob.operators.pytorchjob import PyTorchJobOperator
from airflow_tfjob.operators.tfjob import TFJobOperator
from airflow_tfjob.sensors.generic import KubeflowJobSensor
from airflow_tfjob.sensors.pytorchjob import PyTorchJobSensor
from airflow_tfjob.sensors.tfjob import TFJobSensor
from airflow_tfjob.triggers.deferral import KubeflowJobConditionTrigger, KubeflowJobTrigger


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.kind)
def test_every_kind_has_its_collection_path(kind: Any) -> None:
    assert job_path(kind, "team-a") == f"/apis/kubeflow.org/v1/namespaces/team-a/{kind.plural}"
    assert job_path(kind, "team-a", "j") == COLLECTIONS[kind.plural].format(namespace="team-a") + "/j"
    assert as_kind(kind.kind.lower()) is kind and as_kind(kind) is kind


def test_a_pytorchjobs_status_is_read_under_its_spec_key_in_its_type_order() -> None:
    job = {
        "kind": "PyTorchJob",
        "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 2}, "Master": {"replicas": 1}}},
        "status": {
            "conditions": [
                {
                    "type": "Failed",
                    "status": "True",
                    "reason": "PyTorchJobFailed",
                    "message": 'PyTorchJob j is failed because 1 "worker" replica(s) failed.',
                }
            ],
            "replicaStatuses": {"Master": {"active": 1}},
        },
    }
    status = interpret(job)
    assert status.state is JobState.FAILED and status.reason == "PyTorchJobFailed"
    assert list(status.replica_statuses) == ["Master", "Worker"]
    assert status.failed_replica_types == ("Worker",)


def test_follow_options_carry_the_kind_by_name_and_default_to_tfjob() -> None:
    options = FollowOptions(kind="PyTorchJob")
    assert options.to_dict()["kind"] == "PyTorchJob"
    assert FollowOptions.from_dict(options.to_dict()).job_kind is PYTORCHJOB
    # Options serialised before kinds existed: a TFJob.
    assert FollowOptions.from_dict({"log_replicas": "all"}).job_kind is TFJOB


def test_the_operators_trigger_keeps_its_kind_across_serialisation() -> None:
    trigger = KubeflowJobTrigger(name="j", namespace="ns", options=FollowOptions(kind="JAXJob").to_dict())
    classpath, kwargs = trigger.serialize()
    assert classpath == "airflow_tfjob.triggers.deferral.KubeflowJobTrigger"
    assert KubeflowJobTrigger(**kwargs).kind.kind == "JAXJob"
    old = {k: v for k, v in kwargs.items() if k != "options"} | {"options": {"log_replicas": "all"}}
    assert KubeflowJobTrigger(**old).kind is TFJOB


def test_the_sensors_trigger_keeps_its_kind_and_old_ones_watch_tfjobs() -> None:
    _, kwargs = KubeflowJobConditionTrigger(name="j", namespace="ns", kind="xgboostjob").serialize()
    assert kwargs["kind"] == "XGBoostJob"
    del kwargs["kind"]
    assert KubeflowJobConditionTrigger(**kwargs).kind == "TFJob"


def test_diagnostics_read_the_exit_code_of_the_kinds_container() -> None:
    pod = {
        "metadata": {
            "name": "j-worker-0",
            "labels": {
                "training.kubeflow.org/replica-type": "worker",
                "training.kubeflow.org/replica-index": "0",
            },
        },
        "status": {
            "phase": "Failed",
            "containerStatuses": [
                {"name": "pytorch", "state": {"terminated": {"exitCode": 3, "reason": "Error"}}}
            ],
        },
    }
    (found,) = diagnose("j", [pod], [], {}, ("Worker",), container=PYTORCHJOB.container)
    assert found.exit_code == 3


@pytest.mark.parametrize(
    ("kwargs", "problem"),
    [
        ({}, "kind: is missing"),
        ({"kind": "MPIJob"}, "unknown job kind 'MPIJob'"),
    ],
)
def test_the_generic_operator_refuses_a_missing_or_unknown_kind(kwargs: dict, problem: str) -> None:
    with pytest.raises(JobValidationError, match=problem):
        KubeflowJobOperator(task_id="t", **kwargs)


def test_a_named_operator_or_sensor_refuses_another_kind() -> None:
    with pytest.raises(JobValidationError, match="kind: is 'TFJob' but PyTorchJobOperator"):
        PyTorchJobOperator(task_id="t", kind="TFJob")
    with pytest.raises(JobValidationError, match="kind: is 'JAXJob' but PyTorchJobSensor"):
        PyTorchJobSensor(task_id="t", name="j", kind="JAXJob")
    assert TFJobSensor(task_id="s", name="j").kind == "TFJob"


def test_the_kind_is_canonical_and_the_manifest_parameter_is_named_per_class() -> None:
    generic = KubeflowJobOperator(task_id="g", kind="paddlejobs", job={"metadata": {"name": "x"}})
    assert generic.kind == "PaddleJob" and generic.job == {"metadata": {"name": "x"}}
    assert generic.template_fields[0] == "job" and generic.template_fields_renderers["job"] == "yaml"
    tf = TFJobOperator(task_id="t", tfjob={"metadata": {"name": "y"}})
    assert tf.kind == "TFJob" and tf.tfjob == {"metadata": {"name": "y"}}
    assert tf.template_fields[0] == "tfjob" and not hasattr(tf, "nproc_per_node")
    named = inspect.signature(PyTorchJobOperator.__init__).parameters
    assert {"nproc_per_node", "elastic_policy", "job", "kind"} <= set(named)
    assert "kind" not in inspect.signature(TFJobOperator.__init__).parameters
    assert KubeflowJobSensor(task_id="s", name="j", kind="pytorchjob").kind == "PyTorchJob"


def test_provider_info_lists_importable_modules_and_the_pytorchjob_decorator() -> None:
    info = get_provider_info()
    for section in ("operators", "sensors"):
        for module in info[section][0]["python-modules"]:
            importlib.import_module(module)
    decorators = {d["name"]: d["class-name"] for d in info["task-decorators"]}
    module, _, name = decorators["pytorchjob"].rpartition(".")
    assert callable(getattr(importlib.import_module(module), name))


def _run_pytorch_replica(env: dict[str, str]) -> list[Any]:
    child = {k: v for k, v in os.environ.items() if k not in ("RANK", "HOSTNAME")}
    child[SOURCE_ENV] = base64.b64encode(b"def train(x):\n    return x + 1\n").decode()
    child[CALL_ENV] = encode_call("train", [41], {})
    done = subprocess.run(
        [sys.executable, "-c", PYTORCH_BOOTSTRAP],
        env={**child, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return [
        decode_return(line.split(" ", 1)[1])
        for line in done.stdout.splitlines()
        if line.startswith(RETURN_MARKER)
    ]


@pytest.mark.parametrize(
    ("env", "returns"),
    [
        ({"RANK": "0", "HOSTNAME": "j-master-0"}, True),  # the Master
        ({"RANK": "1", "HOSTNAME": "j-worker-0"}, False),  # a Worker beside a Master
        ({"HOSTNAME": "j-worker-0"}, True),  # no Master: no RANK, worker-0 by its pod name
        ({"HOSTNAME": "j-worker-1"}, False),
    ],
)
def test_pytorchjob_bootstrap_returns_from_rank_0_only(env: dict[str, str], returns: bool) -> None:
    assert _run_pytorch_replica(env) == ([42] if returns else [])


def test_the_generic_operators_signature_and_its_parameter_rows_cannot_drift() -> None:
    from airflow_tfjob.operators import params

    signature = inspect.signature(KubeflowJobOperator.__init__).parameters.values()
    keyword_only = [p.name for p in signature if p.kind is inspect.Parameter.KEYWORD_ONLY]
    assert keyword_only == list(params.GENERIC.names)
    assert tuple(KubeflowJobOperator.template_fields) == params.GENERIC.template_fields
    written = {p.name: p.default for p in signature if p.kind is inspect.Parameter.KEYWORD_ONLY}
    assert written == params.GENERIC.defaults
    op = PyTorchJobOperator(task_id="drift", image="python:3.11")
    assert all(hasattr(op, name) for name in params.GENERIC.names)


def _keyword_parameters(cls: type) -> dict[str, inspect.Parameter]:
    return {
        p.name: p
        for p in inspect.signature(cls.__init__).parameters.values()  # type: ignore[misc]
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    }


@pytest.mark.parametrize(
    ("named", "generic", "same_annotation", "own_defaults"),
    [
        (TFJobOperator, KubeflowJobOperator, True, {}),
        (TFJobSensor, KubeflowJobSensor, True, {}),
        # Trainer v2's own signature: its types may be narrower (no replica types), and its nodes are
        # alike, so every node's log is followed by default (documented in its docstring).
        (
            "airflow_tfjob.operators.trainjob.TrainJobOperator",
            KubeflowJobOperator,
            False,
            {"log_replicas": ("all", "master")},
        ),
    ],
)
def test_a_signature_written_out_again_keeps_the_generic_ones_defaults(
    named: type | str, generic: type, same_annotation: bool, own_defaults: dict[str, Any]
) -> None:
    """TFJobOperator and TFJobSensor spell their parameters out (so that IDEs, type checkers and
    Airflow's default_args see them) and hand them on: a default changed in one place only would
    make `TFJobOperator(...)` and `KubeflowJobOperator(kind="TFJob", ...)` differ."""
    if isinstance(named, str):
        module, _, name = named.rpartition(".")
        named = getattr(importlib.import_module(module), name)
    assert isinstance(named, type)
    ours, theirs = _keyword_parameters(named), _keyword_parameters(generic)
    shared = set(ours) & set(theirs)
    assert len(shared) >= 8, shared
    differing = {
        name: (ours[name].default, theirs[name].default)
        for name in shared
        if ours[name].default != theirs[name].default
    }
    assert differing == own_defaults
    if same_annotation:
        assert {n: ours[n].annotation for n in shared} == {n: theirs[n].annotation for n in shared}
