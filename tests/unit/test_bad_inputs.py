"""Careless and hostile input, refused before anything is created, each naming the field and the fix.

Tables of bad values for the manifest builder, the operator, the sensor and ``@task.tfjob``: every
row asserts the error's field and a piece of its fix, and that no raw AttributeError, TypeError,
KeyError or Jinja error escapes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from badinput_support import task_context

from airflow_tfjob.build.manifest import build_tfjob
from airflow_tfjob.build.validation import JobValidationError


class _Obj:
    pass


def _problem_for(err: JobValidationError, field: str) -> Any:
    matches = [p for p in err.problems if p.field == field]
    assert matches, f"no problem for {field!r} in {[str(p) for p in err.problems]}"
    return matches[0]


def assert_refused(call: Any, field: str, fix: str) -> JobValidationError:
    with pytest.raises(JobValidationError) as caught:
        call()
    problem = _problem_for(caught.value, field)
    assert fix in problem.fix, f"{fix!r} not in {problem.fix!r}"
    assert field in str(caught.value)
    return caught.value


# --------------------------------------------------------------------------- parameter types (builder)

BUILDER_TYPES = [
    ({"resources": "4 cpus"}, "resources", "resources={"),
    ({"resources": ["cpu", "4"]}, "resources", "resources={"),
    ({"hyperparameters": ["--epochs=3"]}, "hyperparameters", "hyperparameters={"),
    ({"hyperparameters": "epochs=3"}, "hyperparameters", "hyperparameters={"),
    ({"hyperparameters": {"opt": _Obj()}}, "hyperparameters.opt", "hyperparameters={"),
    ({"hyperparameters": {"tags": {1, 2}}}, "hyperparameters.tags", "hyperparameters={"),
    ({"hyperparameters": {"fn": lambda: 1}}, "hyperparameters.fn", "hyperparameters={"),
    ({"hyperparameters": {"lr": float("nan")}}, "hyperparameters.lr", "hyperparameters={"),
    (
        {"hyperparameters": {"nested": {"deep": [_Obj()]}}},
        "hyperparameters.nested.deep[0]",
        "hyperparameters={",
    ),
    ({"hyperparameters": {1: "x"}}, "hyperparameters", "hyperparameters={"),
    ({"hyperparameters": {"": 1}}, "hyperparameters.", "hyperparameters={"),
    ({"hyperparameters": {"learning rate": 1}}, "hyperparameters.learning rate", "hyperparameters={"),
    ({"pvc": {"claim": ["data"], "mount_path": "/d"}}, "pvc", "mount_path"),
    ({"env": "A=1"}, "env", "env={"),
    ({"env": {"A": _Obj()}}, "env.A", "env={"),
    ({"env": {"A": {1, 2}}}, "env.A", "env={"),
    ({"env": {"A": lambda: 1}}, "env.A", "env={"),
    ({"env": {"A": None}}, "env.A", "env={"),
    ({"env": {1: "x"}}, "env", "env={"),
    ({"env": [("A", "1")]}, "env[0]", "env={"),
    ({"secret_env": {"TOKEN": None}}, "secret_env.TOKEN", "secret_env={"),
    ({"secret_env": {"TOKEN": _Obj()}}, "secret_env.TOKEN", "secret_env={"),
    ({"secret_env": {"TOKEN": ["a", "b"]}}, "secret_env.TOKEN", "secret_env={"),
    ({"secret_env": "TOKEN=abc"}, "secret_env", "secret_env={"),
    ({"env_from_secrets": ["creds:key"]}, "env_from_secrets", "env_from_secrets={"),
    ({"env_from_secrets": {"T": 5}}, "env_from_secrets.T", "env_from_secrets={"),
    ({"env_from_config_maps": "cm:key"}, "env_from_config_maps", "env_from_config_maps={"),
    ({"env_from": "secret:creds"}, "env_from", "env_from=["),
    ({"env_from": [5]}, "env_from[0]", "env_from=["),
    ({"replicas": 3}, "replicas", "replicas={"),
    ({"replicas": {"worker": "2"}}, "replicas.worker", "replicas={"),
    ({"replicas": {"worker": 2.0}}, "replicas.worker", "replicas={"),
    ({"replicas": {"worker": True}}, "replicas.worker", "replicas={"),
    ({"restart_policy": ["Never"]}, "restart_policy", "restart_policy="),
    ({"image": ["img"]}, "image", "image="),
    ({"image": 3}, "image", "image="),
    ({"images": ["img"]}, "images", "images={"),
    ({"images": {"worker": None}}, "images.worker", "images={"),
    ({"image_pull_policy": True}, "image_pull_policy", "image_pull_policy="),
    ({"command": {"python": "x"}}, "command", "command=["),
    ({"command": ["python", None]}, "command[1]", "command=["),
    ({"args": 5}, "args", "args=["),
    ({"args": ["--a", {"b": 1}]}, "args[1]", "args=["),
    ({"gpus": "1"}, "gpus", "gpus=1"),
    ({"gpus": 1.5}, "gpus", "gpus=1"),
    ({"gpus": True}, "gpus", "gpus=1"),
    ({"replica_resources": {"worker": "2 cpus"}}, "replica_resources.worker", "replica_resources={"),
    ({"volume_mounts": {"name": "data"}}, "volume_mounts", "volume_mounts=["),
    ({"volume_mounts": ["data:/data"]}, "volume_mounts[0]", "volume_mounts=["),
    ({"working_dir": ["/w"]}, "working_dir", "working_dir="),
    ({"ports": "9090"}, "ports", "ports={"),
    ({"ports": {"metrics": "9090"}}, "ports.metrics", "ports={"),
    ({"volumes": {"name": "data"}}, "volumes", "volumes=["),
    ({"volumes": ["data"]}, "volumes[0]", "volumes=["),
    ({"pvc": 5}, "pvc", "pvc="),
    ({"secret_volumes": "creds"}, "secret_volumes", "secret_volumes={"),
    ({"config_map_volumes": 3}, "config_map_volumes", "config_map_volumes={"),
    ({"node_selector": "pool=gpu"}, "node_selector", "node_selector={"),
    ({"tolerations": {"key": "gpu"}}, "tolerations", "tolerations=["),
    ({"service_account": ["sa"]}, "service_account", "service_account="),
    ({"image_pull_secrets": "creds"}, "image_pull_secrets", "image_pull_secrets=["),
    ({"image_pull_secrets": [{"name": "creds"}]}, "image_pull_secrets[0]", "image_pull_secrets=["),
    ({"pod_labels": ["team=ml"]}, "pod_labels", "pod_labels={"),
    ({"pod_annotations": "a=b"}, "pod_annotations", "pod_annotations={"),
    ({"labels": "team=ml"}, "labels", "labels={"),
    ({"annotations": [("a", "b")]}, "annotations", "annotations={"),
    ({"queue": 5}, "queue", "queue="),
    ({"clean_pod_policy": None, "ttl_seconds_after_finished": "3600"}, "ttl_seconds_after_finished", "=3600"),
    ({"active_deadline_seconds": 7200.5}, "active_deadline_seconds", "active_deadline_seconds="),
    ({"backoff_limit": "3"}, "backoff_limit", "backoff_limit=3"),
    ({"suspend": "yes"}, "suspend", "suspend=True"),
    ({"managed_by": 1}, "managed_by", "managed_by="),
    ({"scheduling": "queue=a"}, "scheduling", "scheduling={"),
    ({"success_policy": 0}, "success_policy", "success_policy="),
    ({"enable_dynamic_worker": "true"}, "enable_dynamic_worker", "enable_dynamic_worker=True"),
]


@pytest.mark.parametrize(("kwargs", "field", "fix"), BUILDER_TYPES)
def test_builder_parameter_of_the_wrong_type(kwargs: dict[str, Any], field: str, fix: str) -> None:
    assert_refused(lambda: build_tfjob("j", **{"image": "i", **kwargs}), field, fix)


def test_every_type_problem_is_reported_at_once() -> None:
    with pytest.raises(JobValidationError) as caught:
        build_tfjob("j", image="i", resources="4 cpus", hyperparameters=[1], gpus="2")
    assert {p.field for p in caught.value.problems} == {"resources", "hyperparameters", "gpus"}


# --------------------------------------------------------------------------- no silent loss or override

SILENT_LOSS = [
    ({"env": {"A": "1"}, "secret_env": {"A": "2"}}, "secret_env.A", "one place"),
    ({"env": {"T": "1"}, "env_from_secrets": {"T": "creds:key"}}, "env_from_secrets.T", "one place"),
    (
        {"secret_env": {"T": "x"}, "env_from_config_maps": {"T": "cm:key"}},
        "env_from_config_maps.T",
        "one place",
    ),
    ({"env": [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]}, "env[1]", "one place"),
    (
        {"volumes": [{"name": "pvc-data", "emptyDir": {}}], "pvc": "data:/data"},
        "pvc (volume 'pvc-data')",
        "one place",
    ),
    (
        {"volumes": [{"name": "v", "emptyDir": {}}, {"name": "v", "hostPath": {"path": "/x"}}]},
        "volumes[1]",
        "one place",
    ),
    (
        {"secret_volumes": {"creds": "/data"}, "pvc": "data:/data"},
        "secret_volumes (mount '/data')",
        "one place",
    ),
    (
        {"ports": [{"name": "metrics", "containerPort": 9090}, {"name": "metrics", "containerPort": 9091}]},
        "ports[1]",
        "one place",
    ),
]


@pytest.mark.parametrize(("kwargs", "field", "fix"), SILENT_LOSS)
def test_one_name_set_in_two_places_is_refused(kwargs: dict[str, Any], field: str, fix: str) -> None:
    err = assert_refused(lambda: build_tfjob("j", image="i", **kwargs), field, fix)
    assert "already sets" in err.problems[0].problem  # names the other place too


def test_the_same_claim_twice_is_one_volume() -> None:
    built = build_tfjob("j", image="i", pvc=["data:/a", "data:/b"])
    pod = built["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]
    assert [v["name"] for v in pod["volumes"]] == ["pvc-data"]
    assert [m["mountPath"] for m in pod["containers"][0]["volumeMounts"]] == ["/a", "/b"]


def _base(**spec_parts: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "tensorflow", "image": "i"}
    pod: dict[str, Any] = {"containers": [container]}
    template: dict[str, Any] = {"spec": pod}
    manifest: dict[str, Any] = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "j"},
        "spec": {"tfReplicaSpecs": {"Worker": {"replicas": 1, "template": template}}},
    }
    for path, value in spec_parts.items():
        target: dict[str, Any] = {
            "manifest": manifest,
            "container": container,
            "pod": pod,
            "template": template,
        }[path.split("__")[0]]
        target[path.split("__")[1]] = value
    return manifest


WRONG_SHAPES = [
    ({"manifest__metadata": ["name", "j"]}, "metadata"),
    ({"manifest__metadata": "j"}, "metadata"),
    ({"manifest__spec": ["Worker"]}, "spec"),
    ({"manifest__spec": "tfReplicaSpecs"}, "spec"),
    ({"manifest__spec": {"tfReplicaSpecs": ["Worker"]}}, "spec.tfReplicaSpecs"),
    ({"manifest__spec": {"tfReplicaSpecs": {"Worker": ["x"]}}}, "spec.tfReplicaSpecs.Worker"),
    (
        {"manifest__spec": {"tfReplicaSpecs": {"Worker": {"template": "pod"}}}},
        "spec.tfReplicaSpecs.Worker.template",
    ),
    ({"manifest__spec": {"runPolicy": ["x"], "tfReplicaSpecs": {}}}, "spec.runPolicy"),
    ({"template__spec": ["containers"]}, "spec.tfReplicaSpecs.Worker.template.spec"),
    ({"template__metadata": "labels"}, "spec.tfReplicaSpecs.Worker.template.metadata"),
    ({"pod__containers": {"name": "tensorflow"}}, "spec.tfReplicaSpecs.Worker.template.spec.containers"),
    ({"pod__volumes": {"name": "data"}}, "spec.tfReplicaSpecs.Worker.template.spec.volumes"),
    ({"pod__nodeSelector": ["pool"]}, "spec.tfReplicaSpecs.Worker.template.spec.nodeSelector"),
    ({"container__env": {"A": "1"}}, "spec.tfReplicaSpecs.Worker.template.spec.containers[0].env"),
    ({"container__args": "--epochs=3"}, "spec.tfReplicaSpecs.Worker.template.spec.containers[0].args"),
    ({"container__resources": "4 cpus"}, "spec.tfReplicaSpecs.Worker.template.spec.containers[0].resources"),
]


@pytest.mark.parametrize(("parts", "field"), WRONG_SHAPES)
def test_a_part_of_the_wrong_type_is_refused_not_replaced(parts: dict[str, Any], field: str) -> None:
    err = assert_refused(
        lambda: build_tfjob(base=_base(**parts), env={"A": "1"}, hyperparameters={"e": 1}), field, "write"
    )
    assert "would be lost" in _problem_for(err, field).problem


# --------------------------------------------------------------------------- values (validation)

BAD_VALUES = [
    ({"image": "tensorflow/tensorflow :2.21.0"}, "image", "without spaces"),
    ({"image": "tensorflow/tensorflow:2.21.0\u200b"}, "image", "without spaces"),
    ({"image": "img:1\n"}, "image", "without spaces"),
    ({"image": "\ufeffimg:1"}, "image", "without spaces"),
    ({"image_pull_policy": "always"}, "imagePullPolicy", "did you mean 'Always'"),
    ({"image_pull_policy": "ifnotpresent"}, "imagePullPolicy", "did you mean 'IfNotPresent'"),
    ({"image_pull_policy": "Sometimes"}, "imagePullPolicy", "use one of"),
]


@pytest.mark.parametrize(("kwargs", "field", "fix"), BAD_VALUES)
def test_bad_container_values(kwargs: dict[str, Any], field: str, fix: str) -> None:
    from airflow_tfjob.build.validation import validate_job

    params = {"image": "img:1", **kwargs}
    built = build_tfjob("j", **params)
    full = f"spec.tfReplicaSpecs.Worker.template.spec.containers[0].{field}"
    assert_refused(lambda: validate_job(built), full, fix)


def test_a_manifest_over_the_request_limit_is_refused_naming_the_largest_fields() -> None:
    from airflow_tfjob.build.limits import check_request_size

    built = build_tfjob("j", image="i", env={"CONFIG": "x" * 2_000_000, "SMALL": "y"})
    err = assert_refused(lambda: check_request_size(built), "tfjob", "ConfigMap")
    assert "containers[0].env[0].value" in err.problem and "bytes" in err.problem


# --------------------------------------------------------------------------- YAML and templates

YAML_ERRORS = [
    ("kind: TFJob\nkind: TFJob\n", "duplicate key 'kind' (first at line 1)"),
    (
        "spec:\n  tfReplicaSpecs:\n    Worker: {replicas: 1}\n    Worker: {replicas: 2}\n",
        "duplicate key 'Worker'",
    ),
    (
        "spec:\n  tfReplicaSpecs:\n    Worker:\n      replicas: 1\n      replicas: 3\n",
        "duplicate key 'replicas'",
    ),
    ("kind: [unclosed\n", "not valid YAML at line 2"),
    ("kind: TFJob\n\tbad: tab\n", "not valid YAML at line 2"),
    ("- a\n- b\n", "holds a list"),
    ("just text", "holds a str"),
]


@pytest.mark.parametrize(("text", "problem"), YAML_ERRORS)
def test_bad_yaml_text(text: str, problem: str) -> None:
    from airflow_tfjob.build.manifest import load_manifest

    err = assert_refused(lambda: load_manifest(text), "tfjob", "")
    assert problem in err.problem


def test_a_yaml_alias_bomb_is_refused_briefly() -> None:
    from airflow_tfjob.build.manifest import load_manifest

    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{i}: &a{i} [{','.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 9)]
    err = assert_refused(lambda: load_manifest("\n".join(lines)), "tfjob", "without anchors and aliases")
    assert len(str(err)) < 400


def test_a_yaml_error_in_a_file_names_file_and_line_without_quoting_content(tmp_path: Path) -> None:
    from airflow_tfjob.build.manifest import load_manifest

    (tmp_path / "job.yaml").write_text(
        "kind: TFJob\nmetadata:\n  name: j\n  token: hunter2-secret\n  name: k\n"
    )
    err = assert_refused(lambda: load_manifest("job.yaml", searchpath=[tmp_path]), "tfjob", "")
    assert str(tmp_path / "job.yaml") in err.problem and "line 5" in err.problem
    assert "hunter2" not in str(err)


def test_a_jinja_error_in_a_file_names_file_and_line(tmp_path: Path) -> None:
    from airflow_tfjob.build.manifest import load_manifest

    (tmp_path / "job.yaml").write_text("kind: TFJob\nmetadata:\n  name: {{ missing_name }}\n")
    err = assert_refused(lambda: load_manifest("job.yaml", searchpath=[tmp_path]), "tfjob", "params")
    assert "job.yaml line 3" in err.problem and "missing_name" in err.problem
    (tmp_path / "broken.yaml").write_text("kind: TFJob\n{% if %}\n")
    err = assert_refused(lambda: load_manifest("broken.yaml", searchpath=[tmp_path]), "tfjob", "")
    assert "broken.yaml line 2" in err.problem


def test_duplicate_keys_in_json_are_refused(tmp_path: Path) -> None:
    from airflow_tfjob.build.manifest import load_manifest

    (tmp_path / "job.json").write_text('{"kind": "TFJob", "kind": "TFJob"}')
    err = assert_refused(lambda: load_manifest("job.json", searchpath=[tmp_path]), "tfjob", "one of the keys")
    assert "duplicate key 'kind'" in err.problem


@pytest.fixture
def folders(tmp_path: Path) -> tuple[Path, Path]:
    dag_folder = tmp_path / "dags"
    outside = tmp_path / "elsewhere"
    dag_folder.mkdir()
    outside.mkdir()
    (dag_folder / "job.yaml").write_text("kind: TFJob\n")
    (outside / "secret.yaml").write_text("kind: Secret\n")
    return dag_folder, outside


@pytest.mark.parametrize(
    "path", ["../elsewhere/secret.yaml", "ABSOLUTE", "sub/../../elsewhere/secret.yaml", "LINK"]
)
def test_template_paths_outside_the_dag_folders_are_refused(folders: tuple[Path, Path], path: str) -> None:
    from airflow_tfjob.build.manifest import load_manifest

    dag_folder, outside = folders
    (dag_folder / "link.yaml").symlink_to(outside / "secret.yaml")
    value = {"ABSOLUTE": str(outside / "secret.yaml"), "LINK": "link.yaml"}.get(path, path)
    err = assert_refused(
        lambda: load_manifest(value, searchpath=[dag_folder]),
        "tfjob",
        "allow_template_outside_dag_folder=True",
    )
    assert str(dag_folder) in err.problem and "outside" in err.problem
    # The DAG author may opt in.
    assert load_manifest(value, searchpath=[dag_folder], allow_outside=True) == {"kind": "Secret"}


def test_no_fallback_to_the_current_directory(
    folders: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_tfjob.build.manifest import load_manifest

    dag_folder, outside = folders
    monkeypatch.chdir(outside)
    assert_refused(
        lambda: load_manifest("secret.yaml", searchpath=[dag_folder]), "tfjob", "relative to the DAG's folder"
    )
    assert load_manifest("job.yaml", searchpath=[dag_folder]) == {"kind": "TFJob"}


# --------------------------------------------------------------------------- the operator


def _operator(tmp_path: Path, **kwargs: Any) -> Any:
    from airflow.sdk import DAG

    from airflow_tfjob.operators.tfjob import TFJobOperator

    with DAG("bad_inputs", schedule=None, template_searchpath=[str(tmp_path)]):
        return TFJobOperator(task_id="train", **{"image": "img:1", "render_only": True, **kwargs})


def _run(op: Any, params: dict[str, Any] | None = None) -> Any:
    context = task_context(params=params)
    op.render_template_fields(context)
    return op.execute(context)


OPERATOR_AT_PARSE = [
    ({"container_resources": "4 cpus"}, "container_resources", "container_resources={"),
    ({"container_resources": [("cpu", "4")]}, "container_resources", "container_resources={"),
    ({"hyperparameters": [1, 2]}, "hyperparameters", "hyperparameters={"),
    ({"env": {"A": {1}}}, "env.A", "env={"),
    ({"secret_env": {"A": None}}, "secret_env.A", "secret_env={"),
    ({"worker": "2"}, "worker", "worker=2"),
    ({"ps": 1.0}, "ps", "ps=1"),
    ({"chief": True}, "chief", "chief=1"),
    ({"kueue_queue": ["a"]}, "kueue_queue", "kueue_queue="),
    ({"name": 5}, "name", "name="),
    ({"namespace": ["ml"]}, "namespace", "namespace="),
    ({"in_cluster": "yes"}, "in_cluster", "in_cluster=True"),
    ({"tfjob": ["kind: TFJob"]}, "tfjob", "YAML text"),
    ({"tfjob": 42}, "tfjob", "YAML text"),
    ({"log_replicas": ["worker"]}, "log_replicas", "'master'"),
    ({"log_replicas": "wrker"}, "log_replicas", "replica type"),
    ({"log_replicas": "worker:x"}, "log_replicas", "'<type>:<index>'"),
    ({"on_finish_action": "remove"}, "on_finish_action", "'keep'"),
    ({"startup_timeout": -1}, "startup_timeout", "positive number"),
    ({"metrics": "loss"}, "metrics", "list of names"),
    ({"get_logs": "yes"}, "get_logs", "True or False"),
    ({"kubernetes_conn_id": ""}, "kubernetes_conn_id", "kubernetes_default"),
]


@pytest.mark.parametrize(("kwargs", "field", "fix"), OPERATOR_AT_PARSE)
def test_operator_refuses_bad_parameters_when_the_dag_is_parsed(
    tmp_path: Path, kwargs: dict[str, Any], field: str, fix: str
) -> None:
    assert_refused(lambda: _operator(tmp_path, **kwargs), field, fix)


OPERATOR_AT_RUN = [
    ({"worker": 2, "replicas": {"worker": 3}}, "replicas.worker", "in replicas= or as worker="),
    ({"ps": 1, "worker": 1, "replicas": {"PS": 2}}, "replicas.PS", "in replicas= or as ps="),
    ({"worker": 2, "log_replicas": "worker:2"}, "log_replicas", "name replicas the job has"),
    ({"worker": 2, "log_replicas": "chief"}, "log_replicas", "name replicas the job has"),
    ({"worker": 1, "log_replicas": "ps:0,worker:0"}, "log_replicas", "name replicas the job has"),
    (
        {"worker": 1, "image_pull_policy": "always"},
        "spec.tfReplicaSpecs.Worker.template.spec.containers[0].imagePullPolicy",
        "Always",
    ),
    ({"worker": 1, "env": {"A": "{{ params.a }}"}, "secret_env": {"A": "x"}}, "secret_env.A", "one place"),
    ({"worker": 1, "hyperparameters": "{{ params.hp }}"}, "hyperparameters", "must be defined"),
    ({"worker": 1, "args": ["--day={{ macros.nothing.here }}"]}, "args", "must be defined"),
    ({"worker": 1, "image": "img:{{ params.tag | nofilter }}"}, "image", "must be defined"),
    ({"worker": 1, "env": {"A": "{% if %}"}}, "env", "fix the template"),
]


@pytest.mark.parametrize(("kwargs", "field", "fix"), OPERATOR_AT_RUN)
def test_operator_refuses_bad_parameters_before_submitting(
    tmp_path: Path, kwargs: dict[str, Any], field: str, fix: str
) -> None:
    op = _operator(tmp_path, **kwargs)
    assert_refused(lambda: _run(op, {"a": "1"}), field, fix)


def test_template_path_from_params_is_refused(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text("kind: TFJob\n")
    op = _operator(tmp_path, tfjob="{{ params.manifest }}")
    err = assert_refused(
        lambda: _run(op, {"manifest": "job.yaml"}), "tfjob", "allow_template_path_from_params=True"
    )
    assert "looks like a file path" in err.problem
    op = _operator(tmp_path, tfjob="conf/{{ params.env }}.yaml")
    assert_refused(lambda: _run(op, {"env": "prod"}), "tfjob", "allow_template_path_from_params=True")


def test_template_path_from_params_with_the_opt_in_stays_inside_the_dag_folder(tmp_path: Path) -> None:
    template = "apiVersion: kubeflow.org/v1\nkind: TFJob\nspec:\n  tfReplicaSpecs:\n    Worker:\n" \
        "      replicas: {{ params.workers }}\n      template:\n        spec:\n          containers:\n" \
        "            - name: tensorflow\n              image: img:1\n"  # fmt: skip
    (tmp_path / "prod.yaml").write_text(template)
    op = _operator(tmp_path, tfjob="{{ params.env }}.yaml", allow_template_path_from_params=True)
    result = _run(op, {"env": "prod", "workers": 2})
    assert result["manifest"]["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] == 2
    op = _operator(tmp_path, tfjob="../{{ params.env }}.yaml", allow_template_path_from_params=True)
    assert_refused(lambda: _run(op, {"env": "etc/passwd"}), "tfjob", "allow_template_outside_dag_folder=True")


def test_an_absolute_template_path_is_refused_when_the_dag_is_parsed(tmp_path: Path) -> None:
    other = tmp_path.parent / f"{tmp_path.name}-other.yaml"
    other.write_text("kind: TFJob\n")
    try:
        # DagBag calls resolve_template_files when it parses the DAG file.
        op = _operator(tmp_path, tfjob=str(other))
        err = assert_refused(op.resolve_template_files, "tfjob", "allow_template_outside_dag_folder=True")
        assert str(tmp_path) in err.problem
        _operator(tmp_path, tfjob=str(other), allow_template_outside_dag_folder=True).resolve_template_files()
    finally:
        other.unlink()


def test_a_rendered_manifest_is_bounded_and_says_what_was_cut(tmp_path: Path) -> None:
    op = _operator(tmp_path, worker=1, env={"CONFIG": "c" * 50_000})
    result = _run(op)
    value = result["manifest"]["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0][
        "env"
    ][0]
    assert len(value["value"]) < 3000 and "more characters not shown" in value["value"]
    assert len(json.dumps(result)) < 10_000


# --------------------------------------------------------------------------- the sensor

SENSOR_BAD = [
    ({"name": "My_Job"}, "name", "lower-case letters"),
    ({"name": "job name"}, "name", "lower-case letters"),
    ({"name": "-job"}, "name", "lower-case letters"),
    ({"name": "9job"}, "name", "starting with a letter"),
    ({"name": "j" * 64}, "name", "at most 63"),
    ({"name": ""}, "name", "lower-case letters"),
    ({"name": 5}, "name", "lower-case letters"),
    ({"name": "job", "namespace": "ML"}, "namespace", "lower-case letters"),
    ({"name": "job", "namespace": "ml team"}, "namespace", "lower-case letters"),
    ({"name": "job", "namespace": "n" * 64}, "namespace", "at most 63"),
    ({"name": "job", "namespace": 3}, "namespace", "lower-case letters"),
    ({"name": "job", "target_condition": "succeeded"}, "target_condition", "case-sensitive"),
    ({"name": "job", "target_condition": "Done"}, "target_condition", "'Succeeded'"),
    ({"name": "job", "kubernetes_conn_id": None}, "kubernetes_conn_id", "kubernetes_default"),
    ({"name": "job", "config_file": 5}, "config_file", "as a string"),
    ({"name": "job", "in_cluster": "no"}, "in_cluster", "True or False"),
    ({"name": "job", "deferrable": "yes"}, "deferrable", "True or False"),
]


@pytest.mark.parametrize(("kwargs", "field", "fix"), SENSOR_BAD)
def test_sensor_refuses_bad_parameters_before_its_first_call(
    kwargs: dict[str, Any], field: str, fix: str
) -> None:
    from airflow_tfjob.sensors.tfjob import TFJobSensor

    assert_refused(lambda: TFJobSensor(task_id="wait", **kwargs), field, fix)


def test_sensor_checks_rendered_values_before_the_first_call() -> None:
    from airflow_tfjob.sensors.tfjob import TFJobSensor

    sensor = TFJobSensor(
        task_id="wait", name="{{ params.job }}", namespace="ml", kubernetes_conn_id="no_such_conn"
    )
    sensor.render_template_fields({"params": {"job": "Not_A_Name"}})
    # The connection does not exist: reaching the cluster would fail differently.
    assert_refused(lambda: sensor.poke({}), "name", "lower-case letters")


def test_operator_and_sensor_word_a_bad_name_alike(tmp_path: Path) -> None:
    from airflow_tfjob.sensors.tfjob import TFJobSensor

    with pytest.raises(JobValidationError) as from_sensor:
        TFJobSensor(task_id="wait", name="My_Job")
    with pytest.raises(JobValidationError) as from_operator:
        _run(_operator(tmp_path, worker=1, name="My_Job"))
    sensor_problem = from_sensor.value.problems[0]
    operator_problem = _problem_for(from_operator.value, "metadata.name")
    assert (sensor_problem.problem, sensor_problem.fix) == (operator_problem.problem, operator_problem.fix)


# --------------------------------------------------------------------------- @task.tfjob

DECORATOR_BAD = [
    ((_Obj(),), {}, "op_args[0]", "JSON values"),
    (({1, 2},), {}, "op_args[0]", "JSON values"),
    ((), {"cb": print}, "op_kwargs.cb", "JSON values"),
    ((), {"cfg": {"nested": _Obj()}}, "op_kwargs.cfg.nested", "JSON values"),
    ((), {"cfg": {1: "x"}}, "op_kwargs.cfg", "JSON values"),
    ((), {"rate": float("inf")}, "op_kwargs.rate", "JSON values"),
]


@pytest.mark.parametrize(("args", "kwargs", "field", "fix"), DECORATOR_BAD)
def test_decorator_arguments_that_cannot_reach_the_replicas(
    args: tuple[Any, ...], kwargs: dict[str, Any], field: str, fix: str
) -> None:
    from airflow_tfjob.decorators.replica_function import encode_call

    assert_refused(lambda: encode_call("train", args, kwargs), field, fix)


def test_decorator_secret_args_must_name_parameters() -> None:
    from airflow_tfjob.decorators.replica_function import secret_arguments

    def train(data: str, token: str) -> None:
        del data, token

    assert secret_arguments(train, ["token"], ["d"], {"token": "t0k3n"}) == ["t0k3n"]
    assert secret_arguments(train, ["token"], ["d", "t0k3n"], {}) == ["t0k3n"]
    assert_refused(
        lambda: secret_arguments(train, ["tokn"], [], {}), "secret_args", "name the function's parameters"
    )


def test_decorator_rejects_a_string_for_secret_args() -> None:
    from airflow.sdk import DAG, task

    with DAG("dec_bad", schedule=None):

        @task.tfjob(secret_args="token")
        def train(token: str) -> None:
            del token

        assert_refused(lambda: train("x"), "secret_args", "secret_args=['token']")


def test_decorator_hides_the_call_of_secret_arguments(tmp_path: Path) -> None:
    from airflow.sdk import DAG, task

    with DAG("dec_secret", schedule=None):

        @task.tfjob(secret_args=["token"], render_only=True)
        def train(token: str) -> None:
            del token

        op = train("very-secret-token").operator
    result = op.execute(task_context())
    text = json.dumps(result)
    assert "very-secret-token" not in text
    from airflow_tfjob.decorators.replica_function import CALL_ENV

    env = result["manifest"]["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": CALL_ENV, "value": "***"} in env
