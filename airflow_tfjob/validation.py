"""Checks a TFJob manifest before any API call, with errors that name the field and the fix.

Pure: the operator calls this at execute time (and render-only mode), so a mistake costs one
failed try with a clear message rather than a job stuck in the cluster.

Two families of checks (tfjob-behaviour.md):

- what the training-operator's webhook refuses (§1.3), and what the API server rejects for a pod
  template (quantities, env var names, mounts of undeclared volumes, ports, labels), so the user
  sees it here in one aggregated error rather than as a 403/422 after a round trip;
- what the operator lets through but never works (§10): unknown replica types or enum values
  (an unknown cleanPodPolicy silently behaves like All), pod/Service names over 63 characters
  (kubeflow/trainer#1101), jobs that can never succeed or never complete.

Things that work but surprise (a single-replica job gets no TF_CONFIG) are returned as warnings.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, TypeGuard

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
from airflow_tfjob.naming import (
    DNS1123_LABEL_RE,
    LABEL_VALUE_RE,
    MAX_NAME,
    canonical_replica_type,
    is_dns1035_label,
    max_name_length,
)

# --------------------------------------------------------------------------- errors


@dataclass(frozen=True)
class Problem:
    field: str
    problem: str
    fix: str

    def __str__(self) -> str:
        return f"{self.field}: {self.problem.rstrip('.')}. Fix: {self.fix.rstrip('.')}."


class TFJobValidationError(ValueError):
    """One or more problems with a TFJob manifest (or the parameters it is built from).

    ``TFJobValidationError(field, problem, fix)`` for one, ``TFJobValidationError([Problem, ...])``
    for several. ``field``/``problem``/``fix`` are those of the first problem.
    """

    def __init__(self, field: str | Sequence[Problem], problem: str = "", fix: str = "") -> None:
        self.problems: tuple[Problem, ...] = (
            (Problem(field, problem, fix),) if isinstance(field, str) else tuple(field)
        )
        if not self.problems:
            raise ValueError("TFJobValidationError needs at least one problem")
        super().__init__(self._message())

    def _message(self) -> str:
        if len(self.problems) == 1:
            return f"Invalid TFJob: {self.problems[0]}"
        lines = "\n".join(f"  - {p}" for p in self.problems)
        return f"Invalid TFJob ({len(self.problems)} problems):\n{lines}"

    @property
    def field(self) -> str:
        return self.problems[0].field

    @property
    def problem(self) -> str:
        return self.problems[0].problem

    @property
    def fix(self) -> str:
        return self.problems[0].fix

    def __reduce__(self) -> tuple[Any, ...]:
        # Exceptions are pickled by their args; ours are problems, not the message.
        return (type(self), (list(self.problems),))


# --------------------------------------------------------------------------- syntax helpers

_QUANTITY_RE = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$")
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
_DNS1123_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_NAME_RE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_IANA_SVC_RE = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
_CLASSIC_ENV_RE = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
_PRINTABLE_ENV_RE = re.compile(r"^[\x21-\x3c\x3e-\x7e]+$")  # printable ASCII except space and "="
_QUANTITY_FIX = (
    'write a Kubernetes quantity such as "500m", "2", "512Mi" or "4Gi" (no spaces, binary units end in "i")'
)
_ALIASES = {
    "parameterserver": "PS",
    "parameter-server": "PS",
    "parameter_server": "PS",
    "paramserver": "PS",
    "eval": "Evaluator",
    "evaluation": "Evaluator",
}
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
PULL_POLICIES = ("Always", "IfNotPresent", "Never")
_SCHEDULING_KEYS = ("minAvailable", "queue", "minResources", "priorityClass", "scheduleTimeoutSeconds")
_NEVER_FINISHING_TYPES = ("Chief", "Master", "Worker")


def parse_quantity(value: Any) -> Decimal | None:
    """A Kubernetes quantity as a Decimal, or None if it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return Decimal(str(value))
    if not isinstance(value, str):
        return None
    match = _QUANTITY_RE.match(value)
    if not match:
        return None
    suffix = match.group(3) or ""
    number = value[: len(value) - len(suffix)] if suffix else value
    try:
        base = Decimal(number)
    except InvalidOperation:
        return None
    if suffix in _BINARY:
        return base * _BINARY[suffix]
    if suffix in _DECIMAL:
        return base * _DECIMAL[suffix]
    return base * (Decimal(10) ** int(suffix[1:]))


def _closest(value: str, choices: Iterable[str]) -> str | None:
    choices = list(choices)
    lowered = {c.lower(): c for c in choices}
    if value.lower() in lowered:
        return lowered[value.lower()]
    match = difflib.get_close_matches(value.lower(), list(lowered), n=1, cutoff=0.6)
    return lowered[match[0]] if match else None


