"""Checks a job manifest (TFJob, PyTorchJob, XGBoostJob, JAXJob, PaddleJob) before any API call,
with errors that name the field and the fix.

Pure: the operator calls this at execute time (and render-only mode), so a mistake costs one
failed try with a clear message rather than a job stuck in the cluster.

Two families of checks:

- what the training-operator's webhook refuses, and what the API server rejects for a pod
  template (quantities, env var names, mounts of undeclared volumes, ports, labels), so the user
  sees it here in one aggregated error rather than as a 403/422 after a round trip;
- what the operator lets through but never works: unknown replica types or enum values
  (an unknown cleanPodPolicy silently behaves like All), pod/Service names over 63 characters
  (kubeflow/trainer#1101), jobs that can never succeed or never complete.

Things that work but surprise (a single-replica job gets no TF_CONFIG) are returned as warnings.

This module holds the rules every kind shares (read through the kind's row: its spec key, replica
types, container, extra spec fields); each kind's own rules (TFJob's roles and spec fields, the other
kinds' webhook rules) are its row of the table in :mod:`airflow_tfjob.build.kind_rules`. The error, the value syntax and the checker that
collects problems are in :mod:`airflow_tfjob.build.checker` (re-exported here); a pod
template's checks in :mod:`airflow_tfjob.build.pod_validation`, a container's in
:mod:`airflow_tfjob.build.container_validation`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_tfjob.build.checker import (
    Checker,
    JobValidationError,
    Problem,
    choice_fix,
    is_int,
    parse_quantity,
    suggest_replica_type,
)
from airflow_tfjob.build.container_validation import PULL_POLICIES
from airflow_tfjob.build.kind_rules import JobView, article, check_kind_rules, replica_key_problem
from airflow_tfjob.build.naming import (
    MAX_NAME,
    NAME_FIX,
    NAMESPACE_FIX,
    is_dns1035_label,
    job_name_problem,
    max_name_length,
    namespace_problem,
)
from airflow_tfjob.build.pod_validation import (
    validate_priority_class,
    validate_priority_label,
    validate_template,
)
from airflow_tfjob.constants import (
    API_VERSION,
    CLEAN_POD_POLICIES,
    MANAGED_BY_VALUES,
    RESTART_POLICIES,
)
from airflow_tfjob.jobs.kinds import DEFAULT_KIND, KINDS, JobKind, kind_named

# The fields of a replica spec and run policy (anything else is dropped by the API); a spec's
# fields are the kind's spec key, runPolicy and kind.extra_spec_fields.
_REPLICA_KEYS = ("replicas", "template", "restartPolicy")
_RUN_POLICY_KEYS = (
    "cleanPodPolicy",
    "ttlSecondsAfterFinished",
    "activeDeadlineSeconds",
    "backoffLimit",
    "schedulingPolicy",
    "suspend",
    "managedBy",
)
_SCHEDULING_KEYS = ("minAvailable", "queue", "minResources", "priorityClass", "scheduleTimeoutSeconds")
_NEVER_FINISHING_TYPES = ("Chief", "Master", "Worker")


def validate_job(manifest: Any, *, require_name: bool = True) -> list[str]:
    """Raise :class:`JobValidationError` listing every problem found; return the warnings.

    The kind's rules apply (``manifest["kind"]``: TFJob, PyTorchJob, XGBoostJob, JAXJob or
    PaddleJob). ``require_name=False`` accepts a manifest without ``metadata.name``/``generateName``
    (the operator validates a user's template before giving it a name).
    """
    check = Checker()
    kind = _validate(check, manifest, require_name)
    if check.problems:
        raise JobValidationError(check.problems, kind=kind.kind if kind else "job")
    return check.warnings


def _kind(check: Checker, manifest: Mapping[str, Any]) -> JobKind | None:
    value = manifest.get("kind")
    known = ", ".join(k.kind for k in KINDS)
    if not isinstance(value, str) or not value:
        check.error("kind", f"is {value!r}", f"set kind: {DEFAULT_KIND.kind} (or one of {known})")
        return None
    try:
        kind = kind_named(value)
    except ValueError:
        check.error(
            "kind", f"{value!r} is not a job kind the provider runs", choice_fix(value, [*known.split(", ")])
        )
        return None
    if kind.kind != value:
        check.error("kind", f"is {value!r}", f"write it exactly {kind.kind!r}")
    return kind


def _validate(check: Checker, manifest: Any, require_name: bool) -> JobKind | None:
    if not isinstance(manifest, Mapping):
        check.error(
            "tfjob", f"must be a mapping, got {type(manifest).__name__}", "pass a job dict or YAML text"
        )
        return None
    if manifest.get("apiVersion") != API_VERSION:
        check.error("apiVersion", f"is {manifest.get('apiVersion')!r}", f"set apiVersion: {API_VERSION}")
    found = _kind(check, manifest)
    kind = found or DEFAULT_KIND  # an unknown kind is reported; the rest is checked as the default kind's
    check.unknown_keys(manifest, ("apiVersion", "kind", "metadata", "spec", "status"), "", kind.kind)
    metadata = check.mapping(manifest.get("metadata"), "metadata") or {}
    name_len = _validate_metadata(check, metadata, require_name)
    validate_metadata(check, metadata, "metadata.")

    key = kind.spec_key
    spec = check.mapping(manifest.get("spec"), "spec")
    if spec is None:
        check.error("spec", "is missing", f"add spec.{key} with at least one replica type")
        return found
    other = {k.spec_key: k for k in KINDS if k is not kind and k.spec_key in spec}
    for other_key, owner in other.items():
        check.error(
            "kind",
            f"is {kind.kind!r}, but the spec holds {other_key}, the replica specs of "
            f"{article(owner.kind)} {owner.kind}",
            f"set kind: {owner.kind}, or rename spec.{other_key} to {key}",
        )
    known_fields = (key, "runPolicy", *kind.extra_spec_fields)
    check.unknown_keys({k: v for k, v in spec.items() if k not in other}, known_fields, "spec", kind.kind)
    raw = spec.get(key)
    specs = check.mapping(raw, f"spec.{key}")
    if not specs:
        if raw is None or specs is not None:
            check.error(
                f"spec.{key}",
                "is missing or empty",
                "add at least one replica type, e.g. Worker: {replicas: 1, template: {spec: {containers: [...]}}}",
            )
        return found
    counts = _validate_replica_specs(check, specs, kind)
    _validate_run_policy(check, spec, counts, kind)
    check_kind_rules(check, JobView(kind, spec, specs, counts))
    _validate_name_length(check, counts, metadata, name_len)
    return found


def _validate_metadata(check: Checker, metadata: Mapping[str, Any], require_name: bool) -> int | None:
    """Returns the length the job's name will have (None if unknown)."""
    name = metadata.get("name")
    generate = metadata.get("generateName")
    name_fix = NAME_FIX
    if name is not None:
        problem = job_name_problem(name)
        if problem:
            check.error("metadata.name", problem, name_fix)
            return None
        return len(name)
    if generate is not None:
        # The API server appends 5 random characters (truncating the prefix to 58).
        if not isinstance(generate, str) or not is_dns1035_label(generate + "x"):
            check.error("metadata.generateName", f"{generate!r} cannot start a DNS-1035 label", name_fix)
            return None
        return min(len(generate), MAX_NAME - 5) + 5
    if require_name:
        check.error(
            "metadata.name",
            "is missing",
            "set metadata.name (or generateName), or pass name= to the operator",
        )
    return None


def validate_metadata(check: Checker, metadata: Mapping[str, Any], field_prefix: str) -> None:
    """The namespace, labels (the priority label among them) and annotations of any kind's manifest, the
    fields named with ``field_prefix`` (``"metadata."`` where the manifest's paths are shown, ``""`` where
    the operator's parameters are: TrainJob's)."""
    ns = metadata.get("namespace")
    problem = None if ns is None else namespace_problem(ns)
    if problem:
        check.error(f"{field_prefix}namespace", problem, NAMESPACE_FIX)
    check.labels(metadata.get("labels"), f"{field_prefix}labels")
    validate_priority_label(check, metadata.get("labels"), f"{field_prefix}labels")
    check.labels(metadata.get("annotations"), f"{field_prefix}annotations", values_are_labels=False)


def _validate_replica_specs(check: Checker, specs: Mapping[str, Any], kind: JobKind) -> dict[str, int]:
    """Checks each replica spec; returns canonical type -> replica count (defaults applied)."""
    counts: dict[str, int] = {}
    seen: dict[str, str] = {}
    base = f"spec.{kind.spec_key}"
    for key, replica in specs.items():
        path = f"{base}.{key}"
        canon = kind.canonical_type(key) if isinstance(key, str) else None
        wrong = replica_key_problem(kind, key)
        if wrong is not None:
            check.error(path, *wrong)
        elif canon is not None and canon in seen:
            check.error(
                path,
                f"duplicates {seen[canon]!r}: replica types are case-insensitive",
                f"keep a single {canon!r} entry",
            )
        elif canon is not None:
            seen[canon] = key
        rspec = check.mapping(replica, path)
        if rspec is None:
            if replica is None:
                check.error(path, "is empty", f"give it a template with a {kind.container} container")
            continue
        check.unknown_keys(rspec, _REPLICA_KEYS, path, kind.kind)
        replicas = rspec.get("replicas", 1)
        count = 1
        if not is_int(replicas):
            check.error(
                f"{path}.replicas",
                f"must be a whole number, got {replicas!r} ({type(replicas).__name__})",
                "write an integer >= 0 without quotes",
            )
        elif replicas < 0:
            check.error(f"{path}.replicas", f"is negative ({replicas})", "use 0 or more replicas")
        else:
            count = replicas
        if canon is not None:
            counts[canon] = count
        policy = rspec.get("restartPolicy")
        known = check.choice(
            policy, f"{path}.restartPolicy", RESTART_POLICIES,
            "is not a restart policy (pod creation would fail with FailedCreatePod)",
        )  # fmt: skip
        if known and policy == "Always" and canon in _NEVER_FINISHING_TYPES:
            check.error(
                f"{path}.restartPolicy",
                f"Always restarts {canon} pods even after they exit 0, so the job never completes",
                "use OnFailure or ExitCode to retry failures, or Never",
            )
        validate_template(check, rspec.get("template"), f"{path}.template", kind)
    return counts


def _validate_run_policy(
    check: Checker, spec: Mapping[str, Any], counts: Mapping[str, int], kind: JobKind
) -> None:
    policy = check.mapping(spec.get("runPolicy"), "spec.runPolicy")
    base = "spec.runPolicy"
    if not policy:
        return
    check.unknown_keys(policy, _RUN_POLICY_KEYS, base, kind.kind)
    clean = policy.get("cleanPodPolicy")
    if clean is not None and clean not in CLEAN_POD_POLICIES:
        check.error(
            f"{base}.cleanPodPolicy",
            f"{clean!r} is not a clean pod policy (the operator would treat it as All)",
            choice_fix(clean, CLEAN_POD_POLICIES),
        )
    check.non_negative_int(policy.get("ttlSecondsAfterFinished"), f"{base}.ttlSecondsAfterFinished")
    check.non_negative_int(policy.get("activeDeadlineSeconds"), f"{base}.activeDeadlineSeconds", minimum=1)
    check.non_negative_int(policy.get("backoffLimit"), f"{base}.backoffLimit")
    suspend = policy.get("suspend")
    if suspend is not None and not isinstance(suspend, bool):
        check.error(
            f"{base}.suspend", f"must be true or false, got {suspend!r}", "write true or false without quotes"
        )
    if "managedBy" in policy and not kind.checks_managed_by:
        check.warn(
            f"{base}.managedBy",
            f"the {kind.kind} webhook and controller ignore it: the training-operator runs the job whatever it says",
        )
    elif "managedBy" in policy:
        managed = policy["managedBy"]
        if managed not in MANAGED_BY_VALUES:
            check.error(
                f"{base}.managedBy",
                f"{managed!r} is refused by the webhook",
                choice_fix(managed, MANAGED_BY_VALUES),
            )
        elif managed != MANAGED_BY_VALUES[0]:
            check.warn(
                f"{base}.managedBy", "the training-operator skips this job; Kueue MultiKueue must run it"
            )
    sched = check.mapping(policy.get("schedulingPolicy"), f"{base}.schedulingPolicy")
    if sched:
        spath = f"{base}.schedulingPolicy"
        check.unknown_keys(sched, _SCHEDULING_KEYS, spath, kind.kind)
        check.non_negative_int(sched.get("minAvailable"), f"{spath}.minAvailable", minimum=1)
        check.non_negative_int(sched.get("scheduleTimeoutSeconds"), f"{spath}.scheduleTimeoutSeconds")
        if sched.get("queue") is not None and not isinstance(sched["queue"], str):
            check.error(f"{spath}.queue", f"must be a string, got {sched['queue']!r}", "quote the value")
        validate_priority_class(check, sched.get("priorityClass"), f"{spath}.priorityClass")
        total = sum(counts.values())
        min_available = sched.get("minAvailable")
        if is_int(min_available) and min_available > total:
            check.error(
                f"{spath}.minAvailable",
                f"asks for {min_available} pods to be scheduled together but the job has only {total}",
                f"use at most {total}, or leave it out (gang scheduling then waits for all pods)",
            )
        min_res = check.mapping(sched.get("minResources"), f"{spath}.minResources")
        for name, qty in (min_res or {}).items():
            check.quantity(qty, f"{spath}.minResources.{name}")


def _validate_name_length(
    check: Checker, counts: Mapping[str, int], metadata: Mapping[str, Any], name_len: int | None
) -> None:
    """Every kind names pods and Services {job}-{type}-{index}: each must fit in 63 characters."""
    if name_len is not None and counts:
        limit = max_name_length(counts)
        if name_len > limit:
            longest = max(counts, key=lambda t: len(f"-{t.lower()}-{max(counts[t] - 1, 0)}"))
            example = f"<name>-{longest.lower()}-{max(counts[longest] - 1, 0)}"
            field = "metadata.name" if metadata.get("name") is not None else "metadata.generateName"
            check.error(
                field,
                f"is {name_len} characters, so pod and Service names like {example} would exceed 63 and the job "
                "would hang without pods (kubeflow/trainer#1101)",
                f"shorten the name to at most {limit} characters",
            )


__all__ = [
    "PULL_POLICIES",
    "JobValidationError",
    "Problem",
    "parse_quantity",
    "suggest_replica_type",
    "validate_job",
]
