"""What each kind's admission webhook refuses beyond the rules all kinds share, checked client-side.

Pure. :mod:`airflow_tfjob.build.validation` runs the shared rules for every kind and then the row of
:data:`KIND_RULES` for the manifest's kind. The webhook rules are those of training-operator v1.9.4
(docs/reference/kubeflow-v1-kinds.md §1.5, §2.4, §3.4, §4.4); each message names the field and the
fix rather than repeating the webhook's wording. TFJob's row holds its roles (one Chief or Master,
else Workers decide success) and its own spec fields, which its webhook leaves to the operator. Two rules are the provider's own, because the
operator accepts what never works: an elastic policy whose minReplicas exceeds its maxReplicas, and
PyTorch's ``rdzvConf: []`` (v1.9.4's controller indexes past the end of the empty list and crashes,
§1.4). The builder shares :func:`replica_key_problem` so a template is refused with the same words.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from airflow_tfjob.build.checker import Checker, choice_fix, is_int, suggest_replica_type
from airflow_tfjob.constants import SUCCESS_POLICIES
from airflow_tfjob.jobs.kinds import JobKind

# torchrun's --nproc-per-node words besides a number (PyTorchJob's spec.nprocPerNode is a string).
NPROC_WORDS = ("auto", "cpu", "gpu", "xpu")
# Restart policies under which the kubelet restarts a failed container in place.
_IN_PLACE = ("OnFailure", "Always")
PYTORCH_ELASTIC_FIELDS = (
    "minReplicas",
    "maxReplicas",
    "rdzvBackend",
    "rdzvPort",
    "rdzvHost",
    "rdzvId",
    "rdzvConf",
    "standalone",
    "nProcPerNode",
    "maxRestarts",
    "metrics",
)
PADDLE_ELASTIC_FIELDS = ("minReplicas", "maxReplicas", "maxRestarts", "metrics")


@dataclass(frozen=True)
class JobView:
    """What a kind's rule reads: the kind, the spec, its replica specs and their counts."""

    kind: JobKind
    spec: Mapping[str, Any]
    specs: Mapping[str, Any]  # the replica specs as written (keys not normalised)
    counts: Mapping[str, int]  # canonical type -> replicas (1 when not given)

    @property
    def base(self) -> str:
        return f"spec.{self.kind.spec_key}"


Rule = Callable[[Checker, JobView], None]


def article(word: str) -> str:
    """``a PyTorchJob``, ``an XGBoostJob`` (said "ex-")."""
    return "an" if word[:1] in "AEIOUXaeiou" else "a"


def types_phrase(kind: JobKind) -> str:
    """``Master and Worker``: a kind's replica types as prose."""
    types = list(kind.replica_types)
    return types[0] if len(types) == 1 else ", ".join(types[:-1]) + " and " + types[-1]


def replica_key_problem(kind: JobKind, key: Any) -> tuple[str, str] | None:
    """(problem, fix) when ``key`` cannot name one of ``kind``'s replica types, else None.

    TFJob's webhook accepts any case (its defaulter normalises); the other kinds' webhooks refuse a
    key that is not spelled exactly as the type.
    """
    canon = kind.canonical_type(key) if isinstance(key, str) else None
    if canon is None:
        hint = suggest_replica_type(str(key), kind.replica_types)
        consequence = (
            "the operator would start pods for it but ignore them"
            if not kind.exact_case_keys
            else "the webhook refuses it"
        )
        return (
            f"{key!r} is not {article(kind.kind)} {kind.kind} replica type ({consequence})",
            (f"did you mean {hint!r}? " if hint else "") + f"use one of {', '.join(kind.replica_types)}",
        )
    if kind.exact_case_keys and canon != key:
        return (
            f"{key!r} is not spelled exactly {canon!r}: the {kind.kind} webhook matches replica types "
            "case-sensitively and refuses it",
            f"rename the key to {canon!r}",
        )
    return None


