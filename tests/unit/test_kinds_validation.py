"""validate_job for every kind: each webhook rule of training-operator v1.9.4 (docs/reference/
kubeflow-v1-kinds.md §1.5, §2.4, §3.4, §4.4) refused client-side with the field and the fix."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import pytest

from airflow_tfjob.build import kind_rules as validation_kinds
from airflow_tfjob.build import validation
from airflow_tfjob.build.manifest import build_job
from airflow_tfjob.build.validation import JobValidationError, validate_job
from airflow_tfjob.jobs.kinds import JAXJOB, KINDS, PADDLEJOB, PYTORCHJOB, TFJOB, XGBOOSTJOB, JobKind

OTHERS = [k for k in KINDS if k is not TFJOB]


def valid(kind: JobKind) -> dict[str, Any]:
    """A job of ``kind`` with every replica type it has (TFJob: Chief and Workers)."""
    types = [t for t in kind.replica_types if t in ("Chief", "Master", "Worker")]
    if kind is TFJOB:
        types.remove("Master")
    counts = {t: (2 if t == "Worker" else 1) for t in types}
    return build_job(kind, "job", "ml", image="img:1", replicas=counts, backoff_limit=3)


def specs(m: dict[str, Any]) -> dict[str, Any]:
    kind = {k.kind: k for k in KINDS}[m["kind"]]
    found: dict[str, Any] = m["spec"][kind.spec_key]
    return found


def problems(manifest: dict[str, Any]) -> JobValidationError:
    with pytest.raises(JobValidationError) as raised:
        validate_job(manifest)
    return raised.value


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.kind)
def test_a_job_of_every_kind_with_all_its_types_is_valid(kind: JobKind) -> None:
    assert validate_job(valid(kind)) == []


def test_the_error_names_the_kind_and_pickles_with_it() -> None:
    manifest = valid(PYTORCHJOB)
    specs(manifest)["Master"]["replicas"] = 2
    error = problems(manifest)
    assert str(error).startswith("Invalid PyTorchJob: spec.pytorchReplicaSpecs.Master.replicas: is 2")
    clone = pickle.loads(pickle.dumps(error))
    assert (clone.kind, str(clone)) == ("PyTorchJob", str(error))


Mut = Callable[[dict[str, Any]], Any]


def rename_key(old: str, new: str) -> Mut:
    return lambda m: specs(m).__setitem__(new, specs(m).pop(old))


def container(m: dict[str, Any], rtype: str = "Worker") -> dict[str, Any]:
    found: dict[str, Any] = specs(m)[rtype]["template"]["spec"]["containers"][0]
    return found


def elastic(**policy: Any) -> Mut:
    return lambda m: m["spec"].update(elasticPolicy=policy)


# (id, kind, mutation, field, part of the problem, part of the fix)
BAD: list[tuple[str, JobKind, Mut, str, str, str]] = [
    *(
        (
            f"{k.kind} key case",
            k,
            rename_key("Worker", "worker"),
            f"spec.{k.spec_key}.worker",
            f"not spelled exactly 'Worker': the {k.kind} webhook",
            "rename the key to 'Worker'",
        )
        for k in OTHERS
    ),
    *(
        (
            f"{k.kind} foreign type",
            k,
            lambda m: specs(m).__setitem__("PS", {"replicas": 1}),
            f"spec.{k.spec_key}.PS",
            f"'PS' is not {'an' if k is XGBOOSTJOB else 'a'} {k.kind} replica type (the webhook refuses it)",
            f"use one of {', '.join(k.replica_types)}",
        )
        for k in OTHERS
    ),
    *(
        (
            f"{k.kind} container name",
            k,
            lambda m: container(m).update(name="main"),
            f"spec.{k.spec_key}.Worker.template.spec.containers",
            f"no container is named exactly {k.container!r}",
            "the webhook refuses a replica without it",
        )
        for k in OTHERS
    ),
    *(
        (
            f"{k.kind} Master replicas not written",
            k,
            lambda m: specs(m)["Master"].pop("replicas"),
            f"spec.{k.spec_key}.Master.replicas",
            "is not given: the",
            "set Master replicas: 1",
        )
        for k in (PYTORCHJOB, XGBOOSTJOB)
    ),
    *(
        (
            f"{k.kind} two Masters",
            k,
            lambda m: specs(m)["Master"].update(replicas=2),
            f"spec.{k.spec_key}.Master.replicas",
            f"is 2, but {'an' if k is XGBOOSTJOB else 'a'} {k.kind} has exactly one Master",
            "set Master replicas: 1",
        )
        for k in (PYTORCHJOB, XGBOOSTJOB)
    ),
    (
        "XGBoostJob without Master",
        XGBOOSTJOB,
        lambda m: specs(m).pop("Master"),
        "spec.xgbReplicaSpecs.Master",
        "an XGBoostJob needs a Master",
        "master=1",
    ),
    (
        "PyTorchJob no Workers",
        PYTORCHJOB,
        lambda m: specs(m)["Worker"].update(replicas=0),
        "spec.pytorchReplicaSpecs.Worker.replicas",
        "wants at least 1 Worker",
        "use 1 or more Workers",
    ),
    (
        "PyTorchJob elastic without Worker",
        PYTORCHJOB,
        lambda m: (specs(m).pop("Worker"), m["spec"].update(elasticPolicy={"maxReplicas": 2})),
        "spec.pytorchReplicaSpecs.Worker",
        "an elastic PyTorchJob scales its Workers",
        "remove elastic_policy",
    ),
    (
        "PyTorchJob both nproc fields",
        PYTORCHJOB,
        lambda m: m["spec"].update(nprocPerNode="2", elasticPolicy={"nProcPerNode": 2}),
        "spec.elasticPolicy.nProcPerNode",
        "set together with spec.nprocPerNode",
        "keep only spec.nprocPerNode",
    ),
    *(
        (
            f"{k.kind} elastic min over max",
            k,
            elastic(minReplicas=3, maxReplicas=2),
            "spec.elasticPolicy.minReplicas",
            "is 3, more than maxReplicas (2)",
            "at most maxReplicas",
        )
        for k in (PYTORCHJOB, PADDLEJOB)
    ),
    (
        "PyTorchJob empty rdzvConf",
        PYTORCHJOB,
        elastic(rdzvConf=[]),
        "spec.elasticPolicy.rdzvConf",
        "crashes training-operator v1.9.4",
        "leave rdzvConf out",
    ),
    (
        "PyTorchJob rdzvConf entry",
        PYTORCHJOB,
        elastic(rdzvConf=[{"value": "1"}]),
        "spec.elasticPolicy.rdzvConf[0].key",
        "is missing",
        "give each entry a key",
    ),
    (
        "PyTorchJob rdzvPort",
        PYTORCHJOB,
        elastic(rdzvPort=70000),
        "spec.elasticPolicy.rdzvPort",
        "not a port number",
        "1 to 65535",
    ),
    (
        "PyTorchJob elastic field typo",
        PYTORCHJOB,
        elastic(maxRestart=2),
        "spec.elasticPolicy.maxRestart",
        "is not a field of spec.elasticPolicy",
        "did you mean 'maxRestarts'?",
    ),
    (
        "PaddleJob elastic has no rendezvous",
        PADDLEJOB,
        elastic(rdzvBackend="c10d"),
        "spec.elasticPolicy.rdzvBackend",
        "is not a field of spec.elasticPolicy",
        "'minReplicas', 'maxReplicas', 'maxRestarts', 'metrics'",
    ),
    (
        "PyTorchJob nprocPerNode as a number",
        PYTORCHJOB,
        lambda m: m["spec"].update(nprocPerNode=4),
        "spec.nprocPerNode",
        "the PyTorchJob CRD wants a string",
        'quote it: "4"',
    ),
    (
        "PyTorchJob nprocPerNode word",
        PYTORCHJOB,
        lambda m: m["spec"].update(nprocPerNode="cuda"),
        "spec.nprocPerNode",
        "neither a number of processes nor a torchrun word",
        "'auto', 'cpu', 'gpu'",
    ),
    *(
        (
            f"{k.kind} managedBy",
            k,
            lambda m: m["spec"].update(runPolicy={"managedBy": "me"}),
            "spec.runPolicy.managedBy",
            "refused by the webhook",
            "'kubeflow.org/training-operator', 'kueue.x-k8s.io/multikueue'",
        )
        for k in (PYTORCHJOB, XGBOOSTJOB, PADDLEJOB)
    ),
    *(
        (
            f"{k.kind} has no successPolicy",
            k,
            lambda m: m["spec"].update(successPolicy="AllWorkers"),
            "spec.successPolicy",
            "is not a field of spec (the API server would drop it silently)",
            "use one of",
        )
        for k in OTHERS
    ),
    (
        "PyTorchJob spec of a TFJob",
        PYTORCHJOB,
        lambda m: m["spec"].update(tfReplicaSpecs=m["spec"].pop("pytorchReplicaSpecs")),
        "kind",
        "the spec holds tfReplicaSpecs, the replica specs of a TFJob",
        "set kind: TFJob, or rename spec.tfReplicaSpecs to pytorchReplicaSpecs",
    ),
    (
        "unknown kind",
        PYTORCHJOB,
        lambda m: m.update(kind="MPIJob"),
        "kind",
        "'MPIJob' is not a job kind the provider runs",
        "use one of 'TFJob', 'PyTorchJob'",
    ),
    (
        "kind in another case",
        JAXJOB,
        lambda m: m.update(kind="JaxJob"),
        "kind",
        "is 'JaxJob'",
        "write it exactly 'JAXJob'",
    ),
    (
        "PyTorchJob name too long for its worker Services",
        PYTORCHJOB,
        lambda m: (m["metadata"].update(name="a" * 54), specs(m)["Worker"].update(replicas=100)),
        "metadata.name",
        "pod and Service names like <name>-worker-99 would exceed 63",
        "at most 53 characters",
    ),
    (
        "XGBoostJob default container missing in Master",
        XGBOOSTJOB,
        lambda m: container(m, "Master").update(name="xgb"),
        "spec.xgbReplicaSpecs.Master.template.spec.containers",
        "no container is named exactly 'xgboost'",
        "name the training container 'xgboost'",
    ),
]


@pytest.mark.parametrize(
    ("kind", "mutate", "field", "problem", "fix"), [b[1:] for b in BAD], ids=[b[0] for b in BAD]
)
def test_a_kinds_rule_names_field_problem_and_fix(
    kind: JobKind, mutate: Mut, field: str, problem: str, fix: str
) -> None:
    manifest = valid(kind)
    validate_job(manifest)  # the rule, not the starting point, is what fails
    mutate(manifest)
    error = problems(manifest)
    matching = [p for p in error.problems if p.field == field]
    assert matching, f"no problem for {field}; got {[str(p) for p in error.problems]}"
    assert any(problem in p.problem and fix in p.fix for p in matching), [str(p) for p in matching]


def test_the_deprecated_nproc_field_alone_is_a_warning() -> None:
    manifest = valid(PYTORCHJOB)
    manifest["spec"]["elasticPolicy"] = {"nProcPerNode": 2, "minReplicas": 1, "maxReplicas": 2}
    assert validate_job(manifest) == [
        "spec.elasticPolicy.nProcPerNode: is deprecated, use spec.nprocPerNode (nproc_per_node=) instead"
    ]


def test_a_default_restart_in_place_without_a_limit_is_a_warning() -> None:
    # PyTorchJob and PaddleJob default to OnFailure: a crashing script restarts with no end.
    for kind in (PYTORCHJOB, PADDLEJOB):
        manifest = valid(kind)
        del manifest["spec"]["runPolicy"]
        (warning,) = validate_job(manifest)
        assert warning.startswith(
            f"spec.{kind.spec_key}.Master.restartPolicy: is not set, so the {kind.kind} default"
        )
        assert "Pass backoff_limit=" in warning
        for replica in specs(manifest).values():
            replica["restartPolicy"] = "OnFailure"  # chosen, not defaulted: nothing to say
        assert validate_job(manifest) == []
    xgb = valid(XGBOOSTJOB)
    del xgb["spec"]["runPolicy"]
    assert validate_job(xgb) == []  # its default is Never


def test_a_pytorchjob_without_master_is_told_it_gets_no_master_env() -> None:
    manifest = build_job(PYTORCHJOB, "job", image="i", replicas={"worker": 2}, backoff_limit=1)
    (warning,) = validate_job(manifest)
    assert "has no Master, so the operator sets no MASTER_ADDR" in warning and "torchrun" in warning
    manifest["spec"]["elasticPolicy"] = {"minReplicas": 1, "maxReplicas": 2}
    assert validate_job(manifest) == []  # elastic: torchrun's rendezvous is the point


def test_jaxjob_managed_by_is_ignored_by_its_webhook_so_it_is_a_warning() -> None:
    manifest = valid(JAXJOB)
    manifest["spec"]["runPolicy"] = {"managedBy": "anything"}
    (warning,) = validate_job(manifest)
    assert warning.startswith("spec.runPolicy.managedBy: the JAXJob webhook and controller ignore it")


def test_rules_the_webhooks_do_not_have_are_not_applied() -> None:
    # TFJob normalises key case; JAXJob and PaddleJob have no replica-count rules.
    tf = valid(TFJOB)
    tf["spec"]["tfReplicaSpecs"]["worker"] = tf["spec"]["tfReplicaSpecs"].pop("Worker")
    assert validate_job(tf) == []
    paddle = valid(PADDLEJOB)
    specs(paddle)["Master"]["replicas"] = 2
    jax = valid(JAXJOB)
    specs(jax)["Worker"]["replicas"] = 0
    assert validate_job(paddle) == [] and validate_job(jax) == []
    xgb = valid(XGBOOSTJOB)
    specs(xgb)["Worker"]["replicas"] = 0
    assert validate_job(xgb) == []


def test_every_problem_of_a_kind_comes_in_one_error() -> None:
    manifest = valid(PYTORCHJOB)
    rename_key("Worker", "worker")(manifest)
    specs(manifest)["Master"]["replicas"] = 3
    manifest["spec"]["nprocPerNode"] = 0
    fields = [p.field for p in problems(manifest).problems]
    assert fields == [
        "spec.pytorchReplicaSpecs.worker",
        "spec.pytorchReplicaSpecs.Master.replicas",
        "spec.nprocPerNode",
    ]


def test_the_rule_table_covers_every_kind_tfjob_an_ordinary_row() -> None:
    assert set(validation_kinds.KIND_RULES) == {k.kind for k in KINDS}
    assert validation_kinds.KIND_RULES["JAXJob"] == ()
    tf_rules = validation_kinds.KIND_RULES["TFJob"]
    assert validation_kinds.tf_roles in tf_rules and validation_kinds.tf_spec_fields in tf_rules
    assert not hasattr(validation, "_validate_tfjob_semantics")  # validation.py holds only shared rules
