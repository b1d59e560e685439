from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from airflow_tfjob import constants as c
from airflow_tfjob.build.manifest import (
    PARAMETER_NAMES,
    REDACTED,
    IntendedCleanup,
    JobParameters,
    build_tfjob,
    format_hyperparameters,
    intended_cleanup,
    load_manifest,
    redact,
    submission_manifest,
    tensorflow_container,
)
from airflow_tfjob.build.validation import JobValidationError, validate_job

FIXTURES = Path(__file__).parent / "fixtures"
DOC_FILES = sorted(FIXTURES.glob("kubeflow_docs_*.yaml"))
CMD = ["python", "-m", "trainer.task", "--batch_size=32", "--training_steps=1000"]


def fixture(name: str) -> dict[str, Any]:
    return yaml.safe_load((FIXTURES / name).read_text())


def tf(manifest: dict[str, Any], rtype: str) -> dict[str, Any]:
    container = tensorflow_container(manifest["spec"]["tfReplicaSpecs"][rtype])
    assert container is not None
    return container


def pod(manifest: dict[str, Any], rtype: str) -> dict[str, Any]:
    spec: dict[str, Any] = manifest["spec"]["tfReplicaSpecs"][rtype]["template"]["spec"]
    return spec


# --------------------------------------------------------------------------- documentation examples


def test_three_documentation_examples_exist() -> None:
    assert len(DOC_FILES) == 3


@pytest.mark.parametrize("path", DOC_FILES, ids=[p.stem for p in DOC_FILES])
def test_documentation_examples_load_build_and_validate_unchanged(path: Path) -> None:
    original = yaml.safe_load(path.read_text())
    loaded = load_manifest(str(path), searchpath=[FIXTURES])
    assert loaded == original
    built = build_tfjob(base=loaded)
    assert built == original
    validate_job(built)  # raises on any error


def test_documentation_distributed_example_from_parameters() -> None:
    built = build_tfjob(
        generate_name="tfjob",
        namespace="your-user-namespace",
        replicas={"ps": 1, "worker": 3},
        image="gcr.io/your-project/your-image",
        command="python -m trainer.task --batch_size=32 --training_steps=1000",
        restart_policy="OnFailure",
        pod_annotations={"sidecar.istio.io/inject": "false"},
    )
    assert built == fixture("kubeflow_docs_distributed.yaml")
    assert validate_job(built) == []


def test_documentation_secret_example_from_parameters() -> None:
    built = build_tfjob(
        generate_name="tfjob",
        namespace="your-user-namespace",
        replicas={"PS": 1, "Worker": 1},
        image="gcr.io/your-project/your-image",
        command=CMD,
        restart_policy="OnFailure",
        env={"GOOGLE_APPLICATION_CREDENTIALS": "/etc/secrets/user-gcp-sa.json"},
        secret_volumes=[{"secret": "user-gcp-sa", "mount_path": "/etc/secrets", "volume_name": "sa"}],
        pod_annotations={"sidecar.istio.io/inject": "false"},
    )
    assert built == fixture("kubeflow_docs_secret.yaml")


def test_documentation_gpu_example_from_parameters() -> None:
    args = "python tf_cnn_benchmarks.py --batch_size=32 --model=resnet50 --variable_update=parameter_server"
    args += " --flush_stdout=true --num_gpus=1 --local_parameter_device=cpu --device={} --data_format=NHWC"
    built = build_tfjob(
        "tf-smoke-gpu",
        replicas={"PS": 1, "Worker": 1},
        images={
            "ps": "gcr.io/kubeflow/tf-benchmarks-cpu:v20171202-bdab599-dirty-284af3",
            "worker": "gcr.io/kubeflow/tf-benchmarks-gpu:v20171202-bdab599-dirty-284af3",
        },
        ports={"tfjob-port": 2222},
        gpus=1,
        replica_resources={"ps": {"limits": {"cpu": "1"}}},
        working_dir="/opt/tf-benchmarks/scripts/tf_cnn_benchmarks",
    )
    for rtype, device in (("PS", "cpu"), ("Worker", "gpu")):
        # the parameter surface sets args per job; per-type args come from a base manifest
        tf(built, rtype)["args"] = args.format(device).split()
    expected = fixture("kubeflow_docs_gpu.yaml")
    for replica in expected["spec"]["tfReplicaSpecs"].values():
        del replica["template"]["metadata"]  # creationTimestamp: null, an artefact of kubectl
        del replica["template"]["spec"]["restartPolicy"]
    assert built == expected
    assert GPU not in tf(built, "PS").get("resources", {}).get("limits", {})


