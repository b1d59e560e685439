"""build_job for every kubeflow.org/v1 kind: the manifest's shape, and the parameters a kind refuses."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_tfjob.build.manifest import PARAMETER_NAMES, build_job, build_tfjob, redact
from airflow_tfjob.build.paramtypes import PARAMETER_TYPES
from airflow_tfjob.build.validation import JobValidationError, validate_job
from airflow_tfjob.jobs import kinds
from airflow_tfjob.jobs.kinds import KINDS, PADDLEJOB, PYTORCHJOB, TFJOB, XGBOOSTJOB, JobKind
from airflow_tfjob.operators import params
from airflow_tfjob.operators.building import manifest_arguments

TF_TYPES = TFJOB.replica_types


def _specs(manifest: dict[str, Any], kind: JobKind) -> dict[str, Any]:
    specs: dict[str, Any] = manifest["spec"][kind.spec_key]
    return specs


def _containers(manifest: dict[str, Any], kind: JobKind, rtype: str) -> list[dict[str, Any]]:
    containers: list[dict[str, Any]] = _specs(manifest, kind)[rtype]["template"]["spec"]["containers"]
    return containers


def _refused(call: Any, *args: Any, **kwargs: Any) -> JobValidationError:
    with pytest.raises(JobValidationError) as raised:
        call(*args, **kwargs)
    return raised.value


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.kind)
def test_a_minimal_job_of_every_kind_has_the_kinds_shape_and_validates(kind: JobKind) -> None:
    manifest = build_job(kind, "job", "ml", image="img:1")
    assert (manifest["apiVersion"], manifest["kind"]) == ("kubeflow.org/v1", kind.kind)
    assert list(manifest["spec"]) == [kind.spec_key]
    # One Worker, or the type the kind cannot do without (XGBoostJob's Master).
    expected = "Master" if kind is XGBOOSTJOB else "Worker"
    assert list(_specs(manifest, kind)) == [expected]
    assert _specs(manifest, kind)[expected]["replicas"] == 1
    assert _containers(manifest, kind, expected) == [{"name": kind.container, "image": "img:1"}]
    said = {
        TFJOB: ["no TF_CONFIG"],
        PYTORCHJOB: ["no end", "no MASTER_ADDR"],
        PADDLEJOB: ["no end"],
    }.get(kind, [])
    warnings = validate_job(manifest)
    assert len(warnings) == len(said) and all(s in w for s, w in zip(said, sorted(warnings), strict=True))


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.kind)
def test_every_type_of_the_kind_can_be_asked_for_in_any_case(kind: JobKind) -> None:
    # Every type the kind has (a TFJob takes a Chief or a Master, not both).
    counts = {rtype.upper(): 1 for rtype in kind.replica_types if (kind, rtype) != (TFJOB, "Master")}
    manifest = build_job(
        kind, "job", image="img", replicas=counts, images={kind.replica_types[0].lower(): "other"}
    )
    assert list(_specs(manifest, kind)) == [kind.canonical_type(t) for t in counts]
    assert _containers(manifest, kind, kind.replica_types[0])[0]["image"] == "other"
    validate_job(manifest)


def test_build_tfjob_is_build_job_for_tfjob_and_kinds_are_named_or_given() -> None:
    arguments: dict[str, Any] = {"image": "tf:2", "replicas": {"chief": 1, "worker": 2}, "env": {"A": 1}}
    assert (
        build_tfjob("j", **arguments)
        == build_job(TFJOB, "j", **arguments)
        == build_job("tfjob", "j", **arguments)
    )
    assert build_job("pytorchjobs", "j", image="x") == build_job(PYTORCHJOB, "j", image="x")
    with pytest.raises(ValueError, match="MPIJob v1 is not supported"):
        build_job("MPIJob", "j")


# (kind, TFJob replica type it has not): each must be refused wherever a parameter names it.
MISSING = [(k, t) for k in KINDS for t in TF_TYPES if t not in k.replica_types]


@pytest.mark.parametrize(("kind", "rtype"), MISSING, ids=[f"{k.kind}-{t}" for k, t in MISSING])
def test_a_replica_type_the_kind_lacks_is_refused_naming_the_parameter(kind: JobKind, rtype: str) -> None:
    said = f"{'an' if kind is XGBOOSTJOB else 'a'} {kind.kind} has no {rtype} replicas; its replica types are"
    shortcut = rtype.lower()

    class Operator:
        image = "img"

    setattr(Operator, shortcut, 1)
    error = _refused(manifest_arguments, Operator(), kind)
    assert (error.field, error.kind) == (shortcut, kind.kind)
    assert said in error.problem and str(error).startswith(f"Invalid {kind.kind}: {shortcut}: ")
    for param, value in (
        ("replicas", {shortcut: 1}),
        ("images", {shortcut: "x"}),
        ("replica_resources", {shortcut: {"cpu": "1"}}),
        ("replica_placement", {shortcut: {"node_selector": {"pool": "cpu"}}}),
        ("restart_policy", {shortcut: "Never"}),
    ):
        error = _refused(build_job, kind, "j", image="i", **{param: value})
        assert error.field == f"{param}.{shortcut}" and said in error.problem, str(error)


def test_the_refusal_lists_the_kinds_types_and_who_has_the_type() -> None:
    error = _refused(build_job, PYTORCHJOB, "j", replicas={"ps": 1})
    assert str(error) == (
        "Invalid PyTorchJob: replicas.ps: a PyTorchJob has no PS replicas; its replica types are Master and "
        "Worker. Fix: remove replicas.ps, or run the job as a kind that has PS replicas (TFJob has them)."
    )
    error = _refused(build_job, kinds.JAXJOB, "j", replicas={"master": 1})
    assert "its replica types are Worker" in error.problem
    assert "TFJob, PyTorchJob, XGBoostJob, PaddleJob have them" in error.fix


def test_a_misspelt_type_gets_a_suggestion_from_the_kinds_types() -> None:
    error = _refused(build_job, PYTORCHJOB, "j", replicas={"workers": 2})
    assert error.field == "replicas.workers" and "did you mean 'Worker'" in error.fix
    assert "'Master', 'Worker'" in error.fix


def test_shortcuts_the_kind_has_pass_and_fold_into_replicas() -> None:
    class Operator:
        master = 1
        worker = 3
        nproc_per_node = 2

    arguments = manifest_arguments(Operator(), "PyTorchJob")
    assert arguments == {"replicas": {"master": 1, "worker": 3}, "nproc_per_node": 2}
    manifest = build_job(PYTORCHJOB, "j", image="i", **arguments)
    assert {t: s["replicas"] for t, s in _specs(manifest, PYTORCHJOB).items()} == {"Master": 1, "Worker": 3}
    assert manifest["spec"]["nprocPerNode"] == "2"
    validate_job(manifest)


@pytest.mark.parametrize("other", [k for k in KINDS if k is not PYTORCHJOB], ids=lambda k: k.kind)
def test_a_base_of_another_kind_is_refused_naming_the_field_and_the_fix(other: JobKind) -> None:
    base = build_job(other, "j", image="i")
    error = _refused(build_job, PYTORCHJOB, base=base)
    assert error.field == "kind"
    assert f"a {other.kind!r}" in error.problem or f"an {other.kind!r}" in error.problem
    assert "set kind: PyTorchJob" in error.fix and "spec.pytorchReplicaSpecs" in error.fix


def test_a_base_whose_kind_is_spelt_in_another_case_is_left_to_validation() -> None:
    manifest = build_job(PYTORCHJOB, "j", base={"kind": "pytorchjob"}, image="i")
    error = _refused(validate_job, manifest)
    assert (error.field, error.fix) == ("kind", "write it exactly 'PyTorchJob'")


def test_a_base_without_kind_takes_the_requested_one() -> None:
    base = {
        "spec": {
            "pytorchReplicaSpecs": {"Worker": {"template": {"spec": {"containers": [{"name": "pytorch"}]}}}}
        }
    }
    manifest = build_job(PYTORCHJOB, "j", base=base, image="i")
    assert manifest["kind"] == "PyTorchJob" and _containers(manifest, PYTORCHJOB, "Worker")[0]["image"] == "i"


def test_base_keys_in_another_case_are_renamed_for_tfjob_and_refused_for_the_others() -> None:
    tf = build_tfjob("j", base={"spec": {"tfReplicaSpecs": {"worker": {"replicas": 2}}}}, image="i")
    assert list(tf["spec"]["tfReplicaSpecs"]) == ["Worker"]
    base = {"kind": "PyTorchJob", "spec": {"pytorchReplicaSpecs": {"worker": {}, "MASTER": {}}}}
    error = _refused(build_job, PYTORCHJOB, base=base)
    assert [p.field for p in error.problems] == [
        "spec.pytorchReplicaSpecs.worker",
        "spec.pytorchReplicaSpecs.MASTER",
    ]
    assert error.problems[1].fix == "rename the key to 'Master'"
    assert "matches replica types case-sensitively" in error.problems[0].problem


@pytest.mark.parametrize("kind", [PYTORCHJOB, XGBOOSTJOB], ids=lambda k: k.kind)
def test_a_master_from_a_template_gets_its_one_replica_written(kind: JobKind) -> None:
    # The webhook checks the object before defaults apply: Master replicas must be written.
    base = {
        "spec": {
            kind.spec_key: {"Master": {"template": {"spec": {"containers": [{"name": kind.container}]}}}}
        }
    }
    manifest = build_job(kind, "j", base=base, image="i")
    assert _specs(manifest, kind)["Master"]["replicas"] == 1
    paddle = build_job(PADDLEJOB, "j", base={"spec": {"paddleReplicaSpecs": base["spec"][kind.spec_key]}})
    assert "replicas" not in _specs(paddle, PADDLEJOB)["Master"]  # nothing to please: PaddleJob's webhook


def test_parameters_set_the_kinds_container_only() -> None:
    pod = {"containers": [{"name": "pytorch", "image": "old"}, {"name": "tensorflow", "image": "side"}]}
    base = {"spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 1, "template": {"spec": pod}}}}}
    manifest = build_job(PYTORCHJOB, "j", base=base, image="new", env={"A": "1"}, gpus=1)
    main, sidecar = _containers(manifest, PYTORCHJOB, "Worker")
    assert main["image"] == "new" and main["env"] == [{"name": "A", "value": "1"}]
    assert main["resources"] == {"limits": {"nvidia.com/gpu": 1}}
    assert sidecar == {"name": "tensorflow", "image": "side"}


@pytest.mark.parametrize(("value", "written"), [(4, "4"), ("auto", "auto"), ("gpu", "gpu"), ("8", "8")])
def test_nproc_per_node_becomes_the_string_the_crd_wants(value: Any, written: str) -> None:
    manifest = build_job(PYTORCHJOB, "j", image="i", nproc_per_node=value)
    assert manifest["spec"]["nprocPerNode"] == written
    validate_job(manifest)


@pytest.mark.parametrize(
    ("value", "fix"),
    [(0, "1 or more processes"), (True, "nproc_per_node=4"), (2.5, "nproc_per_node=4"), ("lots", "'auto'")],
)
def test_a_bad_nproc_per_node_is_refused(value: Any, fix: str) -> None:
    with pytest.raises(JobValidationError, match="nproc") as raised:
        validate_job(build_job(PYTORCHJOB, "j", image="i", nproc_per_node=value))
    assert fix in str(raised.value)


def test_pytorch_elastic_policy_from_snake_or_camel_case() -> None:
    policy = {
        "min_replicas": 1,
        "maxReplicas": 4,
        "rdzv_backend": "c10d",
        "rdzv_port": 29400,
        "rdzv_conf": {"timeout": 900, "join": True},
        "max_restarts": 3,
        "standalone": False,
    }
    manifest = build_job(
        PYTORCHJOB, "j", image="i", replicas={"worker": 2}, elastic_policy=policy, backoff_limit=2
    )
    assert manifest["spec"]["elasticPolicy"] == {
        "minReplicas": 1,
        "maxReplicas": 4,
        "rdzvBackend": "c10d",
        "rdzvPort": 29400,
        "rdzvConf": [{"key": "timeout", "value": "900"}, {"key": "join", "value": "true"}],
        "maxRestarts": 3,
        "standalone": False,
    }
    assert validate_job(manifest) == []


def test_elastic_policy_merges_over_the_base_and_refuses_unknown_or_doubled_fields() -> None:
    base = build_job(
        PYTORCHJOB,
        "j",
        image="i",
        replicas={"worker": 2},
        elastic_policy={"min_replicas": 1, "max_replicas": 2},
    )
    manifest = build_job(PYTORCHJOB, base=base, elastic_policy={"maxReplicas": 5})
    assert manifest["spec"]["elasticPolicy"] == {"minReplicas": 1, "maxReplicas": 5}
    error = _refused(build_job, PYTORCHJOB, "j", elastic_policy={"min_replica": 1})
    assert error.field == "elastic_policy.min_replica" and "did you mean 'min_replicas'" in error.fix
    error = _refused(build_job, PYTORCHJOB, "j", elastic_policy={"min_replicas": 1, "minReplicas": 2})
    assert "given twice" in error.problem


def test_paddle_elastic_policy_has_its_own_fields() -> None:
    manifest = build_job(PADDLEJOB, "j", image="i", elastic_policy={"min_replicas": 1, "max_replicas": 3})
    assert manifest["spec"]["elasticPolicy"] == {"minReplicas": 1, "maxReplicas": 3}
    error = _refused(build_job, PADDLEJOB, "j", elastic_policy={"rdzv_backend": "c10d"})
    assert error.field == "elastic_policy.rdzv_backend" and "a PaddleJob's elastic policy" in error.problem


@pytest.mark.parametrize(
    ("kind", "param", "value", "owners"),
    [
        (PYTORCHJOB, "success_policy", "AllWorkers", "TFJob"),
        (XGBOOSTJOB, "enable_dynamic_worker", True, "TFJob"),
        (TFJOB, "nproc_per_node", 2, "PyTorchJob"),
        (kinds.JAXJOB, "elastic_policy", {"min_replicas": 1}, "PyTorchJob and PaddleJob"),
        (XGBOOSTJOB, "nproc_per_node", "auto", "PyTorchJob"),
    ],
)
def test_a_field_the_kind_lacks_is_refused_naming_the_parameter(
    kind: JobKind, param: str, value: Any, owners: str
) -> None:
    error = _refused(build_job, kind, "j", image="i", **{param: value})
    assert error.field == param and f"(only {owners})" in error.problem
    assert error.fix.startswith(f"remove {param}, or run the job as")


def test_tfjob_keeps_its_own_fields() -> None:
    spec = build_tfjob(
        "j", image="i", replicas={"worker": 2}, success_policy="AllWorkers", enable_dynamic_worker=True
    )["spec"]
    assert (spec["successPolicy"], spec["enableDynamicWorker"]) == ("AllWorkers", True)


def test_secret_env_is_hidden_in_every_kind() -> None:
    for kind in KINDS:
        manifest = build_job(kind, "j", image="i", secret_env={"TOKEN": "s3cr3t-value"})
        assert "s3cr3t-value" not in str(redact(manifest)), kind.kind


def test_the_parameter_table_has_a_view_per_kind() -> None:
    pytorch = params.parameter_set(PYTORCHJOB).names
    assert {"master", "worker", "nproc_per_node", "elastic_policy"} <= set(pytorch)
    assert not {"chief", "ps", "evaluator", "success_policy", "enable_dynamic_worker"} & set(pytorch)
    assert set(params.parameter_set("JAXJob").replica_shortcuts) == {"worker"}
    assert params.parameter_set(TFJOB).names == params.NAMES
    assert not {"nproc_per_node", "elastic_policy"} & set(params.NAMES)  # TFJobOperator is unchanged
    every = params.parameter_set(None)
    assert set(every.names) == {p.name for p in params.PARAMETERS}
    assert set(every.manifest_params) | set(every.renamed.values()) <= set(PARAMETER_NAMES)
    assert set(every.typed) <= set(PARAMETER_TYPES)


def test_name_budget_before_the_counts_are_known_follows_the_kinds_types() -> None:
    from airflow_tfjob.build.naming import DEFAULT_MAX_REPLICA_SUFFIX, default_replica_suffix, max_name_length

    assert default_replica_suffix(TFJOB.replica_types) == DEFAULT_MAX_REPLICA_SUFFIX == "-evaluator-99"
    assert default_replica_suffix(PYTORCHJOB.replica_types) == "-worker-99"
    assert max_name_length({}, kinds.JAXJOB.replica_types) == 63 - len("-worker-99")
    assert max_name_length({"Master": 1, "Worker": 3}, PYTORCHJOB.replica_types) == 63 - len("-master-0")


def test_parameters_of_the_wrong_type_are_named() -> None:
    error = _refused(build_job, PYTORCHJOB, "j", nproc_per_node=[4], elastic_policy="2:4")
    assert [p.field for p in error.problems] == ["nproc_per_node", "elastic_policy"]


@pytest.mark.parametrize(
    ("field", "example"), [("tfjob", "job.yaml"), ("job", "job.yaml"), ("trainjob", "trainjob.yaml")]
)
def test_a_job_manifest_or_template_is_typed_alike_under_each_name(field: str, example: str) -> None:
    from airflow_tfjob.build.paramtypes import type_problems

    assert type_problems({field: {"kind": "TFJob"}}) == type_problems({field: "job.yaml"}) == []
    [problem] = type_problems({field: ["job.yaml"]})
    assert str(problem) == (
        f"{field}: ['job.yaml'] is a list, not a mapping, YAML text or a .yaml path. "
        f"Fix: pass e.g. a dict, YAML text or '{example}'."
    )