def _choice_fix(value: Any, allowed: Sequence[str]) -> str:
    shown = ", ".join(repr(a) for a in allowed)
    close = _closest(value, allowed) if isinstance(value, str) else None
    return (f"did you mean {close!r}? " if close is not None else "") + f"use one of {shown}"


def suggest_replica_type(key: str) -> str | None:
    if key.lower() in _ALIASES:
        return _ALIASES[key.lower()]
    lowered = {t.lower(): t for t in REPLICA_TYPES}
    match = difflib.get_close_matches(key.lower(), list(lowered), n=1, cutoff=0.5)
    if match:
        return lowered[match[0]]
    # "Workers0", "worker-pool": a known type as a prefix
    for low, canon in lowered.items():
        if key.lower().startswith(low):
            return canon
    return None


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


# --------------------------------------------------------------------------- the checker


class _Checker:
    def __init__(self) -> None:
        self.problems: list[Problem] = []
        self.warnings: list[str] = []

    def error(self, path: str, problem: str, fix: str) -> None:
        self.problems.append(Problem(path, problem, fix))

    def warn(self, path: str, message: str) -> None:
        self.warnings.append(f"{path}: {message}")

    # ---- generic shapes

    def mapping(self, value: Any, path: str, what: str = "a mapping") -> Mapping[str, Any] | None:
        if value is None:
            return None
        if not isinstance(value, Mapping):
            self.error(
                path,
                f"must be {what}, got {type(value).__name__}",
                f"write {path.rsplit('.', 1)[-1]} as key: value pairs",
            )
            return None
        return value

    def seq(self, value: Any, path: str) -> list[Any]:
        if value is None:
            return []
        if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
            self.error(path, f"must be a list, got {type(value).__name__}", "write it as a YAML/JSON list")
            return []
        return list(value)

    def entries(self, value: Any, path: str, form: str) -> Iterator[tuple[int, str, Mapping[str, Any]]]:
        """(index, path, entry) of each mapping in the list at ``path``; anything else is an error."""
        for j, entry in enumerate(self.seq(value, path)):
            if isinstance(entry, Mapping):
                yield j, f"{path}[{j}]", entry
            else:
                self.error(f"{path}[{j}]", "is not a mapping", f"write {form}")

    def unknown_keys(self, value: Mapping[str, Any], allowed: Sequence[str], path: str) -> None:
        for key in value:
            if key not in allowed:
                self.error(
                    f"{path}.{key}" if path else str(key),
                    f"is not a field of {path or 'the TFJob'} (the API server would drop it silently)",
                    _choice_fix(str(key), allowed),
                )

    def non_negative_int(self, value: Any, path: str, minimum: int = 0) -> None:
        if value is None:
            return
        if not _is_int(value):
            self.error(
                path,
                f"must be a whole number, got {value!r}",
                f"write an integer >= {minimum} without quotes",
            )
        elif value < minimum:
            self.error(
                path,
                f"must be >= {minimum}, got {value}",
                f"use a value of at least {minimum}, or remove the field",
            )

    def labels(self, value: Any, path: str, values_are_labels: bool = True) -> None:
        mapping = self.mapping(value, path)
        if mapping is None:
            return
        total = 0
        for key, val in mapping.items():
            self.label_key(key, f"{path}.{key}")
            if not isinstance(val, str):
                self.error(
                    f"{path}.{key}",
                    f"value {val!r} is a {type(val).__name__}, Kubernetes wants a string",
                    f'quote it: "{str(val).lower() if isinstance(val, bool) else val}"',
                )
                continue
            total += len(key) + len(val)
            if values_are_labels and (len(val) > MAX_NAME or not LABEL_VALUE_RE.match(val)):
                self.error(
                    f"{path}.{key}",
                    f"label value {val!r} is not valid (at most 63 characters, letters, digits, '-', '_', '.', "
                    "starting and ending with a letter or digit)",
                    "shorten it or replace the other characters; put free text in an annotation instead",
                )
        if not values_are_labels and total > 256 * 1024:
            self.error(
                path,
                f"annotations total {total} bytes, over the 256 KiB limit",
                "move large values elsewhere (a ConfigMap)",
            )

    def choice(self, value: Any, path: str, allowed: Sequence[str], problem: str) -> bool:
        """Whether ``value`` is None or one of ``allowed`` (case-sensitive, as Kubernetes compares)."""
        if value is None or value in allowed:
            return True
        self.error(path, f"{value!r} {problem}", _choice_fix(value, allowed))
        return False

    def unique_name(self, value: Any, path: str, what: str, seen: set[str], *, port: bool = False) -> None:
        """A volume, container or port name: valid syntax, and not used before in ``seen``."""
        if port:
            valid = isinstance(value, str) and len(value) <= 15 and bool(_IANA_SVC_RE.match(value))
            valid = valid and "--" not in value and bool(re.search("[a-z]", value))
            rule = "use at most 15 lower-case letters, digits and single '-', with at least one letter"
        else:
            valid = isinstance(value, str) and len(value) <= MAX_NAME and bool(DNS1123_LABEL_RE.match(value))
            rule = "use at most 63 lower-case letters, digits and '-'"
        if not valid:
            self.error(path, f"{value!r} is not a valid {what} name", rule)
        elif value in seen:
            self.error(path, f"{what} name {value!r} is used twice", f"give each {what} a distinct name")
        else:
            seen.add(value)

    def label_key(self, key: Any, path: str) -> None:
        if not isinstance(key, str) or not key:
            self.error(path, f"key {key!r} is not a string", "use a string key such as example.com/team")
            return
        prefix, _, name = key.rpartition("/")
        ok = bool(_LABEL_NAME_RE.match(name)) and len(name) <= MAX_NAME
        if prefix:
            ok = ok and len(prefix) <= 253 and bool(_DNS1123_SUBDOMAIN_RE.match(prefix))
        if not ok:
            self.error(
                path,
                f"key {key!r} is not a valid label/annotation key",
                "use an optional DNS prefix and '/', then at most 63 letters, digits, '-', '_' or '.' "
                "(e.g. example.com/team)",
            )

    def quantity(self, value: Any, path: str) -> Decimal | None:
        parsed = parse_quantity(value)
        if parsed is None:
            self.error(path, f"{value!r} is not a Kubernetes quantity", _QUANTITY_FIX)
            return None
        if parsed < 0:
            self.error(path, f"{value!r} is negative", "use a positive quantity")
            return None
        return parsed