GPU = c.GPU_RESOURCE


# --------------------------------------------------------------------------- parameters


def test_defaults_to_one_worker() -> None:
    built = build_tfjob("j", "ns", image="img")
    assert built["apiVersion"] == "kubeflow.org/v1" and built["kind"] == "TFJob"
    assert built["metadata"] == {"name": "j", "namespace": "ns"}
    assert built["spec"] == {
        "tfReplicaSpecs": {
            "Worker": {
                "replicas": 1,
                "template": {"spec": {"containers": [{"name": "tensorflow", "image": "img"}]}},
            }
        }
    }


def test_parameter_names_and_unknown_keyword() -> None:
    assert {"replicas", "hyperparameters", "pvc", "queue", "scheduling", "secret_env"} <= set(PARAMETER_NAMES)
    with pytest.raises(TypeError):
        build_tfjob("j", image="i", gpu=1)
    with pytest.raises(TypeError, match="either"):
        build_tfjob("j", params=JobParameters(image="i"), image="i")
    assert build_tfjob("j", params=JobParameters(image="i")) == build_tfjob("j", image="i")


@pytest.mark.parametrize(
    ("hyper", "expected"),
    [
        (
            {"epochs": 10, "batchsize": 32, "learningrate": 0.001},
            ["--epochs=10", "--batchsize=32", "--learningrate=0.001"],
        ),
        ({"fp16": True, "debug": False, "seed": None}, ["--fp16"]),
        ({"layers": [64, 32], "opt": {"b": 1, "a": "x"}}, ["--layers=64,32", '--opt={"a":"x","b":1}']),
        ({"-v": 2, "lr": 1e-5}, ["-v=2", "--lr=1e-05"]),
    ],
)
def test_format_hyperparameters(hyper: dict[str, Any], expected: list[str]) -> None:
    assert format_hyperparameters(hyper) == expected


def test_hyperparameters_appended_in_order_and_replace_existing_flags() -> None:
    built = build_tfjob(
        "j",
        image="i",
        args=["train.py", "--epochs=1", "--fp16", "--keep=1"],
        hyperparameters={"epochs": 5, "fp16": True, "lr": 0.1},
    )
    assert tf(built, "Worker")["args"] == ["train.py", "--keep=1", "--epochs=5", "--fp16", "--lr=0.1"]


def test_hyperparameters_extend_base_args() -> None:
    base = build_tfjob("j", image="i", args="train.py --epochs=1")
    built = build_tfjob(base=base, hyperparameters={"epochs": 3})
    assert tf(built, "Worker")["args"] == ["train.py", "--epochs=3"]


def test_file_like_arguments_stay_strings() -> None:
    built = build_tfjob(
        "j", image="i", args=["--config=conf.yaml", "model.json"], command=["python", "x.yml"]
    )
    assert tf(built, "Worker")["args"] == ["--config=conf.yaml", "model.json"]
    assert tf(built, "Worker")["command"] == ["python", "x.yml"]


def test_env_forms_merge_by_name() -> None:
    base = build_tfjob("j", image="i", env={"A": "old", "KEEP": "1"})
    built = build_tfjob(
        base=base,
        env={
            "A": "new",
            "FLAG": True,
            "N": 3,
            "POD": {"valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        },
        env_from_secrets={"TOKEN": "creds:token", "PAIR": ("s", "k")},
        env_from_config_maps={"MODE": "settings:mode"},
        env_from=["secret:all-secrets", "configmap:all-settings", {"configMapRef": {"name": "x"}}],
    )
    env = tf(built, "Worker")["env"]
    assert env == [
        {"name": "A", "value": "new"},
        {"name": "KEEP", "value": "1"},
        {"name": "FLAG", "value": "true"},
        {"name": "N", "value": "3"},
        {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}},
        {"name": "PAIR", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
        {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "mode"}}},
    ]
    assert tf(built, "Worker")["envFrom"] == [
        {"secretRef": {"name": "all-secrets"}},
        {"configMapRef": {"name": "all-settings"}},
        {"configMapRef": {"name": "x"}},
    ]
    validate_job(built)


