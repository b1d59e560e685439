"""The checks of a replica's pod template (metadata, volumes, containers, tolerations, service account).

Called by :mod:`airflow_tfjob.build.validation` for every replica spec of every kind; the only thing that
differs between kinds is the name of the container the operator configures (``kind.container``)
and the default restartPolicy quoted in a warning. One container's checks are in
:mod:`airflow_tfjob.build.container_validation`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_tfjob.build.checker import DNS1123_SUBDOMAIN_RE, Checker, choice_fix
from airflow_tfjob.build.container_validation import validate_container
from airflow_tfjob.jobs.kinds import JobKind

# Why the training container must carry the kind's name (what the operator does with it).
_WHY_MAIN = {"TFJob": "the operator injects TF_CONFIG and the port there"}
_WHY_MAIN_DEFAULT = "the webhook refuses a replica without it, and the operator adds the port there"


def validate_template(check: Checker, template: Any, path: str, kind: JobKind) -> None:
    """The pod template of one replica spec: its metadata, volumes, containers and placement."""
    main = kind.container
    tmpl = check.mapping(template, path)
    if tmpl is None:
        if template is None:
            check.error(path, "is missing", f"add template.spec.containers with a container named {main}")
        return
    meta = check.mapping(tmpl.get("metadata"), f"{path}.metadata")
    if meta:
        check.labels(meta.get("labels"), f"{path}.metadata.labels")
        check.labels(meta.get("annotations"), f"{path}.metadata.annotations", values_are_labels=False)
    pod = check.mapping(tmpl.get("spec"), f"{path}.spec")
    if pod is None:
        if tmpl.get("spec") is None:
            check.error(f"{path}.spec", "is missing", f"add spec.containers with a container named {main}")
        return
    ppath = f"{path}.spec"
    if pod.get("restartPolicy") is not None:
        check.warn(
            f"{ppath}.restartPolicy",
            f"is overwritten by the replica's restartPolicy (default {kind.restart_policy}); set restartPolicy on "
            "the replica instead",
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
                f"{ppath}.containers", "is missing or empty", f"add a container named {main} with an image"
            )
        return
    names: set[str] = set()
    has_main = False
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
        if group == "containers" and cname == main:
            has_main = True
        check.unique_name(cname, f"{cpath}.name", "container", names)
        validate_container(check, container, cpath, declared, is_init=group == "initContainers")
    if not has_main:
        shown = sorted(n for n in names)
        check.error(
            f"{ppath}.containers",
            f"no container is named exactly {main!r} (found {shown})",
            f"name the training container {main!r}: {_WHY_MAIN.get(kind.kind, _WHY_MAIN_DEFAULT)}",
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
    validate_priority_class(check, pod.get("priorityClassName"), f"{ppath}.priorityClassName")
    sa = pod.get("serviceAccountName")
    if sa is not None and (not isinstance(sa, str) or len(sa) > 253 or not DNS1123_SUBDOMAIN_RE.match(sa)):
        check.error(
            f"{ppath}.serviceAccountName",
            f"{sa!r} is not a valid service account name",
            "use lower-case letters, digits, '-' and '.'",
        )


PRIORITY_CLASS_FIX = (
    "use the name of a PriorityClass: lower-case letters, digits, '-' and '.', at most 253 characters "
    "(kubectl get priorityclasses lists them)"
)


def validate_priority_class(check: Checker, value: Any, path: str) -> None:
    """A pod's priority class name (every API's pods, and gang scheduling's): a PriorityClass is a
    DNS-1123 subdomain, so any other name is refused at pod creation, after the job was admitted."""
    if value is None:
        return
    if not isinstance(value, str) or len(value) > 253 or not DNS1123_SUBDOMAIN_RE.match(value):
        check.error(path, f"{str(value)[:80]!r} is not a PriorityClass name", PRIORITY_CLASS_FIX)


#: The label naming a job's Kueue WorkloadPriorityClass (its name has a PriorityClass's syntax).
KUEUE_PRIORITY_LABEL = "kueue.x-k8s.io/priority-class"


def validate_priority_label(check: Checker, labels: Any, path: str) -> None:
    """The job's Kueue priority class label, on any kind: a label value may hold capitals and '_',
    a WorkloadPriorityClass name may not, and Kueue refuses the workload only once it is created."""
    if isinstance(labels, Mapping) and isinstance(labels.get(KUEUE_PRIORITY_LABEL), str):
        validate_priority_class(check, labels[KUEUE_PRIORITY_LABEL], f"{path}.{KUEUE_PRIORITY_LABEL}")
