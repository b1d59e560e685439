"""The kubeflow.org/v1 kinds' adapter (TFJob, PyTorchJob, XGBoostJob, JAXJob, PaddleJob), driven by their rows.

The training-operator serves every v1 kind the same way: replica specs under the kind's spec key,
pods labelled with the replica type and index, conditions with the precedence below, a runPolicy
that may delete pods after the end. What differs between the v1 kinds (spec key, replica types and
their casing, container, webhook rules) is data in the kind table, so one class serves them all.

Status rules (tfjob-behaviour.md §2): a condition counts only when its status is the string
``"True"`` (``"False"`` is truthy; Running turns False, not absent, after completion); Failed wins
over Succeeded (both can be True after one reconcile pass); position in the list means nothing for
state, only which types are True.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from airflow_tfjob.build.manifest import build_job
from airflow_tfjob.build.validation import validate_job
from airflow_tfjob.constants import LABEL_REPLICA_INDEX, LABEL_REPLICA_TYPE
from airflow_tfjob.jobs.adapter import JobAdapter, ReportedProgress, ResultExtras
from airflow_tfjob.jobs.kinds import JobKind, kind_of
from airflow_tfjob.jobs.status import COUNT_KEYS, JobState, JobStatus, true_conditions

# "... has failed because 1 Worker replica(s) failed." / "... is failing because "PS" replica(s) failed."
_FAILED_TYPE_RE = re.compile(r'because (?:\d+ )?"?([A-Za-z]+)"? replica\(s\) failed')
# Highest precedence first. Suspended beats Running/Restarting: suspending flips Running to False,
# but a stale Restarting=True can survive next to Suspended=True.
_PRECEDENCE: tuple[tuple[str, JobState], ...] = (
    ("Failed", JobState.FAILED),
    ("Succeeded", JobState.SUCCEEDED),
    ("Suspended", JobState.SUSPENDED),
    ("Restarting", JobState.RESTARTING),
    ("Running", JobState.RUNNING),
    ("Created", JobState.CREATED),
)
# The conditions a job has once it ran (any status: they stay in the list).
_STARTED_CONDITIONS = frozenset({"Running", "Succeeded", "Failed"})
# The replica types that are rank 0 where present (the operator labels their pod job-role=master).
_MASTER_ROLES = frozenset({"chief", "master"})


def _count(value: Any) -> int:
    # Zero counts are omitted in the JSON; anything non-numeric is treated as absent.
    if isinstance(value, bool):
        return 0
    try:
        return max(int(value), 0)
    except (TypeError, ValueError):
        return 0


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def replica_statuses(job: Mapping[str, Any], kind: JobKind) -> dict[str, dict[str, int]]:
    """Counts by canonical replica type, in the kind's order: every type of the spec (zeros if the
    status has none yet), then the status's own ``replicaStatuses``."""
    spec_types = ((job.get("spec") or {}).get(kind.spec_key) or {}).keys()
    raw = (job.get("status") or {}).get("replicaStatuses") or {}
    result: dict[str, dict[str, int]] = {}
    for key in spec_types:
        name = kind.canonical_type(str(key)) or str(key)
        result.setdefault(name, dict.fromkeys(COUNT_KEYS, 0))
    for key, counts in raw.items():
        name = kind.canonical_type(str(key)) or str(key)
        counts = counts if isinstance(counts, Mapping) else {}
        result[name] = {ck: _count(counts.get(ck)) for ck in COUNT_KEYS}
    order = kind.replica_types

    def position(name: str) -> tuple[int, str]:
        return (order.index(name) if name in order else len(order), name)

    return {k: result[k] for k in sorted(result, key=position)}