def test_env_list_form() -> None:
    built = build_tfjob("j", image="i", env=[{"name": "A", "value": "1"}])
    assert tf(built, "Worker")["env"] == [{"name": "A", "value": "1"}]


@pytest.mark.parametrize(
    ("kwargs", "field", "fix"),
    [
        ({"env_from_secrets": {"T": "creds"}}, "env_from_secrets.T", "secret-name:key"),
        ({"env_from": ["creds"]}, "env_from[0]", "secret:<name>"),
        ({"env": {"A": None}}, "env.A", "env={"),
        ({"env": [{"value": "x"}]}, "env[0]", "name"),
        ({"pvc": "data"}, "pvc", "data:/data"),
        ({"pvc": [{"claim": "data"}]}, "pvc[0]", "mount_path"),
        ({"secret_volumes": [{"secret": "s"}]}, "secret_volumes[0]", "mount_path"),
        ({"resources": {"cpus": "1"}}, "resources.cpus", "did you mean 'cpu'"),
        ({"gpus": 1.5}, "gpus", "gpus=1"),
        ({"gpus": -1}, "gpus", "integer"),
        ({"replicas": {"workers": 2}}, "replicas.workers", "did you mean 'Worker'"),
        ({"replicas": {"worker": 1, "Worker": 2}}, "replicas.Worker", "once"),
        ({"images": {"ps": "x"}}, "images.ps", "replicas="),
        ({"replica_resources": {"chief": {"cpu": "1"}}}, "replica_resources.chief", "replicas="),
        ({"restart_policy": {"evaluator": "Never"}}, "restart_policy.evaluator", "replicas="),
        ({"scheduling": {"min_availabe": 2}}, "scheduling.min_availabe", "min_available"),
        ({"command": "python 'unclosed"}, "command", "list"),
        ({"args": 5}, "args", "args=["),
    ],
)
def test_bad_parameters_name_field_and_fix(kwargs: dict[str, Any], field: str, fix: str) -> None:
    with pytest.raises(JobValidationError) as err:
        build_tfjob("j", image="i", **kwargs)
    assert err.value.field == field
    assert fix in err.value.fix
    assert field in str(err.value)


def test_resources_shorthand_explicit_gpus_and_per_type() -> None:
    built = build_tfjob(
        "j",
        image="i",
        replicas={"chief": 1, "ps": 2, "worker": 2, "evaluator": 1},
        resources={"cpu": "2", "memory": "4Gi", "limits": {"ephemeral-storage": "10Gi"}},
        gpus=1,
        replica_resources={"ps": {"cpu": "1", "memory": "2Gi"}, "worker": {"gpus": 2}},
    )
    assert tf(built, "Chief")["resources"] == {
        "requests": {"cpu": "2", "memory": "4Gi"},
        "limits": {"cpu": "2", "memory": "4Gi", "ephemeral-storage": "10Gi", GPU: 1},
    }
    assert tf(built, "PS")["resources"] == {
        "requests": {"cpu": "1", "memory": "2Gi"},
        "limits": {"cpu": "1", "memory": "2Gi", "ephemeral-storage": "10Gi"},
    }
    assert tf(built, "Worker")["resources"]["limits"][GPU] == 2
    assert tf(built, "Evaluator")["resources"]["limits"][GPU] == 1
    validate_job(built)


