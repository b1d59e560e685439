"""A TrainJob manifest checked before submit: every problem named by field, with its fix (pure).

The rules are the API server's and the admission webhooks' (trainjob-behaviour.md §1.1, §2.2, §5.6)
that can be decided without the cluster, so that a mistake fails the task before anything exists
rather than as a 422/403 or, worse, as a TrainJob that is admitted and never runs (a name too long for
JobSet's pod names only shows as a Warning event, §2.4). What needs the runtime (does it exist, does
it have an initializer job) is left to the webhook, whose message the task log shows.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from airflow_tfjob.build.checker import Checker, JobValidationError, is_int
from airflow_tfjob.build.container_validation import validate_env_entry, validate_image, validate_resources
from airflow_tfjob.build.pod_validation import validate_priority_class
from airflow_tfjob.build.validation import validate_metadata
from airflow_tfjob.jobs.kinds import TRAINJOB
from airflow_tfjob.jobs.trainjob.manifest import RUNTIME_KINDS
from airflow_tfjob.jobs.trainjob.pods import ANNOTATION_TF_REPLICAS

NAME_RE = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
STORAGE_URI_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://.+$")
DOMAIN_PATH_RE = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?\.)+[a-z]{2,63}/[-A-Za-z0-9_./]+$")
MANAGED_BY = ("trainer.kubeflow.org/trainjob-controller", "kueue.x-k8s.io/multikueue")
SPEC_KEYS = (
    "runtimeRef", "initializer", "trainer", "runtimePatches", "suspend", "activeDeadlineSeconds", "managedBy",
)  # fmt: skip
TRAINER_KEYS = ("image", "command", "args", "env", "numNodes", "resourcesPerNode", "numProcPerNode")
# Env the runtime's plugin injects and its webhook refuses in spec.trainer.env (§2.2), by the
# framework a runtime's name starts with (the shipped runtimes' names: torch-distributed, ...).
RESERVED_ENV = {
    "torch": ("PET_NNODES", "PET_NPROC_PER_NODE", "PET_NODE_RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT"),
    "xgboost": ("DMLC_TRACKER_URI", "DMLC_TRACKER_PORT", "DMLC_TASK_ID", "DMLC_NUM_WORKER"),
}
# Containers whose env a runtime patch may not set (§2.2).
NO_PATCHED_ENV = ("node", "dataset-initializer", "model-initializer")
POD_SUFFIX = len("-abcde")


def max_name_length(num_nodes: int | None, rjob: str = "node") -> int:
    """The longest TrainJob name whose pods' generated names stay within 63 characters (§5.6)."""
    last = max((num_nodes or 1) - 1, 0)
    return 63 - len(f"-{rjob}-0-{last}") - POD_SUFFIX


def name_limit(manifest: Mapping[str, Any], unknown_nodes: int = 1) -> int:
    """The longest name whose every pod name fits (§5.6): the trainer's nodes, each initializer, and
    each replicated job of a TFJob run as a TrainJob (a chief's "-chief-0-0" is longer than a node's).
    One limit for the names the provider derives and the names a user gives."""
    spec = _as_map(manifest.get("spec"))
    trainer = _as_map(spec.get("trainer"))
    nodes = trainer.get("numNodes") if is_int(trainer.get("numNodes")) else unknown_nodes
    limit = max_name_length(nodes)
    initializer = _as_map(spec.get("initializer"))
    for key in ("dataset", "model"):
        if initializer.get(key):
            limit = min(limit, max_name_length(1, f"{key}-initializer"))
    annotations = _as_map(_as_map(manifest.get("metadata")).get("annotations"))
    try:
        layout = json.loads(annotations.get(ANNOTATION_TF_REPLICAS) or "{}")
    except (TypeError, ValueError):
        layout = {}
    for entry in layout.values() if isinstance(layout, Mapping) else ():
        rjob, count = [*entry, None, None][:2] if isinstance(entry, list) else (None, None)
        if isinstance(rjob, str) and is_int(count):
            limit = min(limit, max_name_length(count, rjob))
    return limit