def validate_tfjob(manifest: Any, *, require_name: bool = True) -> list[str]:
    """Raise :class:`TFJobValidationError` listing every problem found; return the warnings.

    ``require_name=False`` accepts a manifest without ``metadata.name``/``generateName`` (the
    operator validates a user's template before giving it a name).
    """
    check = _Checker()
    _validate(check, manifest, require_name)
    if check.problems:
        raise TFJobValidationError(check.problems)
    return check.warnings


def _validate(check: _Checker, manifest: Any, require_name: bool) -> None:
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


def _validate_metadata(check: _Checker, metadata: Mapping[str, Any], require_name: bool) -> int | None:
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


def _validate_namespace_and_meta(check: _Checker, metadata: Mapping[str, Any]) -> None:
    ns = metadata.get("namespace")
    problem = None if ns is None else namespace_problem(ns)
    if problem:
        check.error("metadata.namespace", problem, NAMESPACE_FIX)
    check.labels(metadata.get("labels"), "metadata.labels")
    check.labels(metadata.get("annotations"), "metadata.annotations", values_are_labels=False)


def _validate_replica_specs(check: _Checker, specs: Mapping[str, Any]) -> dict[str, int]:
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
        if not _is_int(replicas):
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


def _validate_template(check: _Checker, template: Any, path: str) -> None:
    # Imported here: container_validation builds on this module's checker.
    from airflow_tfjob.container_validation import validate_container

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
                _choice_fix(op, ("Equal", "Exists")),
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
                _choice_fix(effect, ("NoSchedule", "PreferNoSchedule", "NoExecute")),
            )
    sa = pod.get("serviceAccountName")
    if sa is not None and (not isinstance(sa, str) or len(sa) > 253 or not _DNS1123_SUBDOMAIN_RE.match(sa)):
        check.error(
            f"{ppath}.serviceAccountName",
            f"{sa!r} is not a valid service account name",
            "use lower-case letters, digits, '-' and '.'",
        )


def _validate_run_policy(check: _Checker, spec: Mapping[str, Any], counts: Mapping[str, int]) -> None:
    policy = check.mapping(spec.get("runPolicy"), "spec.runPolicy")
    base = "spec.runPolicy"
    success = spec.get("successPolicy")
    if success is not None and success not in SUCCESS_POLICIES:
        check.error(
            "spec.successPolicy",
            f"{success!r} is not a success policy (it would behave as the default)",
            _choice_fix(success, SUCCESS_POLICIES),
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
            _choice_fix(clean, CLEAN_POD_POLICIES),
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
                _choice_fix(managed, MANAGED_BY_VALUES),
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
        if _is_int(min_available) and min_available > total:
            check.error(
                f"{spath}.minAvailable",
                f"asks for {min_available} pods to be scheduled together but the job has only {total}",
                f"use at most {total}, or leave it out (gang scheduling then waits for all pods)",
            )
        min_res = check.mapping(sched.get("minResources"), f"{spath}.minResources")
        for name, qty in (min_res or {}).items():
            check.quantity(qty, f"{spath}.minResources.{name}")


def _validate_job_semantics(
    check: _Checker,
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


__all__ = ["Problem", "TFJobValidationError", "parse_quantity", "suggest_replica_type", "validate_tfjob"]