def test_volumes_pvc_and_secret_shortcuts() -> None:
    built = build_tfjob(
        "j",
        image="i",
        pvc=[
            "data:/data",
            {"claim": "Models_V2", "mount_path": "/models", "read_only": True, "sub_path": "v2"},
        ],
        secret_volumes={"creds": "/etc/creds"},
        config_map_volumes=[
            {"config_map": "settings", "mount_path": "/etc/settings", "items": [{"key": "a", "path": "a"}]}
        ],
        volumes=[{"name": "scratch", "emptyDir": {}}],
        volume_mounts=[{"name": "scratch", "mountPath": "/tmp/scratch"}],
    )
    assert pod(built, "Worker")["volumes"] == [
        {"name": "scratch", "emptyDir": {}},
        {"name": "pvc-data", "persistentVolumeClaim": {"claimName": "data"}},
        {"name": "pvc-models-v2", "persistentVolumeClaim": {"claimName": "Models_V2", "readOnly": True}},
        {"name": "secret-creds", "secret": {"secretName": "creds"}},
        {
            "name": "configmap-settings",
            "configMap": {"name": "settings", "items": [{"key": "a", "path": "a"}]},
        },
    ]
    assert tf(built, "Worker")["volumeMounts"] == [
        {"name": "scratch", "mountPath": "/tmp/scratch"},
        {"name": "pvc-data", "mountPath": "/data"},
        {"name": "pvc-models-v2", "mountPath": "/models", "readOnly": True, "subPath": "v2"},
        {"name": "secret-creds", "mountPath": "/etc/creds", "readOnly": True},
        {"name": "configmap-settings", "mountPath": "/etc/settings", "readOnly": True},
    ]
    validate_job(built)
    ro = build_tfjob("j", image="i", pvc="data:/data:ro")
    assert tf(ro, "Worker")["volumeMounts"] == [{"name": "pvc-data", "mountPath": "/data", "readOnly": True}]


def test_pod_level_settings_on_every_replica() -> None:
    built = build_tfjob(
        "j",
        image="i",
        replicas={"worker": 2, "ps": 1},
        node_selector={"pool": "gpu"},
        tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
        service_account="trainer",
        image_pull_secrets=["regcred"],
        pod_labels={"team": "ml"},
        image_pull_policy="IfNotPresent",
    )
    for rtype in ("Worker", "PS"):
        spec = pod(built, rtype)
        assert spec["nodeSelector"] == {"pool": "gpu"}
        assert spec["tolerations"] == [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
        assert spec["serviceAccountName"] == "trainer"
        assert spec["imagePullSecrets"] == [{"name": "regcred"}]
        assert built["spec"]["tfReplicaSpecs"][rtype]["template"]["metadata"]["labels"] == {"team": "ml"}
        assert tf(built, rtype)["imagePullPolicy"] == "IfNotPresent"


def test_job_metadata_queue_and_run_policy() -> None:
    built = build_tfjob(
        "j",
        "ns",
        image="i",
        labels={"team": "ml"},
        annotations={"note": "x"},
        queue="team-a",
        clean_pod_policy="Running",
        ttl_seconds_after_finished=600,
        active_deadline_seconds=3600,
        backoff_limit=3,
        suspend=True,
        scheduling={"queue": "q", "min_available": 2, "priorityClass": "high"},
        success_policy="AllWorkers",
        enable_dynamic_worker=True,
        replicas={"worker": 2},
    )
    assert built["metadata"]["labels"] == {"team": "ml", c.KUEUE_QUEUE_LABEL: "team-a"}
    assert built["metadata"]["annotations"] == {"note": "x"}
    assert built["spec"]["runPolicy"] == {
        "cleanPodPolicy": "Running",
        "ttlSecondsAfterFinished": 600,
        "activeDeadlineSeconds": 3600,
        "backoffLimit": 3,
        "suspend": True,
        "schedulingPolicy": {"queue": "q", "minAvailable": 2, "priorityClass": "high"},
    }
    assert built["spec"]["successPolicy"] == "AllWorkers"
    assert built["spec"]["enableDynamicWorker"] is True
    validate_job(built)


def test_restart_policy_per_type() -> None:
    built = build_tfjob(
        "j", image="i", replicas={"worker": 2, "ps": 1}, restart_policy={"ps": "Always", "Worker": "ExitCode"}
    )
    specs = built["spec"]["tfReplicaSpecs"]
    assert specs["PS"]["restartPolicy"] == "Always"
    assert specs["Worker"]["restartPolicy"] == "ExitCode"


# --------------------------------------------------------------------------- base + overrides


SIDECAR_BASE: dict[str, Any] = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "TFJob",
    "metadata": {"name": "base", "labels": {"from": "base"}},
    "spec": {
        "runPolicy": {"cleanPodPolicy": "All", "backoffLimit": 1},
        "tfReplicaSpecs": {
            "worker": {
                "replicas": 2,
                "template": {
                    "spec": {
                        "containers": [
                            {"name": "proxy", "image": "envoy"},
                            {"name": "tensorflow", "image": "tf:1", "env": [{"name": "A", "value": "1"}]},
                        ],
                        "volumes": [{"name": "data", "emptyDir": {}}],
                    }
                },
            }
        },
    },
}