def _as_map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def manifest_of(metadata: Mapping[str, Any], spec: Mapping[str, Any]) -> dict[str, Any]:
    return {"metadata": metadata, "spec": spec}


def validate_trainjob(manifest: Any, *, require_name: bool = True) -> list[str]:
    """Raise JobValidationError listing every problem found; return the warnings."""
    check = Checker()
    _validate(check, manifest, require_name)
    if check.problems:
        raise JobValidationError(check.problems, kind=TRAINJOB.kind)
    return check.warnings


def _validate(check: Checker, manifest: Any, require_name: bool) -> None:
    if not isinstance(manifest, Mapping):
        check.error(
            "trainjob", f"is {type(manifest).__name__}, not a mapping", "give a TrainJob manifest (a dict)"
        )
        return
    if manifest.get("apiVersion") != TRAINJOB.api_version:
        check.error(
            "apiVersion", f"is {manifest.get('apiVersion')!r}", f"set apiVersion: {TRAINJOB.api_version}"
        )
    spec = check.mapping(manifest.get("spec"), "spec") or {}
    trainer = check.mapping(spec.get("trainer"), "spec.trainer") or {}
    _metadata(check, manifest.get("metadata") or {}, trainer, spec, require_name)
    check.unknown_keys(spec, SPEC_KEYS, "spec", TRAINJOB.kind)
    _runtime_ref(check, spec.get("runtimeRef"))
    _trainer(check, trainer, spec)
    _initializer(check, spec.get("initializer"))
    _patches(check, spec.get("runtimePatches"))
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is not None and not (is_int(deadline) and deadline >= 1):
        check.error(
            "active_deadline_seconds",
            f"is {deadline!r}",
            "give a whole number of seconds of at least 1, or None",
        )
    if spec.get("suspend") is not None and not isinstance(spec.get("suspend"), bool):
        check.error("suspend", f"is {spec.get('suspend')!r}", "give True or False")
    managed = spec.get("managedBy")
    if managed is not None and managed not in MANAGED_BY:
        check.error(
            "managed_by",
            f"is {managed!r}: the TrainJob controller would never run this job",
            f"use one of {', '.join(MANAGED_BY)}, or leave it unset",
        )


def _metadata(
    check: Checker,
    metadata: Mapping[str, Any],
    trainer: Mapping[str, Any],
    spec: Mapping[str, Any],
    require_name: bool,
) -> None:
    name = metadata.get("name")
    validate_metadata(check, metadata, "")
    if name is None:
        if require_name:
            check.error(
                "name",
                "is missing",
                "give the TrainJob a name (the operator derives one if you leave it out)",
            )
        return
    if not isinstance(name, str) or not NAME_RE.match(name):
        check.error(
            "name",
            f"{name!r} is not an RFC 1035 label (lower-case letters, digits and '-', starting with a letter)",
            "choose a name like 'digits-train'",
        )
        return
    limit = name_limit(manifest_of(metadata, spec))
    if len(name) > limit:
        check.error(
            "name",
            f"{name!r} has {len(name)} characters: JobSet would refuse the pod names it generates "
            f"(<name>-<replicated job>-0-<index>-xxxxx within 63), and the TrainJob would never start",
            f"use a name of at most {limit} characters",
        )


