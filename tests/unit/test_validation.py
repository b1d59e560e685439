from __future__ import annotations

import copy
import pickle
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml

from airflow_tfjob.build.validation import JobValidationError, Problem, parse_quantity, validate_job

FIXTURES = Path(__file__).parent / "fixtures"


def valid() -> dict[str, Any]:
    def replica(n: int) -> dict[str, Any]:
        return {
            "replicas": n,
            "restartPolicy": "OnFailure",
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "tensorflow",
                            "image": "tf:2",
                            "args": ["--epochs=1"],
                            "env": [{"name": "MODE", "value": "train"}],
                            "resources": {
                                "requests": {"cpu": "500m", "memory": "1Gi"},
                                "limits": {"cpu": "1", "memory": "2Gi"},
                            },
                            "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                            "ports": [{"name": "tfjob-port", "containerPort": 2222}],
                        }
                    ],
                    "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}],
                }
            },
        }

    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "mnist", "namespace": "ml", "labels": {"team": "ml"}},
        "spec": {
            "runPolicy": {"cleanPodPolicy": "Running", "backoffLimit": 3, "ttlSecondsAfterFinished": 60},
            "tfReplicaSpecs": {"Chief": replica(1), "PS": replica(1), "Worker": replica(2)},
        },
    }


def tf(m: dict[str, Any], rtype: str = "Worker") -> dict[str, Any]:
    container: dict[str, Any] = m["spec"]["tfReplicaSpecs"][rtype]["template"]["spec"]["containers"][0]
    return container


def podspec(m: dict[str, Any], rtype: str = "Worker") -> dict[str, Any]:
    spec: dict[str, Any] = m["spec"]["tfReplicaSpecs"][rtype]["template"]["spec"]
    return spec


def specs(m: dict[str, Any]) -> dict[str, Any]:
    replica_specs: dict[str, Any] = m["spec"]["tfReplicaSpecs"]
    return replica_specs


def run_policy(m: dict[str, Any]) -> dict[str, Any]:
    policy: dict[str, Any] = m["spec"]["runPolicy"]
    return policy


W = "spec.tfReplicaSpecs.Worker"
WC = f"{W}.template.spec.containers[0]"
Mut = Callable[[dict[str, Any]], Any]