def test_explicit_parameters_override_base_tensorflow_container_only() -> None:
    base_copy = copy.deepcopy(SIDECAR_BASE)
    built = build_tfjob(
        "override",
        base=SIDECAR_BASE,
        image="tf:2",
        env={"B": "2"},
        replicas={"Worker": 4},
        labels={"extra": "yes"},
        backoff_limit=5,
    )
    assert SIDECAR_BASE == base_copy  # the base is not modified
    assert list(built["spec"]["tfReplicaSpecs"]) == ["Worker"]  # canonical key
    worker = built["spec"]["tfReplicaSpecs"]["Worker"]
    assert worker["replicas"] == 4
    proxy, tensorflow = worker["template"]["spec"]["containers"]
    assert proxy == {"name": "proxy", "image": "envoy"}
    assert tensorflow["image"] == "tf:2"
    assert tensorflow["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]
    assert built["metadata"] == {"name": "override", "labels": {"from": "base", "extra": "yes"}}
    assert built["spec"]["runPolicy"] == {"cleanPodPolicy": "All", "backoffLimit": 5}


def test_new_replica_type_copies_worker_template() -> None:
    built = build_tfjob(base=SIDECAR_BASE, replicas={"ps": 1}, images={"ps": "tf-cpu"})
    ps = built["spec"]["tfReplicaSpecs"]["PS"]
    assert ps["replicas"] == 1
    assert ps["template"]["spec"]["volumes"] == [{"name": "data", "emptyDir": {}}]
    assert tf(built, "PS")["image"] == "tf-cpu"
    assert tf(built, "Worker")["image"] == "tf:1"


def test_base_with_duplicate_case_keys_is_refused() -> None:
    base = copy.deepcopy(SIDECAR_BASE)
    base["spec"]["tfReplicaSpecs"]["Worker"] = copy.deepcopy(base["spec"]["tfReplicaSpecs"]["worker"])
    with pytest.raises(JobValidationError) as err:
        build_tfjob(base=base)
    assert err.value.field == "spec.tfReplicaSpecs.Worker"
    assert "case-insensitive" in err.value.problem


def test_base_without_tensorflow_container_is_left_for_validation() -> None:
    base = {
        "spec": {
            "tfReplicaSpecs": {
                "Worker": {"template": {"spec": {"containers": [{"name": "main", "image": "x"}]}}}
            }
        }
    }
    built = build_tfjob("j", base=base, image="y")
    assert built["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"] == [
        {"name": "main", "image": "x"}
    ]
    with pytest.raises(JobValidationError, match="tensorflow"):
        validate_job(built)


# --------------------------------------------------------------------------- load_manifest

TEMPLATE = """
apiVersion: kubeflow.org/v1
kind: TFJob
metadata:
  name: {{ name }}
spec:
  tfReplicaSpecs:
    Worker:
      replicas: {{ workers }}
      template:
        spec:
          containers:
            - name: tensorflow
              image: img
              args: ["--config=conf.yaml"]
"""


def test_load_manifest_dict_and_strings() -> None:
    data = {"kind": "TFJob"}
    loaded = load_manifest(data)
    assert loaded == data and loaded is not data
    assert load_manifest("kind: TFJob\nmetadata: {name: x}") == {"kind": "TFJob", "metadata": {"name": "x"}}
    assert load_manifest('{"kind": "TFJob"}') == {"kind": "TFJob"}
    assert load_manifest("kind: TFJob.yaml") == {"kind": "TFJob.yaml"}  # YAML text, not a path


def test_load_manifest_renders_file_with_plain_jinja(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text(TEMPLATE)
    loaded = load_manifest("job.yaml", searchpath=[tmp_path], context={"name": "rendered", "workers": 3})
    assert loaded["metadata"]["name"] == "rendered"
    assert loaded["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] == 3
    assert tf(loaded, "Worker")["args"] == ["--config=conf.yaml"]


def test_load_manifest_uses_callers_renderer(tmp_path: Path) -> None:
    path = tmp_path / "job.yml"
    path.write_text(TEMPLATE)
    seen: list[str] = []

    def render(text: str) -> str:
        seen.append(text)
        return text.replace("{{ name }}", "from-airflow").replace("{{ workers }}", "2")

    loaded = load_manifest(str(path), render=render, searchpath=[tmp_path])
    assert seen == [TEMPLATE]
    assert loaded["metadata"]["name"] == "from-airflow"


def test_load_manifest_json_file(tmp_path: Path) -> None:
    (tmp_path / "job.json").write_text(json.dumps({"kind": "TFJob", "metadata": {"name": "{{ n }}"}}))
    loaded = load_manifest(str(tmp_path / "job.json"), context={"n": "x"}, searchpath=[tmp_path])
    assert loaded["metadata"]["name"] == "x"


def test_load_manifest_undefined_variable_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "job.yaml").write_text(TEMPLATE)
    with pytest.raises(JobValidationError, match=r"job.yaml line \d+: 'name' is undefined"):
        load_manifest("job.yaml", searchpath=[tmp_path])


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("missing.yaml", "not found"),
        ("- a\n- b", "holds a list"),
        ("kind: [unclosed", "not valid YAML"),
    ],
)
def test_load_manifest_errors(value: str, problem: str) -> None:
    with pytest.raises(JobValidationError) as err:
        load_manifest(value)
    assert err.value.field == "tfjob"
    assert problem in err.value.problem