def _runtime_ref(check: Checker, ref: Any) -> None:
    if not isinstance(ref, Mapping) or not ref.get("name"):
        check.error(
            "runtime",
            "is missing: a TrainJob runs on a training runtime",
            'name one, e.g. runtime="torch-distributed" (kubectl get clustertrainingruntimes lists them)',
        )
        return
    if not isinstance(ref["name"], str) or len(ref["name"]) > 253:
        check.error(
            "runtime", f"is {ref['name']!r}", "give the runtime's name (a string of at most 253 characters)"
        )
    kind = ref.get("kind", RUNTIME_KINDS[0])
    check.choice(kind, "runtime_kind", RUNTIME_KINDS, "is not a runtime kind")
    group = ref.get("apiGroup", TRAINJOB.group)
    if group != TRAINJOB.group:
        check.error(
            "spec.runtimeRef.apiGroup", f"is {group!r}", f"set it to {TRAINJOB.group} or leave it out"
        )


def _trainer(check: Checker, trainer: Mapping[str, Any], spec: Mapping[str, Any]) -> None:
    check.unknown_keys(trainer, TRAINER_KEYS, "spec.trainer", TRAINJOB.kind)
    image = trainer.get("image")
    if image is not None and (not isinstance(image, str) or not image.strip() or len(image) > 500):
        check.error("image", f"is {image!r}", "give an image reference such as 'python:3.12'")
    elif image is not None:
        validate_image(check, image, "image")
    for key in ("command", "args"):
        value = trainer.get(key)
        if value is not None and (not isinstance(value, list) or not all(isinstance(v, str) for v in value)):
            check.error(key, f"is {value!r}, not a list of strings", f"give {key} as a list of strings")
        elif isinstance(value, list) and len(value) > 128:
            check.error(key, f"has {len(value)} items", "keep it to at most 128 (the TrainJob API's limit)")
    for key, name in (("numNodes", "num_nodes"), ("numProcPerNode", "num_proc_per_node")):
        value = trainer.get(key)
        if value is not None and not (is_int(value) and value >= 1):
            check.error(
                name, f"is {value!r}", "give a whole number of at least 1, or None for the runtime's own"
            )
    validate_resources(check, trainer.get("resourcesPerNode"), "resources_per_node")
    names = _env_names(check, trainer.get("env"))
    runtime = (
        str((spec.get("runtimeRef") or {}).get("name") or "")
        if isinstance(spec.get("runtimeRef"), Mapping)
        else ""
    )
    for framework, reserved in RESERVED_ENV.items():
        clash = sorted(set(names) & set(reserved))
        if runtime.startswith(framework) and clash:
            check.error(
                "env",
                f"sets {', '.join(clash)}, which the {framework} runtime injects itself (its webhook refuses them)",
                "remove them: the runtime sets them from num_nodes and the pods' names",
            )


def _env_names(check: Checker, env: Any) -> list[str]:
    names: list[str] = []
    for i, entry in enumerate(check.seq(env, "env")):
        if not isinstance(entry, Mapping) or not isinstance(entry.get("name"), str) or not entry["name"]:
            check.error(f"env[{i}]", f"is {entry!r}", 'give {"name": ..., "value": ...}')
            continue
        validate_env_entry(check, entry, f"env[{i}]")
        names.append(entry["name"])
    return names


def _initializer(check: Checker, initializer: Any) -> None:
    for key in ("dataset", "model"):
        part = (initializer or {}).get(key) if isinstance(initializer, Mapping) else None
        uri = part.get("storageUri") if isinstance(part, Mapping) else None
        if uri is not None and (
            not isinstance(uri, str) or (uri and not STORAGE_URI_RE.match(uri)) or len(uri) > 2048
        ):
            check.error(
                f"{key}_storage_uri",
                f"{uri!r} is not a URI (scheme://...)",
                f"give e.g. 'hf://{'tatsu-lab/alpaca' if key == 'dataset' else 'meta-llama/Llama-3.2-1B'}' or 's3://bucket/path'",
            )