# (id, mutation, field, problem fragment, fix fragment)
BAD: list[tuple[str, Mut, str, str, str]] = [
    (
        "name uppercase",
        lambda m: m["metadata"].update(name="Bad_Name"),
        "metadata.name",
        "DNS-1035",
        "lower-case",
    ),
    (
        "name starts with digit",
        lambda m: m["metadata"].update(name="1job"),
        "metadata.name",
        "DNS-1035",
        "starting with a letter",
    ),
    (
        "name too long",
        lambda m: m["metadata"].update(name="a" * 64),
        "metadata.name",
        "DNS-1035",
        "at most 63",
    ),
    ("name missing", lambda m: m["metadata"].pop("name"), "metadata.name", "missing", "name="),
    (
        "bad generateName",
        lambda m: (m["metadata"].pop("name"), m["metadata"].update(generateName="9x")),
        "metadata.generateName",
        "DNS-1035",
        "starting with a letter",
    ),
    (
        "service name > 63 (#1101)",
        lambda m: m["metadata"].update(name="a" * 60),
        "metadata.name",
        "exceed 63",
        "at most 54 characters",
    ),
    (
        "service name > 63 with many workers",
        lambda m: (m["metadata"].update(name="a" * 54), specs(m)["Worker"].update(replicas=100)),
        "metadata.name",
        "worker-99",
        "at most 53 characters",
    ),
    (
        "generateName too long for services",
        lambda m: (m["metadata"].pop("name"), m["metadata"].update(generateName="a" * 50)),
        "metadata.generateName",
        "exceed 63",
        "at most",
    ),
    (
        "bad namespace",
        lambda m: m["metadata"].update(namespace="ML_team"),
        "metadata.namespace",
        "not a valid namespace",
        "lower-case",
    ),
    (
        "wrong apiVersion",
        lambda m: m.update(apiVersion="kubeflow.org/v1beta1"),
        "apiVersion",
        "v1beta1",
        "kubeflow.org/v1",
    ),
    ("wrong kind", lambda m: m.update(kind="PyTorchJob"), "kind", "PyTorchJob", "kind: TFJob"),
    (
        "no tfReplicaSpecs",
        lambda m: m["spec"].pop("tfReplicaSpecs"),
        "spec.tfReplicaSpecs",
        "missing",
        "add at least one replica type",
    ),
    (
        "empty tfReplicaSpecs",
        lambda m: m["spec"].update(tfReplicaSpecs={}),
        "spec.tfReplicaSpecs",
        "empty",
        "add at least one",
    ),
    (
        "misspelt spec field",
        lambda m: m["spec"].update(tfReplicaSpec={}),
        "spec.tfReplicaSpec",
        "not a field",
        "did you mean 'tfReplicaSpecs'",
    ),
    (
        "run policy at spec level",
        lambda m: m["spec"].update(backoffLimit=3),
        "spec.backoffLimit",
        "not a field",
        "use one of",
    ),
    (
        "unknown replica type Workers",
        lambda m: specs(m).update(Workers=specs(m).pop("Worker")),
        "spec.tfReplicaSpecs.Workers",
        "not a TFJob replica type",
        "did you mean 'Worker'",
    ),
    (
        "unknown replica type ParameterServer",
        lambda m: specs(m).update(ParameterServer=specs(m).pop("PS")),
        "spec.tfReplicaSpecs.ParameterServer",
        "not a TFJob replica type",
        "did you mean 'PS'",
    ),
    (
        "duplicate case keys",
        lambda m: specs(m).update(worker=copy.deepcopy(specs(m)["Worker"])),
        "spec.tfReplicaSpecs.worker",
        "case-insensitive",
        "single 'Worker'",
    ),
    (
        "Chief and Master",
        lambda m: specs(m).update(Master=copy.deepcopy(specs(m)["Chief"])),
        "spec.tfReplicaSpecs",
        "both Chief and Master",
        "keep Chief",
    ),
    (
        "chief and Master (case slips past the webhook)",
        lambda m: (
            specs(m).update(Master=specs(m).pop("Chief"))
            or specs(m).update(chief=copy.deepcopy(specs(m)["Master"]))
        ),
        "spec.tfReplicaSpecs",
        "both Chief and Master",
        "keep Chief",
    ),
    (
        "negative replicas",
        lambda m: specs(m)["Worker"].update(replicas=-1),
        f"{W}.replicas",
        "negative",
        "0 or more",
    ),
    (
        "string replicas",
        lambda m: specs(m)["Worker"].update(replicas="3"),
        f"{W}.replicas",
        "whole number",
        "without quotes",
    ),
    (
        "float replicas",
        lambda m: specs(m)["Worker"].update(replicas=2.5),
        f"{W}.replicas",
        "whole number",
        "integer",
    ),
    ("bool replicas", lambda m: specs(m)["Worker"].update(replicas=True), f"{W}.replicas", "bool", "integer"),
    (
        "two chiefs",
        lambda m: specs(m)["Chief"].update(replicas=2),
        "spec.tfReplicaSpecs.Chief.replicas",
        "exactly one chief",
        "set Chief replicas to 1",
    ),
    (
        "unknown restartPolicy",
        lambda m: specs(m)["Worker"].update(restartPolicy="OnFail"),
        f"{W}.restartPolicy",
        "FailedCreatePod",
        "did you mean 'OnFailure'",
    ),
    (
        "restartPolicy wrong case",
        lambda m: specs(m)["PS"].update(restartPolicy="always"),
        "spec.tfReplicaSpecs.PS.restartPolicy",
        "not a restart policy",
        "did you mean 'Always'",
    ),
    (
        "Always on worker",
        lambda m: specs(m)["Worker"].update(restartPolicy="Always"),
        f"{W}.restartPolicy",
        "never completes",
        "OnFailure or ExitCode",
    ),
    (
        "Always on chief",
        lambda m: specs(m)["Chief"].update(restartPolicy="Always"),
        "spec.tfReplicaSpecs.Chief.restartPolicy",
        "never completes",
        "OnFailure",
    ),
    (
        "misspelt replica field",
        lambda m: specs(m)["Worker"].update(restartpolicy="Never"),
        f"{W}.restartpolicy",
        "not a field",
        "did you mean 'restartPolicy'",
    ),
    (
        "PS only",
        lambda m: (specs(m).pop("Worker"), specs(m).pop("Chief")),
        "spec.tfReplicaSpecs",
        "never succeed",
        "add a Worker",
    ),
    (
        "Evaluator only",
        lambda m: m["spec"].update(tfReplicaSpecs={"Evaluator": specs(m)["Worker"]}),
        "spec.tfReplicaSpecs",
        "never succeed",
        "add a Worker",
    ),
    ("no template", lambda m: specs(m)["Worker"].pop("template"), f"{W}.template", "missing", "tensorflow"),
    (
        "no containers",
        lambda m: podspec(m).update(containers=[]),
        f"{W}.template.spec.containers",
        "missing or empty",
        "tensorflow",
    ),
    (
        "no tensorflow container",
        lambda m: tf(m).update(name="trainer"),
        f"{W}.template.spec.containers",
        "named exactly 'tensorflow'",
        "TF_CONFIG",
    ),
    (
        "tensorflow only as init container",
        lambda m: (podspec(m).update(initContainers=[tf(m).copy()]), tf(m).update(name="main")),
        f"{W}.template.spec.containers",
        "named exactly",
        "TF_CONFIG",
    ),
    ("empty image", lambda m: tf(m).update(image=""), f"{WC}.image", "empty", "image="),
    (
        "sidecar without image",
        lambda m: podspec(m)["containers"].append({"name": "proxy"}),
        f"{W}.template.spec.containers[1].image",
        "missing",
        "image",
    ),
    (
        "duplicate container names",
        lambda m: podspec(m)["containers"].append(copy.deepcopy(tf(m))),
        f"{W}.template.spec.containers[1].name",
        "used twice",
        "distinct name",
    ),
    (
        "bad container name",
        lambda m: podspec(m)["containers"].append({"name": "Side_Car", "image": "x"}),
        f"{W}.template.spec.containers[1].name",
        "not a valid container name",
        "lower-case",
    ),
    ("numeric arg", lambda m: tf(m)["args"].append(32), f"{WC}.args[1]", "int", 'quote it: "32"'),
    (
        "env name with space",
        lambda m: tf(m)["env"].append({"name": "MY VAR", "value": "x"}),
        f"{WC}.env[1].name",
        "not a valid environment variable name",
        "no spaces",
    ),
    (
        "env name with =",
        lambda m: tf(m)["env"].append({"name": "A=B", "value": "x"}),
        f"{WC}.env[1].name",
        "not a valid",
        "'='",
    ),
    (
        "env numeric value",
        lambda m: tf(m)["env"].append({"name": "N", "value": 3}),
        f"{WC}.env[1].value",
        "must be strings",
        'quote it: "3"',
    ),
    (
        "env value and valueFrom",
        lambda m: tf(m)["env"].append(
            {"name": "N", "value": "1", "valueFrom": {"fieldRef": {"fieldPath": "x"}}}
        ),
        f"{WC}.env[1]",
        "both value and valueFrom",
        "keep one",
    ),
    (
        "secretKeyRef without key",
        lambda m: tf(m)["env"].append({"name": "T", "valueFrom": {"secretKeyRef": {"name": "s"}}}),
        f"{WC}.env[1].valueFrom.secretKeyRef",
        "name and key",
        "key:",
    ),
    (
        "envFrom without source",
        lambda m: tf(m).update(envFrom=[{"prefix": "X_"}]),
        f"{WC}.envFrom[0]",
        "exactly one of secretRef",
        "configMapRef",
    ),
    (
        "malformed cpu",
        lambda m: tf(m)["resources"]["limits"].update(cpu="2 cores"),
        f"{WC}.resources.limits.cpu",
        "not a Kubernetes quantity",
        "500m",
    ),
    (
        "memory in GB",
        lambda m: tf(m)["resources"]["limits"].update(memory="2GB"),
        f"{WC}.resources.limits.memory",
        "not a Kubernetes quantity",
        'end in "i"',
    ),
    (
        "negative memory",
        lambda m: tf(m)["resources"]["requests"].update(memory="-1Gi"),
        f"{WC}.resources.requests.memory",
        "negative",
        "positive",
    ),
    (
        "request above limit",
        lambda m: tf(m)["resources"]["requests"].update(cpu="1500m"),
        f"{WC}.resources.requests.cpu",
        "above the limit",
        "lower the request",
    ),
    (
        "fractional gpu",
        lambda m: tf(m)["resources"]["limits"].update({"nvidia.com/gpu": "0.5"}),
        f"{WC}.resources.limits.nvidia.com/gpu",
        "whole number of GPUs",
        "whole GPUs",
    ),
    (
        "gpu request only",
        lambda m: tf(m)["resources"]["requests"].update({"nvidia.com/gpu": 1}),
        f"{WC}.resources.limits.nvidia.com/gpu",
        "overcommitted",
        "set limits.nvidia.com/gpu",
    ),
    (
        "gpus key",
        lambda m: tf(m)["resources"]["limits"].update(gpus=1),
        f"{WC}.resources.limits.gpus",
        "not a Kubernetes resource name",
        "nvidia.com/gpu",
    ),
    (
        "gpu as bool",
        lambda m: tf(m)["resources"]["limits"].update({"nvidia.com/gpu": True}),
        f"{WC}.resources.limits.nvidia.com/gpu",
        "not a Kubernetes quantity",
        "quantity",
    ),
    (
        "resources misspelt",
        lambda m: tf(m)["resources"].update(limit={"cpu": "1"}),
        f"{WC}.resources.limit",
        "not a field",
        "did you mean 'limits'",
    ),
    (
        "mount of undeclared volume",
        lambda m: tf(m)["volumeMounts"].append({"name": "models", "mountPath": "/models"}),
        f"{WC}.volumeMounts[1].name",
        "does not declare",
        "add it to the pod's volumes",
    ),
    (
        "duplicate mount path",
        lambda m: tf(m)["volumeMounts"].append({"name": "data", "mountPath": "/data"}),
        f"{WC}.volumeMounts[1].mountPath",
        "mounted twice",
        "once",
    ),
    (
        "duplicate volume",
        lambda m: podspec(m)["volumes"].append({"name": "data", "emptyDir": {}}),
        f"{W}.template.spec.volumes[1].name",
        "used twice",
        "distinct name",
    ),
    (
        "bad volume name",
        lambda m: podspec(m)["volumes"].append({"name": "My_Vol", "emptyDir": {}}),
        f"{W}.template.spec.volumes[1].name",
        "not a valid volume name",
        "lower-case",
    ),
    (
        "port out of range",
        lambda m: tf(m)["ports"].append({"name": "tb", "containerPort": 70000}),
        f"{WC}.ports[1].containerPort",
        "not a port number",
        "between 1 and 65535",
    ),
    (
        "port zero",
        lambda m: tf(m)["ports"][0].update(containerPort=0),
        f"{WC}.ports[0].containerPort",
        "not a port number",
        "between 1 and 65535",
    ),
    (
        "port name too long",
        lambda m: tf(m)["ports"].append({"name": "tensorboard-port", "containerPort": 6006}),
        f"{WC}.ports[1].name",
        "not a valid port name",
        "at most 15",
    ),
    (
        "duplicate port name",
        lambda m: tf(m)["ports"].append({"name": "tfjob-port", "containerPort": 2223}),
        f"{WC}.ports[1].name",
        "used twice",
        "distinct",
    ),
    (
        "bad label key",
        lambda m: m["metadata"]["labels"].update({"bad key!": "x"}),
        "metadata.labels.bad key!",
        "not a valid label/annotation key",
        "example.com/team",
    ),
    (
        "label value too long",
        lambda m: m["metadata"]["labels"].update(team="x" * 64),
        "metadata.labels.team",
        "not valid",
        "shorten it",
    ),
    (
        "label value with spaces",
        lambda m: m["metadata"]["labels"].update(team="ml team"),
        "metadata.labels.team",
        "not valid",
        "annotation",
    ),
    (
        "label value bool",
        lambda m: m["metadata"]["labels"].update(ready=True),
        "metadata.labels.ready",
        "bool",
        'quote it: "true"',
    ),
    (
        "pod annotation non-string",
        lambda m: specs(m)["Worker"]["template"].update(
            metadata={"annotations": {"sidecar.istio.io/inject": False}}
        ),
        f"{W}.template.metadata.annotations.sidecar.istio.io/inject",
        "bool",
        'quote it: "false"',
    ),
    (
        "nodeSelector value int",
        lambda m: podspec(m).update(nodeSelector={"gpu-count": 4}),
        f"{W}.template.spec.nodeSelector.gpu-count",
        "int",
        'quote it: "4"',
    ),
    (
        "toleration operator",
        lambda m: podspec(m).update(tolerations=[{"key": "k", "operator": "Exist"}]),
        f"{W}.template.spec.tolerations[0].operator",
        "not a toleration operator",
        "did you mean 'Exists'",
    ),
    (
        "bad service account",
        lambda m: podspec(m).update(serviceAccountName="Trainer SA"),
        f"{W}.template.spec.serviceAccountName",
        "not a valid service account",
        "lower-case",
    ),
    (
        "unknown cleanPodPolicy",
        lambda m: run_policy(m).update(cleanPodPolicy="Always"),
        "spec.runPolicy.cleanPodPolicy",
        "treat it as All",
        "'None', 'Running', 'All'",
    ),
    (
        "cleanPodPolicy wrong case",
        lambda m: run_policy(m).update(cleanPodPolicy="all"),
        "spec.runPolicy.cleanPodPolicy",
        "not a clean pod policy",
        "did you mean 'All'",
    ),
    (
        "unknown successPolicy",
        lambda m: m["spec"].update(successPolicy="AllWorker"),
        "spec.successPolicy",
        "behave as the default",
        "did you mean 'AllWorkers'",
    ),
    (
        "negative ttl",
        lambda m: run_policy(m).update(ttlSecondsAfterFinished=-1),
        "spec.runPolicy.ttlSecondsAfterFinished",
        ">= 0",
        "at least 0",
    ),
    (
        "zero deadline",
        lambda m: run_policy(m).update(activeDeadlineSeconds=0),
        "spec.runPolicy.activeDeadlineSeconds",
        ">= 1",
        "at least 1",
    ),
    (
        "negative backoff",
        lambda m: run_policy(m).update(backoffLimit=-2),
        "spec.runPolicy.backoffLimit",
        ">= 0",
        "at least 0",
    ),
    (
        "string backoff",
        lambda m: run_policy(m).update(backoffLimit="3"),
        "spec.runPolicy.backoffLimit",
        "whole number",
        "without quotes",
    ),
    (
        "misspelt run policy field",
        lambda m: run_policy(m).update(cleanupPolicy="All"),
        "spec.runPolicy.cleanupPolicy",
        "drop it silently",
        "did you mean 'cleanPodPolicy'",
    ),
    (
        "suspend as string",
        lambda m: run_policy(m).update(suspend="yes"),
        "spec.runPolicy.suspend",
        "true or false",
        "without quotes",
    ),
    (
        "managedBy empty",
        lambda m: run_policy(m).update(managedBy=""),
        "spec.runPolicy.managedBy",
        "refused by the webhook",
        "kubeflow.org/training-operator",
    ),
    (
        "minAvailable above replicas",
        lambda m: run_policy(m).update(schedulingPolicy={"minAvailable": 10}),
        "spec.runPolicy.schedulingPolicy.minAvailable",
        "only 4",
        "at most 4",
    ),
    (
        "scheduling misspelt",
        lambda m: run_policy(m).update(schedulingPolicy={"minAvaliable": 2}),
        "spec.runPolicy.schedulingPolicy.minAvaliable",
        "not a field",
        "did you mean 'minAvailable'",
    ),
    (
        "minResources quantity",
        lambda m: run_policy(m).update(schedulingPolicy={"minResources": {"cpu": "lots"}}),
        "spec.runPolicy.schedulingPolicy.minResources.cpu",
        "not a Kubernetes quantity",
        "500m",
    ),
    (
        "enableDynamicWorker string",
        lambda m: m["spec"].update(enableDynamicWorker="true"),
        "spec.enableDynamicWorker",
        "true or false",
        "without quotes",
    ),
]