# --------------------------------------------------------------------------- cleanup intent and redaction


def test_submission_manifest_moves_cleanup_into_annotations() -> None:
    manifest = build_tfjob(
        "j", image="i", clean_pod_policy="All", ttl_seconds_after_finished=60, backoff_limit=2
    )
    submitted, intent = submission_manifest(manifest)
    assert intent == IntendedCleanup("All", 60)
    assert submitted["spec"]["runPolicy"] == {"cleanPodPolicy": "None", "backoffLimit": 2}
    annotations = submitted["metadata"]["annotations"]
    assert annotations[c.ANNOTATION_INTENDED_CLEAN_POD_POLICY] == "All"
    assert annotations[c.ANNOTATION_INTENDED_TTL] == "60"
    assert manifest["spec"]["runPolicy"]["cleanPodPolicy"] == "All"  # input untouched
    # idempotent: resubmitting a submitted manifest keeps the intent
    again, intent_again = submission_manifest(submitted)
    assert intent_again == intent and again == submitted
    # a live job read back from the cluster carries the intent too
    assert intended_cleanup(submitted) == intent
    assert IntendedCleanup.from_dict(json.loads(json.dumps(intent.to_dict()))) == intent


def test_submission_manifest_defaults() -> None:
    submitted, intent = submission_manifest(build_tfjob("j", image="i"))
    assert intent == IntendedCleanup("None", None)
    assert submitted["spec"]["runPolicy"] == {"cleanPodPolicy": "None"}
    assert c.ANNOTATION_INTENDED_TTL not in submitted["metadata"]["annotations"]
    validate_job(submitted)


def test_redact_hides_secret_literals_only() -> None:
    built = build_tfjob(
        "j",
        image="i",
        replicas={"worker": 2, "ps": 1},
        env={"PLAIN": "visible"},
        secret_env={"API_TOKEN": "s3cr3t", "DB_PASSWORD": "hunter2"},
        env_from_secrets={"REF": "creds:key"},
    )
    assert built["metadata"]["annotations"][c.ANNOTATION_SECRET_ENV] == '["API_TOKEN","DB_PASSWORD"]'
    safe = redact(built)
    text = json.dumps(safe)
    assert "s3cr3t" not in text and "hunter2" not in text
    assert "visible" in text and "creds" in text
    for rtype in ("Worker", "PS"):
        env = {e["name"]: e for e in tf(safe, rtype)["env"]}
        assert env["API_TOKEN"]["value"] == REDACTED
        assert env["REF"] == {"name": "REF", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "key"}}}
    assert "s3cr3t" in json.dumps(built)  # the original still carries the value to submit
    assert "visible" not in json.dumps(redact(built, extra_names=["PLAIN"]))