def interpret(job: Mapping[str, Any], kind: JobKind) -> JobStatus:
    """The job's state, with the reason and message of the condition that decided it (replica specs
    read under the kind's spec key, types in its canonical casing and order)."""
    status = job.get("status") or {}
    conditions = true_conditions(job)
    state, deciding = JobState.CREATED, None
    for ctype, candidate in _PRECEDENCE:
        if ctype in conditions:
            state, deciding = candidate, conditions[ctype]
            break
    replicas = replica_statuses(job, kind)
    failed_types = tuple(name for name, counts in replicas.items() if counts["failed"] > 0)
    message = str((deciding or {}).get("message") or "")
    if state is JobState.FAILED and not failed_types:
        # Backoff/deadline failures, and cleanup, can leave no failed count: the message still names the type.
        match = _FAILED_TYPE_RE.search(message)
        if match:
            failed_types = (kind.canonical_type(match.group(1)) or match.group(1),)
    return JobStatus(
        state=state,
        reason=str((deciding or {}).get("reason") or ""),
        message=message,
        replica_statuses=replicas,
        failed_replica_types=failed_types,
        start_time=status.get("startTime"),
        completion_time=status.get("completionTime"),
    )


def _has_condition(job: Mapping[str, Any], types: frozenset[str]) -> bool:
    conditions = _mapping(job.get("status")).get("conditions")
    return any(isinstance(c, Mapping) and c.get("type") in types for c in conditions or ())


def replica_of(pod: Mapping[str, Any]) -> tuple[str, int] | None:
    """(type, index) from the training-operator's replica-type and replica-index labels."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    rtype = labels.get(LABEL_REPLICA_TYPE)
    idx = labels.get(LABEL_REPLICA_INDEX)
    if not rtype or idx is None or not str(idx).isdigit():
        return None
    return str(rtype), int(idx)


def _replica_specs(manifest: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = manifest.get("spec") or {}
    specs = spec.get(kind_of(dict(manifest)).spec_key) if isinstance(spec, Mapping) else None
    return specs if isinstance(specs, Mapping) else {}


def _images(replica: Any) -> list[str]:
    template = replica.get("template") if isinstance(replica, Mapping) else None
    pod_spec = (template or {}).get("spec") if isinstance(template, Mapping) else None
    containers = (pod_spec or {}).get("containers") if isinstance(pod_spec, Mapping) else None
    if not isinstance(containers, list):
        return []
    return [str(c["image"]) for c in containers if isinstance(c, Mapping) and c.get("image")]


def replica_layout(manifest: Mapping[str, Any]) -> str:
    """``"2 Worker, 1 PS"`` in the manifest's order; a type without ``replicas`` counts 1 (the default)."""
    parts = []
    for rtype, replica in _replica_specs(manifest).items():
        count = replica.get("replicas", 1) if isinstance(replica, Mapping) else 1
        parts.append(f"{count} {rtype}")
    return ", ".join(parts) or "no replicas"


def image_list(manifest: Mapping[str, Any]) -> str:
    """The images, once each; by type only when the types run different ones."""
    by_type = {rtype: _images(replica) for rtype, replica in _replica_specs(manifest).items()}
    distinct = list(dict.fromkeys(image for images in by_type.values() for image in images))
    if len(distinct) <= 1:
        return distinct[0] if distinct else "no image"
    return ", ".join(f"{rtype} {' + '.join(images)}" for rtype, images in by_type.items() if images)