def _patches(check: Checker, patches: Any) -> None:
    items = check.seq(patches, "runtime_patches")
    if len(items) > 16:
        check.error("runtime_patches", f"has {len(items)} patches", "merge them into at most 16")
    managers: dict[str, int] = {}
    for i, patch in enumerate(items):
        path = f"runtime_patches[{i}]"
        if not isinstance(patch, Mapping):
            check.error(path, f"is {patch!r}", "give a mapping with manager and trainingRuntimeSpec")
            continue
        manager = patch.get("manager")
        if not isinstance(manager, str) or not DOMAIN_PATH_RE.match(manager):
            check.error(
                f"{path}.manager",
                f"is {manager!r}, not a domain-prefixed path",
                "use e.g. 'example.com/my-team'",
            )
        elif manager in managers:
            # The list is keyed by manager: the API server refuses the duplicate with a 422 at submit.
            check.error(
                f"{path}.manager",
                f"{manager!r} is also runtime_patches[{managers[manager]}]'s manager",
                "give each manager once: merge the two patches, or name another manager",
            )
        else:
            managers[manager] = i
        template = _patch_template(check, patch, path)
        for j, rjob in enumerate(
            ((template.get("spec") or {}).get("replicatedJobs") or [])
            if isinstance(template.get("spec"), Mapping)
            else []
        ):
            pod = _patch_pod(check, rjob, f"{path}.trainingRuntimeSpec.template.spec.replicatedJobs[{j}]")
            for container in (
                (pod.get("spec") or {}).get("containers") or [] if isinstance(pod, Mapping) else []
            ):
                if (
                    isinstance(container, Mapping)
                    and container.get("name") in NO_PATCHED_ENV
                    and container.get("env")
                ):
                    check.error(
                        f"{path}.trainingRuntimeSpec.template.spec.replicatedJobs[{j}]",
                        f"sets env on container {container.get('name')!r}, which the webhook refuses",
                        "give the trainer's env with the env parameter instead",
                    )


# The RuntimePatch structure (trainjob-behaviour.md §1.3): the CRD's schema prunes any other key
# silently, so a misspelt one would make the patch do nothing.
_PATCH_KEYS = ("manager", "time", "trainingRuntimeSpec")
_META_KEYS = ("metadata", "spec")
POD_PATCH_KEYS = (
    "serviceAccountName", "volumes", "initContainers", "containers", "imagePullSecrets", "securityContext",
    "nodeSelector", "affinity", "tolerations", "schedulingGates", "terminationGracePeriodSeconds",
)  # fmt: skip


def _known(check: Checker, value: Any, path: str, keys: tuple[str, ...]) -> Mapping[str, Any]:
    """``value`` as a mapping whose keys are all the API's (each other key refused with its fix)."""
    found = check.mapping(value, path) or {}
    check.unknown_keys(found, keys, path, TRAINJOB.kind)
    return found


def _patch_template(check: Checker, patch: Mapping[str, Any], path: str) -> Mapping[str, Any]:
    _known(check, patch, path, _PATCH_KEYS)
    spec = _known(check, patch.get("trainingRuntimeSpec"), f"{path}.trainingRuntimeSpec", ("template",))
    tpath = f"{path}.trainingRuntimeSpec.template"
    template = _known(check, spec.get("template"), tpath, _META_KEYS)
    _known(check, template.get("spec"), f"{tpath}.spec", ("replicatedJobs",))
    return template


def _patch_pod(check: Checker, rjob: Any, path: str) -> Mapping[str, Any]:
    """One replicated job's patch: its keys checked down to the pod spec's (PodSpecPatch's fields)."""
    rjob = _known(check, rjob, path, ("name", "template"))
    job = _known(check, rjob.get("template"), f"{path}.template", _META_KEYS)
    job_spec = _known(check, job.get("spec"), f"{path}.template.spec", ("template",))
    pod = _known(check, job_spec.get("template"), f"{path}.template.spec.template", _META_KEYS)
    ppath = f"{path}.template.spec.template.spec"
    pod_spec = _known(check, pod.get("spec"), ppath, POD_PATCH_KEYS)
    validate_priority_class(check, pod_spec.get("priorityClassName"), f"{ppath}.priorityClassName")
    return pod
