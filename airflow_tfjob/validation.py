"""Checks a TFJob manifest before any API call, with errors that name the field and the fix.

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

The error, the value syntax and the checker that collects problems are in
:mod:`airflow_tfjob.validation_checker` (re-exported here); a container's checks in
:mod:`airflow_tfjob.container_validation`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_tfjob.constants import (
    API_VERSION,
    CLEAN_POD_POLICIES,
    CONTAINER_NAME,
    KIND,
    MANAGED_BY_VALUES,
    REPLICA_TYPES,
    RESTART_POLICIES,
    SUCCESS_POLICIES,
)
from airflow_tfjob.container_validation import PULL_POLICIES, validate_container
from airflow_tfjob.naming import (
    DNS1123_LABEL_RE,
    MAX_NAME,
    canonical_replica_type,
    is_dns1035_label,
    max_name_length,
)
from airflow_tfjob.validation_checker import (
    DNS1123_SUBDOMAIN_RE,
    Checker,
    Problem,
    TFJobValidationError,
    choice_fix,
    is_int,
    parse_quantity,
    suggest_replica_type,
)

# The fields of a TFJob's spec, replica spec and run policy (anything else is dropped by the API).
_SPEC_KEYS = ("tfReplicaSpecs", "runPolicy", "successPolicy", "enableDynamicWorker")
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


def validate_tfjob(manifest: Any, *, require_name: bool = True) -> list[str]:
    """Raise :class:`TFJobValidationError` listing every problem found; return the warnings.

    ``require_name=False`` accepts a manifest without ``metadata.name``/``generateName`` (the
    operator validates a user's template before giving it a name).
    """
    check = Checker()
    _validate(check, manifest, require_name)
    if check.problems:
        raise TFJobValidationError(check.problems)
    return check.warnings


def _validate(check: Checker, manifest: Any, require_name: bool) -> None:
    if not isinstance(manifest, Mapping):
        check.error(
            "tfjob", f"must be a mapping, got {type(manifest).__name__}", "pass a TFJob dict or YAML text"
        )
        return
    if manifest.get("apiVersion") != API_VERSION:
        check.error("apiVersion", f"is {manifest.get('apiVersion')!r}", f"set apiVersion: {API_VERSION}")
    if manifest.get("kind") != KIND:
        check.error("kind", f"is {manifest.get('kind')!r}", f"set kind: {KIND}")
    check.unknown_keys(manifest, ("apiVersion", "kind", "metadata", "spec", "status"), "")
    metadata = check.mapping(manifest.get("metadata"), "metadata") or {}
    name_len = _validate_metadata(check, metadata, require_name)
    _validate_namespace_and_meta(check, metadata)

    spec = check.mapping(manifest.get("spec"), "spec")
    if spec is None:
        check.error("spec", "is missing", "add spec.tfReplicaSpecs with at least one replica type")
        return
    check.unknown_keys(spec, _SPEC_KEYS, "spec")
    raw = spec.get("tfReplicaSpecs")
    specs = check.mapping(raw, "spec.tfReplicaSpecs")
    if not specs:
        if raw is None or specs is not None:
            check.error(
                "spec.tfReplicaSpecs",
                "is missing or empty",
                "add at least one replica type, e.g. Worker: {replicas: 1, template: {spec: {containers: [...]}}}",
            )
        return
    counts = _validate_replica_specs(check, specs)
    _validate_run_policy(check, spec, counts)
    _validate_job_semantics(check, spec, counts, metadata, name_len)


NAME_FIX = "use at most 63 lower-case letters, digits and '-', starting with a letter and ending with a letter or digit"
NAMESPACE_FIX = (
    "use at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit"
)


def job_name_problem(name: Any) -> str | None:
    """What is wrong with a TFJob name (the operator's and the sensor's wording), or None."""
    return None if isinstance(name, str) and is_dns1035_label(name) else f"{name!r} is not a DNS-1035 label"


def namespace_problem(namespace: Any) -> str | None:
    valid = isinstance(namespace, str) and len(namespace) <= MAX_NAME and DNS1123_LABEL_RE.match(namespace)
    return None if valid else f"{namespace!r} is not a valid namespace name"


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


def _validate_namespace_and_meta(check: Checker, metadata: Mapping[str, Any]) -> None:
    ns = metadata.get("namespace")
    problem = None if ns is None else namespace_problem(ns)
    if problem:
        check.error("metadata.namespace", problem, NAMESPACE_FIX)
    check.labels(metadata.get("labels"), "metadata.labels")
    check.labels(metadata.get("annotations"), "metadata.annotations", values_are_labels=False)


def _validate_replica_specs(check: Checker, specs: Mapping[str, Any]) -> dict[str, int]:
    """Checks each replica spec; returns canonical type -> replica count (defaults applied)."""
    counts: dict[str, int] = {}
    seen: dict[str, str] = {}
    base = "spec.tfReplicaSpecs"
    for key, replica in specs.items():
        path = f"{base}.{key}"
        canon = canonical_replica_type(key)
        if canon is None:
            hint = suggest_replica_type(str(key))
            check.error(
                path,
                f"{key!r} is not a TFJob replica type (the operator would start pods for it but ignore them)",
                (f"did you mean {hint!r}? " if hint else "") + f"use one of {', '.join(REPLICA_TYPES)}",
            )
        elif canon in seen:
            check.error(
                path,
                f"duplicates {seen[canon]!r}: replica types are case-insensitive",
                f"keep a single {canon!r} entry",
            )
        else:
            seen[canon] = key
        rspec = check.mapping(replica, path)
        if rspec is None:
            if replica is None:
                check.error(path, "is empty", "give it a template with a tensorflow container")
            continue
        check.unknown_keys(rspec, _REPLICA_KEYS, path)
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
        _validate_template(check, rspec.get("template"), f"{path}.template")
    return counts


def _validate_template(check: Checker, template: Any, path: str) -> None:
    tmpl = check.mapping(template, path)
    if tmpl is None:
        if template is None:
            check.error(path, "is missing", "add template.spec.containers with a container named tensorflow")
        return
    meta = check.mapping(tmpl.get("metadata"), f"{path}.metadata")
    if meta:
        check.labels(meta.get("labels"), f"{path}.metadata.labels")
        check.labels(meta.get("annotations"), f"{path}.metadata.annotations", values_are_labels=False)
    pod = check.mapping(tmpl.get("spec"), f"{path}.spec")
    if pod is None:
        if tmpl.get("spec") is None:
            check.error(f"{path}.spec", "is missing", "add spec.containers with a container named tensorflow")
        return
    ppath = f"{path}.spec"
    if pod.get("restartPolicy") is not None:
        check.warn(
            f"{ppath}.restartPolicy",
            "is overwritten by the replica's restartPolicy (default Never); set restartPolicy on the replica instead",
        )
    volumes = check.seq(pod.get("volumes"), f"{ppath}.volumes")
    declared: set[str] = set()
    for i, volume in enumerate(volumes):
        vpath = f"{ppath}.volumes[{i}]"
        if not isinstance(volume, Mapping):
            check.error(vpath, "is not a mapping", "write a volume as {name: ..., <source>: {...}}")
            continue
        check.unique_name(volume.get("name"), f"{vpath}.name", "volume", declared)
    containers = check.seq(pod.get("containers"), f"{ppath}.containers")
    if not containers:
        if not isinstance(pod.get("containers"), (str, bytes, Mapping)):
            check.error(
                f"{ppath}.containers", "is missing or empty", "add a container named tensorflow with an image"
            )
        return
    names: set[str] = set()
    has_tf = False
    all_containers = [("containers", i, c) for i, c in enumerate(containers)]
    all_containers += [
        ("initContainers", i, c)
        for i, c in enumerate(check.seq(pod.get("initContainers"), f"{ppath}.initContainers"))
    ]
    for group, i, container in all_containers:
        cpath = f"{ppath}.{group}[{i}]"
        if not isinstance(container, Mapping):
            check.error(cpath, "is not a mapping", "write a container as {name: ..., image: ...}")
            continue
        cname = container.get("name")
        if group == "containers" and cname == CONTAINER_NAME:
            has_tf = True
        check.unique_name(cname, f"{cpath}.name", "container", names)
        validate_container(check, container, cpath, declared, is_init=group == "initContainers")
    if not has_tf:
        shown = sorted(n for n in names)
        check.error(
            f"{ppath}.containers",
            f"no container is named exactly {CONTAINER_NAME!r} (found {shown})",
            f"name the training container {CONTAINER_NAME!r}: the operator injects TF_CONFIG and the port there",
        )
    selector = pod.get("nodeSelector")
    if selector is not None:
        check.labels(selector, f"{ppath}.nodeSelector")
    for i, tol in enumerate(check.seq(pod.get("tolerations"), f"{ppath}.tolerations")):
        tpath = f"{ppath}.tolerations[{i}]"
        if not isinstance(tol, Mapping):
            check.error(tpath, "is not a mapping", "write {key, operator, value, effect}")
            continue
        op = tol.get("operator", "Equal")
        if op not in ("Equal", "Exists"):
            check.error(
                f"{tpath}.operator",
                f"{op!r} is not a toleration operator",
                choice_fix(op, ("Equal", "Exists")),
            )
        elif op == "Exists" and tol.get("value"):
            check.error(
                f"{tpath}.value",
                "must be empty when operator is Exists",
                "remove value, or use operator Equal",
            )
        effect = tol.get("effect")
        if effect not in (None, "", "NoSchedule", "PreferNoSchedule", "NoExecute"):
            check.error(
                f"{tpath}.effect",
                f"{effect!r} is not a taint effect",
                choice_fix(effect, ("NoSchedule", "PreferNoSchedule", "NoExecute")),
            )
    sa = pod.get("serviceAccountName")
    if sa is not None and (not isinstance(sa, str) or len(sa) > 253 or not DNS1123_SUBDOMAIN_RE.match(sa)):
        check.error(
            f"{ppath}.serviceAccountName",
            f"{sa!r} is not a valid service account name",
            "use lower-case letters, digits, '-' and '.'",
        )


def _validate_run_policy(check: Checker, spec: Mapping[str, Any], counts: Mapping[str, int]) -> None:
    policy = check.mapping(spec.get("runPolicy"), "spec.runPolicy")
    base = "spec.runPolicy"
    success = spec.get("successPolicy")
    if success is not None and success not in SUCCESS_POLICIES:
        check.error(
            "spec.successPolicy",
            f"{success!r} is not a success policy (it would behave as the default)",
            choice_fix(success, SUCCESS_POLICIES),
        )
    dynamic = spec.get("enableDynamicWorker")
    if dynamic is not None and not isinstance(dynamic, bool):
        check.error(
            "spec.enableDynamicWorker",
            f"must be true or false, got {dynamic!r}",
            "write true or false without quotes",
        )
    if not policy:
        return
    check.unknown_keys(policy, _RUN_POLICY_KEYS, base)
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
    if "managedBy" in policy:
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
        check.unknown_keys(sched, _SCHEDULING_KEYS, spath)
        check.non_negative_int(sched.get("minAvailable"), f"{spath}.minAvailable", minimum=1)
        check.non_negative_int(sched.get("scheduleTimeoutSeconds"), f"{spath}.scheduleTimeoutSeconds")
        for key in ("queue", "priorityClass"):
            if sched.get(key) is not None and not isinstance(sched[key], str):
                check.error(f"{spath}.{key}", f"must be a string, got {sched[key]!r}", "quote the value")
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


def _validate_job_semantics(
    check: Checker,
    spec: Mapping[str, Any],
    counts: Mapping[str, int],
    metadata: Mapping[str, Any],
    name_len: int | None,
) -> None:
    base = "spec.tfReplicaSpecs"
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
    "Problem",
    "TFJobValidationError",
    "parse_quantity",
    "suggest_replica_type",
    "validate_tfjob",
]