def _explicit(name: str, spec: Mapping[str, Any]) -> Any:
    return spec.get(name) if isinstance(spec, Mapping) else None


def single_replica_types(check: Checker, job: JobView) -> None:
    """Master (PyTorchJob, XGBoostJob): ``replicas`` given, and 1 (the webhook sees no defaults)."""
    for rtype in job.kind.single_replica_types:
        if rtype not in job.specs or not isinstance(job.specs[rtype], Mapping):
            continue
        replicas = job.specs[rtype].get("replicas")
        path = f"{job.base}.{rtype}.replicas"
        if replicas is None:
            check.error(
                path,
                f"is not given: the {job.kind.kind} webhook checks the object before defaults apply and "
                f"wants {rtype} replicas written as 1",
                f"set {rtype} replicas: 1",
            )
        elif is_int(replicas) and replicas != 1:
            check.error(
                path,
                f"is {replicas}, but {article(job.kind.kind)} {job.kind.kind} has exactly one {rtype} "
                "(the webhook refuses it)",
                f"set {rtype} replicas: 1 and add Workers for more capacity",
            )


def required_types(check: Checker, job: JobView) -> None:
    """XGBoostJob: a Master (it alone decides success and the workers' ranks are counted from it)."""
    for rtype in job.kind.required_types:
        if rtype not in job.specs:
            check.error(
                f"{job.base}.{rtype}",
                f"is missing: {article(job.kind.kind)} {job.kind.kind} needs a {rtype} "
                "(the webhook refuses it without one)",
                f"add {rtype}: {{replicas: 1, template: ...}}, e.g. master=1",
            )


def workers_at_least_one(check: Checker, job: JobView) -> None:
    """PyTorchJob: Worker replicas, when written, at least 1."""
    worker = _explicit("Worker", job.specs)
    replicas = worker.get("replicas") if isinstance(worker, Mapping) else None
    if is_int(replicas) and replicas < 1:
        check.error(
            f"{job.base}.Worker.replicas",
            f"is {replicas}, but the {job.kind.kind} webhook wants at least 1 Worker",
            "use 1 or more Workers, or remove the Worker replica type",
        )


def _min_max(check: Checker, policy: Mapping[str, Any], path: str) -> None:
    low, high = policy.get("minReplicas"), policy.get("maxReplicas")
    for key, value in (("minReplicas", low), ("maxReplicas", high)):
        check.non_negative_int(value, f"{path}.{key}", minimum=1)
    if is_int(low) and is_int(high) and low > high:
        check.error(
            f"{path}.minReplicas",
            f"is {low}, more than maxReplicas ({high}): no number of replicas fits the range",
            "make minReplicas at most maxReplicas",
        )
    check.non_negative_int(policy.get("maxRestarts"), f"{path}.maxRestarts")
    metrics = policy.get("metrics")
    if metrics is not None:
        list(check.entries(metrics, f"{path}.metrics", "an autoscaling/v2 MetricSpec {type: ..., ...}"))


def _elastic(check: Checker, job: JobView, fields: tuple[str, ...]) -> Mapping[str, Any] | None:
    """spec.elasticPolicy's fields and sizes (the rules PyTorchJob and PaddleJob share), or None."""
    path = "spec.elasticPolicy"
    policy = check.mapping(job.spec.get("elasticPolicy"), path)
    if policy is not None:
        check.unknown_keys(policy, fields, path, job.kind.kind)
        _min_max(check, policy, path)
    return policy