@pytest.mark.parametrize(("mutate", "field", "problem", "fix"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_bad_manifest_names_field_problem_and_fix(mutate: Mut, field: str, problem: str, fix: str) -> None:
    manifest = valid()
    mutate(manifest)
    with pytest.raises(JobValidationError) as err:
        validate_job(manifest)
    matching = [p for p in err.value.problems if p.field == field]
    assert matching, f"no problem for {field}; got {[str(p) for p in err.value.problems]}"
    assert any(problem in p.problem and fix in p.fix for p in matching), [str(p) for p in matching]
    text = str(err.value)
    assert field in text and "Fix:" in text


def test_at_least_35_bad_inputs() -> None:
    assert len(BAD) >= 35


def test_valid_manifest_passes_without_warnings() -> None:
    assert validate_job(valid()) == []


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("kubeflow_docs_*.yaml")), ids=lambda p: p.stem)
def test_documentation_examples_pass(path: Path) -> None:
    validate_job(yaml.safe_load(path.read_text()))


def test_several_problems_aggregate_in_one_error() -> None:
    manifest = valid()
    manifest["metadata"]["name"] = "Bad"
    specs(manifest)["Worker"]["replicas"] = -1
    run_policy(manifest)["cleanPodPolicy"] = "Sometimes"
    with pytest.raises(JobValidationError) as err:
        validate_job(manifest)
    fields = [p.field for p in err.value.problems]
    assert fields == ["metadata.name", f"{W}.replicas", "spec.runPolicy.cleanPodPolicy"]
    assert "3 problems" in str(err.value)
    assert err.value.field == "metadata.name"


