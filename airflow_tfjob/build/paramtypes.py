"""The type of every parameter that shapes the manifest, checked before anything else looks at it.

Without this a string where a mapping belongs (``container_resources="4 cpus"``) or a lambda in
``hyperparameters`` would reach the manifest builder and fail there as a raw AttributeError or
TypeError, or be turned into a string nobody meant. One table says what each parameter takes and
gives an example for the fix; :func:`check_types` reports every mismatch at once.

Values must be plain JSON (str, int, float, bool, lists, dicts with string keys): they end up in
a Kubernetes object, and anything else (objects, sets, functions) has no faithful form there.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from airflow_tfjob.build.checker import JobValidationError, Problem

# A checker returns None when the value fits, else (where inside the value, what is wrong).
Checker = Callable[[Any], "tuple[str, str] | None"]


def _name(value: Any) -> str:
    return "None" if value is None else type(value).__name__


def _is_list(value: Any) -> bool:
    return isinstance(value, (list, tuple))


def json_value(value: Any) -> tuple[str, str] | None:
    """Plain JSON: what a Kubernetes object (or a hyperparameter on a command line) can hold."""
    if value is None or isinstance(value, (str, bool, int)):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else ("", f"{value!r} is not a finite number")
    if _is_list(value):
        for i, item in enumerate(value):
            found = json_value(item)
            if found:
                return f"[{i}]{found[0]}", found[1]
        return None
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                return "", f"key {key!r} is a {_name(key)}, not a string"
            found = json_value(item)
            if found:
                return f".{key}{found[0]}", found[1]
        return None
    return "", f"a {_name(value)} is not a plain JSON value (string, number, boolean, list or dict)"


def _type(*types: type, what: str) -> Checker:
    def check(value: Any) -> tuple[str, str] | None:
        if isinstance(value, bool) and bool not in types:
            return "", f"{value!r} is a bool, not {what}"
        return None if isinstance(value, types) else ("", f"{_short(value)} is a {_name(value)}, not {what}")

    return check


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


STR = _type(str, what="a string")
INT = _type(int, what="a whole number")
BOOL = _type(bool, what="a boolean")
SCALAR = _type(str, int, float, bool, what="a string or a number")


def _mapping(values: Checker | None = None) -> Checker:
    def check(value: Any) -> tuple[str, str] | None:
        if not isinstance(value, Mapping):
            return "", f"{_short(value)} is a {_name(value)}, not a mapping"
        for key, item in value.items():
            if not isinstance(key, str):
                return "", f"key {key!r} is a {_name(key)}, not a string"
            found = (values or json_value)(item)
            if found:
                return f".{key}{found[0]}", found[1]
        return None

    return check


def _list(items: Checker) -> Checker:
    def check(value: Any) -> tuple[str, str] | None:
        if not _is_list(value):
            return "", f"{_short(value)} is a {_name(value)}, not a list"
        for i, item in enumerate(value):
            found = items(item)
            if found:
                return f"[{i}]{found[0]}", found[1]
        return None

    return check


def _either(*checkers: Checker, what: str) -> Checker:
    """The first checker whose outer type fits decides; none fitting: ``what`` is expected."""

    def check(value: Any) -> tuple[str, str] | None:
        results = [c(value) for c in checkers]
        if any(r is None for r in results):
            return None
        inner = [r for r in results if r and r[0]]  # the outer type fitted, something inside did not
        return inner[0] if inner else ("", f"{_short(value)} is a {_name(value)}, not {what}")

    return check


def _no_none(checker: Checker) -> Checker:
    def check(value: Any) -> tuple[str, str] | None:
        return ("", "is None") if value is None else checker(value)

    return check


MAPPING = _mapping()


def _flags(value: Any) -> tuple[str, str] | None:
    """Hyperparameters: a mapping of plain JSON values whose keys can be command-line flags."""
    found = MAPPING(value)
    if found:
        return found
    for key in value:
        if not key.strip("-") or any(c.isspace() for c in key):
            return f".{key}", f"key {key!r} cannot be a command-line flag (empty, or with whitespace)"
    return None


STR_MAP = _mapping(STR)
MAPPINGS = _list(MAPPING)
STR_OR_LIST = _either(STR, _list(SCALAR), what="a string or a list of strings")
COUNT = _type(int, what="a whole number of replicas")
KEY_REFS = _mapping(_either(STR, _list(STR), MAPPING, what="'object-name:key'"))
OBJECT_VOLUMES = _either(STR_MAP, MAPPINGS, what="a mapping of name to mount path, or a list of dicts")
#: A job manifest or template: `tfjob`, `job` and `trainjob` alike.
JOB_SOURCE = _either(STR, MAPPING, what="a mapping, YAML text or a .yaml path")

# parameter -> (checker, example of a right value for the fix)
PARAMETER_TYPES: dict[str, tuple[Checker, str]] = {
    "tfjob": (JOB_SOURCE, "a dict, YAML text or 'job.yaml'"),
    # KubeflowJobOperator's name for the same parameter
    "job": (JOB_SOURCE, "a dict, YAML text or 'job.yaml'"),
    "name": (STR, "name='mnist-train'"),
    "namespace": (STR, "namespace='ml'"),
    "cluster_context": (STR, "cluster_context='my-context'"),
    "config_file": (STR, "config_file='/path/to/kubeconfig'"),
    "in_cluster": (BOOL, "in_cluster=True"),
    "chief": (COUNT, "chief=1"),
    "master": (COUNT, "master=1"),
    "ps": (COUNT, "ps=1"),
    "worker": (COUNT, "worker=2"),
    "evaluator": (COUNT, "evaluator=1"),
    "replicas": (_mapping(COUNT), "replicas={'worker': 2, 'ps': 1}"),
    "restart_policy": (_either(STR, STR_MAP, what="a string or a mapping"), "restart_policy='OnFailure'"),
    "image": (STR, "image='tensorflow/tensorflow:2.21.0'"),
    "images": (STR_MAP, "images={'ps': 'img-cpu:1', 'worker': 'img-gpu:1'}"),
    "image_pull_policy": (STR, "image_pull_policy='IfNotPresent'"),
    "command": (STR_OR_LIST, "command=['python', '-m', 'trainer']"),
    "args": (STR_OR_LIST, "args=['--steps=100']"),
    "hyperparameters": (_flags, "hyperparameters={'epochs': 10, 'lr': 0.001}"),
    "env": (
        _either(
            _mapping(_either(SCALAR, MAPPING, what="a string, a number or an EnvVar dict")),
            MAPPINGS,
            what="a mapping or a list of EnvVar dicts",
        ),
        "env={'LOG_LEVEL': 'info'}",
    ),
    "secret_env": (_mapping(_no_none(SCALAR)), "secret_env={'API_TOKEN': '...'}"),
    "env_from_secrets": (
        KEY_REFS,
        "env_from_secrets={'TOKEN': 'secret-name:key'}",
    ),
    "env_from_config_maps": (
        KEY_REFS,
        "env_from_config_maps={'MODE': 'settings:mode'}",
    ),
    "env_from": (
        _list(_either(STR, MAPPING, what="'secret:<name>' or a dict")),
        "env_from=['secret:db-creds']",
    ),
    "resources": (MAPPING, "resources={'cpu': '4', 'memory': '8Gi'}"),
    "container_resources": (MAPPING, "container_resources={'cpu': '4', 'memory': '8Gi'}"),
    "gpus": (INT, "gpus=1"),
    "replica_resources": (_mapping(MAPPING), "replica_resources={'worker': {'gpus': 1}}"),
    "replica_placement": (
        _mapping(MAPPING),
        "replica_placement={'worker': {'node_selector': {'pool': 'gpu'}}}",
    ),
    "volume_mounts": (MAPPINGS, "volume_mounts=[{'name': 'data', 'mountPath': '/data'}]"),
    "working_dir": (STR, "working_dir='/workspace'"),
    "ports": (
        _either(
            _mapping(INT),
            _list(_either(INT, MAPPING, what="a port number or a dict")),
            what="a mapping of name to port, or a list",
        ),
        "ports={'metrics': 9090}",
    ),
    "volumes": (MAPPINGS, "volumes=[{'name': 'data', 'emptyDir': {}}]"),
    "pvc": (
        _either(
            STR,
            MAPPING,
            _list(_either(STR, MAPPING, what="'claim:/path' or a dict")),
            what="'claim:/path', a dict or a list of these",
        ),
        "pvc='data:/data'",
    ),
    "secret_volumes": (OBJECT_VOLUMES, "secret_volumes={'creds': '/etc/creds'}"),
    "config_map_volumes": (OBJECT_VOLUMES, "config_map_volumes={'settings': '/etc/settings'}"),
    "node_selector": (MAPPING, "node_selector={'pool': 'gpu'}"),
    "tolerations": (MAPPINGS, "tolerations=[{'key': 'gpu', 'operator': 'Exists'}]"),
    "service_account": (STR, "service_account='trainer'"),
    "image_pull_secrets": (_list(STR), "image_pull_secrets=['registry-creds']"),
    "pod_labels": (MAPPING, "pod_labels={'team': 'ml'}"),
    "pod_annotations": (MAPPING, "pod_annotations={'sidecar.istio.io/inject': 'false'}"),
    "labels": (MAPPING, "labels={'team': 'ml'}"),
    "annotations": (MAPPING, "annotations={'owner': 'ml-team'}"),
    "queue": (STR, "queue='team-a'"),
    "kueue_queue": (STR, "kueue_queue='team-a'"),
    "clean_pod_policy": (STR, "clean_pod_policy='Running'"),
    "ttl_seconds_after_finished": (INT, "ttl_seconds_after_finished=3600"),
    "active_deadline_seconds": (INT, "active_deadline_seconds=7200"),
    "backoff_limit": (INT, "backoff_limit=3"),
    "suspend": (BOOL, "suspend=True"),
    "managed_by": (STR, "managed_by='kubeflow.org/training-operator'"),
    "scheduling": (MAPPING, "scheduling={'queue': 'team-a', 'min_available': 2}"),
    "success_policy": (STR, "success_policy='AllWorkers'"),
    "enable_dynamic_worker": (BOOL, "enable_dynamic_worker=True"),
    "nproc_per_node": (
        _type(int, str, what="a whole number or 'auto'/'cpu'/'gpu'/'xpu'"),
        "nproc_per_node=4",
    ),
    "elastic_policy": (MAPPING, "elastic_policy={'min_replicas': 1, 'max_replicas': 4}"),
    # TrainJob's (TrainJobOperator)
    "trainjob": (JOB_SOURCE, "a dict, YAML text or 'trainjob.yaml'"),
    "runtime": (STR, "runtime='torch-distributed'"),
    "runtime_kind": (STR, "runtime_kind='ClusterTrainingRuntime'"),
    "num_nodes": (_type(int, what="a whole number of nodes"), "num_nodes=2"),
    "num_proc_per_node": (_type(int, what="a whole number of processes"), "num_proc_per_node=4"),
    "resources_per_node": (
        _mapping(MAPPING),
        "resources_per_node={'limits': {'nvidia.com/gpu': 1}, 'requests': {'cpu': '4'}}",
    ),
    "dataset_storage_uri": (STR, "dataset_storage_uri='hf://tatsu-lab/alpaca'"),
    "model_storage_uri": (STR, "model_storage_uri='hf://meta-llama/Llama-3.2-1B'"),
    "runtime_patches": (
        MAPPINGS,
        "runtime_patches=[{'manager': 'example.com/my-team', 'trainingRuntimeSpec': {...}}]",
    ),
}


def type_problems(values: Mapping[str, Any]) -> list[Problem]:
    """A Problem per parameter of ``values`` whose type does not fit (None values are not checked)."""
    problems = []
    for name, value in values.items():
        if value is None or name not in PARAMETER_TYPES:
            continue
        checker, example = PARAMETER_TYPES[name]
        found = checker(value)
        if found:
            where, problem = found
            problems.append(Problem(f"{name}{where}", problem, f"pass e.g. {example}"))
    return problems


def check_types(values: Mapping[str, Any], kind: str = "TFJob") -> None:
    """Raise JobValidationError listing every parameter of ``values`` of the wrong type (``kind``: the
    job's, which the message names)."""
    problems = type_problems(values)
    if problems:
        raise JobValidationError(problems, kind=kind)