def pytorch_elastic(check: Checker, job: JobView) -> None:
    path = "spec.elasticPolicy"
    policy = _elastic(check, job, PYTORCH_ELASTIC_FIELDS)
    if policy is None:
        return
    if "Worker" not in job.specs:
        check.error(
            f"{job.base}.Worker",
            "is missing: an elastic PyTorchJob scales its Workers, and the webhook refuses it without them",
            "add Workers (worker=2), or remove elastic_policy",
        )
    if policy.get("nProcPerNode") is not None:
        if job.spec.get("nprocPerNode") is not None:
            check.error(
                f"{path}.nProcPerNode",
                "is set together with spec.nprocPerNode (the webhook refuses both)",
                "keep only spec.nprocPerNode (nproc_per_node=)",
            )
        else:
            check.warn(
                f"{path}.nProcPerNode", "is deprecated, use spec.nprocPerNode (nproc_per_node=) instead"
            )
        check.non_negative_int(policy["nProcPerNode"], f"{path}.nProcPerNode", minimum=1)
    port = policy.get("rdzvPort")
    if port is not None and (not is_int(port) or not 1 <= port <= 65535):
        check.error(
            f"{path}.rdzvPort", f"{port!r} is not a port number", "use a whole number from 1 to 65535"
        )
    for key in ("rdzvBackend", "rdzvHost", "rdzvId"):
        if policy.get(key) is not None and not isinstance(policy[key], str):
            check.error(f"{path}.{key}", f"must be a string, got {policy[key]!r}", "quote the value")
    standalone = policy.get("standalone")
    if standalone is not None and not isinstance(standalone, bool):
        check.error(f"{path}.standalone", f"must be true or false, got {standalone!r}", "write true or false")
    conf = policy.get("rdzvConf")
    if isinstance(conf, list) and not conf:
        check.error(
            f"{path}.rdzvConf",
            "is an empty list, which crashes training-operator v1.9.4 when it builds PET_RDZV_CONF",
            "leave rdzvConf out, or give at least one {key, value}",
        )
    for _, epath, entry in check.entries(conf, f"{path}.rdzvConf", "{key: ..., value: ...}"):
        check.unknown_keys(entry, ("key", "value"), epath, job.kind.kind)
        if not isinstance(entry.get("key"), str) or not entry.get("key"):
            check.error(f"{epath}.key", "is missing or not a string", "give each entry a key")


def master_env(check: Checker, job: JobView) -> None:
    """PyTorchJob without a Master: the operator sets no MASTER_ADDR, RANK or WORLD_SIZE (§1.4)."""
    if "Master" in job.specs or job.spec.get("elasticPolicy") is not None:
        return
    check.warn(
        job.base,
        "has no Master, so the operator sets no MASTER_ADDR, MASTER_PORT, RANK or WORLD_SIZE (only PET_* "
        "for torchrun): start the training with torchrun, or add master=1 for torch.distributed's env:// init",
    )


def restarts_without_limit(check: Checker, job: JobView) -> None:
    """A kind whose default restartPolicy is OnFailure (PyTorchJob, PaddleJob) restarts a failing
    container in place for ever unless a limit is set (§1.6): surprising when nobody chose it."""
    if job.kind.restart_policy not in _IN_PLACE:
        return
    policy = job.spec.get("runPolicy")
    limits = ("backoffLimit", "activeDeadlineSeconds")
    if isinstance(policy, Mapping) and any(policy.get(k) is not None for k in limits):
        return
    defaulted = [k for k, r in job.specs.items() if isinstance(r, Mapping) and r.get("restartPolicy") is None]
    if defaulted:
        check.warn(
            f"{job.base}.{defaulted[0]}.restartPolicy",
            f"is not set, so the {job.kind.kind} default {job.kind.restart_policy} restarts a failing "
            "container in place with no end: the job fails only through runPolicy.backoffLimit or "
            "activeDeadlineSeconds, and neither is set. Pass backoff_limit= (or restart_policy='Never')",
        )


def nproc_per_node(check: Checker, job: JobView) -> None:
    value = job.spec.get("nprocPerNode")
    if value is None:
        return
    path = "spec.nprocPerNode"
    if not isinstance(value, str):
        check.error(
            path,
            f"is a {type(value).__name__} ({value!r}); the PyTorchJob CRD wants a string (422 otherwise)",
            f'quote it: "{value}"' if is_int(value) else f"use a number of processes or one of {NPROC_WORDS}",
        )
    elif value.isdigit():
        if int(value) < 1:
            check.error(path, f"is {value!r}: no process would run", "use 1 or more processes per pod")
    elif value not in NPROC_WORDS:
        check.error(
            path,
            f"{value!r} is neither a number of processes nor a torchrun word",
            choice_fix(value, NPROC_WORDS),
        )