class V1Adapter:
    """One kubeflow.org/v1 kind: every answer read from its row."""

    def __init__(self, kind: JobKind) -> None:
        self.kind = kind

    def __repr__(self) -> str:
        return f"V1Adapter({self.kind.kind})"

    def interpret(self, job: Mapping[str, Any]) -> JobStatus:
        return interpret(job, self.kind)

    def with_pods(self, status: JobStatus, pods: Sequence[Mapping[str, Any]]) -> JobStatus:
        """The operator's Running condition is the word: pods do not change it."""
        return status

    def ever_started(self, job: Mapping[str, Any]) -> bool:
        """A Running, Succeeded or Failed condition, whatever its status (Running turns False, not absent)."""
        return _has_condition(job, _STARTED_CONDITIONS)

    def replica_of(self, pod: Mapping[str, Any]) -> tuple[str, int] | None:
        return replica_of(pod)

    def rank0(self, job: Mapping[str, Any]) -> tuple[str, int] | None:
        """Worker 0 when the job has neither Chief nor Master: rank 0 even where the operator labels no
        pod job-role=master (a PaddleJob in collective mode); None otherwise (the label decides)."""
        specs = _mapping(_mapping(job.get("spec")).get(self.kind.spec_key))
        types = {str(key).lower() for key in specs}
        return None if types & _MASTER_ROLES else ("worker", 0)

    def selected_as(self, job: Mapping[str, Any], replica_type: str) -> str:
        return replica_type

    def expected_pods(self, job: Mapping[str, Any]) -> int:
        """One pod per replica: the replica specs' ``replicas`` summed (1 where not given, as the
        controller defaults it)."""
        specs = _mapping(_mapping(job.get("spec")).get(self.kind.spec_key))
        total = 0
        for spec in specs.values():
            replicas = spec.get("replicas", 1) if isinstance(spec, Mapping) else 1
            total += int(replicas) if isinstance(replicas, int) else 1
        return total

    def assemble_manifest(self, base: dict[str, Any] | None, arguments: Mapping[str, Any]) -> dict[str, Any]:
        return build_job(self.kind, base=base, **arguments)

    def with_volume(
        self, arguments: Mapping[str, Any], volume: Mapping[str, Any], mount: Mapping[str, Any]
    ) -> dict[str, Any]:
        """``volumes`` and ``volume_mounts``, which build_job applies to every replica type."""
        out = dict(arguments)
        out["volumes"] = [*(out.get("volumes") or []), dict(volume)]
        out["volume_mounts"] = [*(out.get("volume_mounts") or []), dict(mount)]
        return out

    def validate_manifest(self, manifest: dict[str, Any]) -> list[str]:
        return validate_job(manifest)

    def max_name_length(self, manifest: Mapping[str, Any]) -> int | None:
        return None  # validation's limit from the replica counts (pods and Services {job}-{type}-{index})

    def env_entries(self, manifest: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
        """Each container's and init container's, of every replica spec under this kind's spec key."""
        specs = _mapping(_mapping(manifest.get("spec")).get(self.kind.spec_key))
        for replica in specs.values():
            pod = _mapping(_mapping(_mapping(replica).get("template")).get("spec"))
            for key in ("containers", "initContainers"):
                containers = pod.get(key)
                for container in containers if isinstance(containers, list) else []:
                    env = _mapping(container).get("env")
                    yield from (
                        (entry for entry in env if isinstance(entry, dict)) if isinstance(env, list) else ()
                    )

    def holds_pods_by_run_policy(self) -> bool:
        return True

    def ttl_patch(self, seconds: int) -> dict[str, Any] | None:
        # The training-operator deletes the job ttlSecondsAfterFinished after status.completionTime
        # (set on failure too), its pods and services with it (CleanupJob).
        return {"spec": {"runPolicy": {"ttlSecondsAfterFinished": seconds}}}

    def layout(self, manifest: Mapping[str, Any]) -> tuple[str, str]:
        return replica_layout(manifest), image_list(manifest)

    def result_extras(self, job: Mapping[str, Any]) -> ResultExtras:
        return ResultExtras()

    def reported_progress(self, job: Mapping[str, Any]) -> ReportedProgress | None:
        return None  # the kubeflow.org/v1 kinds' status says nothing of training progress

    def managed_by(self, job: Mapping[str, Any]) -> str | None:
        value = _mapping(_mapping(job.get("spec")).get("runPolicy")).get("managedBy")
        return str(value) if value else None

    def replica_specs(self, job: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
        specs = _mapping(_mapping(job.get("spec")).get(self.kind.spec_key))
        return {rtype: spec for rtype, spec in specs.items() if isinstance(spec, Mapping)}


    def set_memory_limit(self, manifest: dict[str, Any], replica_type: str, quantity: str) -> bool:
        specs = _mapping(manifest.get("spec")).get(self.kind.spec_key)
        found = False
        for rtype, replica in (specs.items() if isinstance(specs, dict) else ()):
            if str(rtype).lower() != replica_type.lower() or not isinstance(replica, dict):
                continue
            pod = replica.setdefault("template", {}).setdefault("spec", {})
            for container in pod.get("containers") or []:
                if isinstance(container, dict) and container.get("name") == self.kind.container:
                    container.setdefault("resources", {}).setdefault("limits", {})["memory"] = quantity
                    found = True
        return found


def adapter(kind: JobKind) -> JobAdapter:
    """The registry's entry point (jobs/adapter.py): the adapter of one v1 kind. Annotated with the
    interface, so that mypy checks V1Adapter implements every phase."""
    return V1Adapter(kind)