def test_error_is_a_value_error_and_pickles() -> None:
    err = JobValidationError("spec.x", "is wrong", "make it right")
    assert isinstance(err, ValueError)
    assert str(err) == "Invalid TFJob: spec.x: is wrong. Fix: make it right."
    clone = pickle.loads(pickle.dumps(err))
    assert clone.problems == (Problem("spec.x", "is wrong", "make it right"),)


@pytest.mark.parametrize(
    ("mutate", "fragment"),
    [
        (
            lambda m: (
                m["spec"].update(tfReplicaSpecs={"Worker": specs(m)["Worker"]})
                or specs(m)["Worker"].update(replicas=1)
            ),
            "no TF_CONFIG",
        ),
        (lambda m: specs(m).pop("Chief") and specs(m)["Worker"].update(replicas=0), "Succeeded at once"),
        (lambda m: specs(m)["Chief"].update(replicas=0), "at once"),
        (lambda m: podspec(m).update(restartPolicy="OnFailure"), "overwritten"),
        (lambda m: m["spec"].update(successPolicy="AllWorkers"), "AllWorkers is ignored"),
        (lambda m: run_policy(m).update(managedBy="kueue.x-k8s.io/multikueue"), "MultiKueue"),
        (lambda m: tf(m)["env"].append({"name": "MODE", "value": "x"}), "more than once"),
        (lambda m: tf(m)["env"].append({"name": "1ST", "value": "x"}), "1.32"),
    ],
)
def test_warnings_not_errors(mutate: Mut, fragment: str) -> None:
    manifest = valid()
    mutate(manifest)
    warnings = validate_job(manifest)
    assert any(fragment in w for w in warnings), warnings