def paddle_elastic(check: Checker, job: JobView) -> None:
    """PaddleJob: its webhook checks nothing here, and v1.9.4 only defaults the policy (§4.2)."""
    _elastic(check, job, PADDLE_ELASTIC_FIELDS)


#: The rules a kind adds to the shared ones, by kind name (TFJob's live in validation.py, which
#: predates the other kinds; JAXJob's webhook has none beyond the shared rules).
def tf_spec_fields(check: Checker, job: JobView) -> None:
    """TFJob's own spec fields: ``successPolicy`` one of the operator's (another value behaves as the
    default), ``enableDynamicWorker`` a boolean."""
    success = job.spec.get("successPolicy")
    if success is not None and success not in SUCCESS_POLICIES:
        check.error(
            "spec.successPolicy",
            f"{success!r} is not a success policy (it would behave as the default)",
            choice_fix(success, SUCCESS_POLICIES),
        )
    dynamic = job.spec.get("enableDynamicWorker")
    if dynamic is not None and not isinstance(dynamic, bool):
        check.error(
            "spec.enableDynamicWorker",
            f"must be true or false, got {dynamic!r}",
            "write true or false without quotes",
        )


def tf_roles(check: Checker, job: JobView) -> None:
    """TFJob's roles: one Chief or Master, else Workers decide success."""
    spec, counts, base = job.spec, job.counts, job.base
    if "Chief" in counts and "Master" in counts:
        check.error(
            base,
            "has both Chief and Master: only one master role is allowed",
            "keep Chief (Master is its older name)",
        )
    master_type = "Chief" if "Chief" in counts else ("Master" if "Master" in counts else None)
    if master_type is not None:
        if counts[master_type] > 1:
            check.error(
                f"{base}.{master_type}.replicas",
                f"is {counts[master_type]}, but TensorFlow allows exactly one {master_type.lower()}",
                f"set {master_type} replicas to 1 and add Workers for more capacity",
            )
        elif counts[master_type] == 0:
            check.warn(
                f"{base}.{master_type}.replicas",
                f"is 0: a job with a {master_type} succeeds when it has none left to run, i.e. at once",
            )
        if spec.get("successPolicy") == "AllWorkers":
            check.warn(
                "spec.successPolicy",
                f"AllWorkers is ignored when the job has a {master_type}: the {master_type} alone decides success",
            )
    elif "Worker" not in counts:
        check.error(
            base,
            f"has no Chief, Master or Worker ({', '.join(counts) or 'nothing'} only): such a job can never succeed",
            "add a Worker (or a Chief) that runs the training and exits when done",
        )
    elif counts["Worker"] == 0:
        check.warn(
            f"{base}.Worker.replicas",
            "is 0 and there is no Chief: the operator marks the job Succeeded at once",
        )
    total = sum(counts.values())
    if total == 1:
        check.warn(
            base,
            "the job has a single replica, so the operator sets no TF_CONFIG (it runs as plain TensorFlow)",
        )


KIND_RULES: dict[str, tuple[Rule, ...]] = {
    "TFJob": (tf_spec_fields, tf_roles),
    "PyTorchJob": (single_replica_types, workers_at_least_one, pytorch_elastic, nproc_per_node, master_env),
    "XGBoostJob": (required_types, single_replica_types),
    "JAXJob": (),
    "PaddleJob": (paddle_elastic,),
}


#: Rules of the provider's own, for every kind (each reads the kind's row to see if it applies).
SHARED_RULES: tuple[Rule, ...] = (restarts_without_limit,)


def check_kind_rules(check: Checker, job: JobView) -> None:
    for rule in (*KIND_RULES.get(job.kind.kind, ()), *SHARED_RULES):
        rule(check, job)