def test_single_replica_warning_names_the_field() -> None:
    manifest = valid()
    manifest["spec"]["tfReplicaSpecs"] = {"Worker": specs(manifest)["Worker"]}
    specs(manifest)["Worker"]["replicas"] = 1
    assert validate_job(manifest) == [
        "spec.tfReplicaSpecs: the job has a single replica, so the operator sets no TF_CONFIG (it runs as plain TensorFlow)"
    ]


def test_lower_case_replica_keys_are_accepted() -> None:
    manifest = valid()
    specs(manifest)["worker"] = specs(manifest).pop("Worker")
    specs(manifest)["ps"] = specs(manifest).pop("PS")
    assert validate_job(manifest) == []


def test_name_optional_when_not_required() -> None:
    manifest = valid()
    del manifest["metadata"]["name"]
    assert validate_job(manifest, require_name=False) == []


def test_name_at_the_exact_limit() -> None:
    manifest = valid()
    manifest["metadata"]["name"] = "a" * (63 - len("-worker-1"))
    validate_job(manifest)


def test_not_a_mapping() -> None:
    with pytest.raises(JobValidationError) as err:
        validate_job(["not", "a", "job"])
    assert err.value.field == "tfjob"


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("500m", Decimal("0.5")),
        ("2", Decimal(2)),
        ("1Gi", Decimal(2**30)),
        ("1.5G", Decimal("1.5e9")),
        ("1e3", Decimal(1000)),
        ("1E", Decimal("1e18")),
        (".5", Decimal("0.5")),
        (3, Decimal(3)),
        (0.25, Decimal("0.25")),
        ("2GB", None),
        ("1 Gi", None),
        ("", None),
        ("Gi", None),
        (True, None),
        (None, None),
    ],
)
def test_parse_quantity(text: Any, value: Decimal | None) -> None:
    assert parse_quantity(text) == value
