"""Kubeflow Trainer v2's adapter (TrainJob, ``trainer.kubeflow.org``): the job-API interface over
this package's pure modules (status, pods, manifest, validation).

A TrainJob has no replica specs: its nodes are the runtime's replicated jobs, its pods JobSet's, its
status conditions and counts JobSet's Jobs (docs/reference/trainjob-behaviour.md). A TFJob the
provider runs as a TrainJob (TFJobOperator's ``api``) is built and validated as a TFJob and mapped by
the bridge (from_tfjob.py), which only the API choice asks; once it runs, this adapter reads it as any
TrainJob, with the replica types the mapping annotated.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from airflow_tfjob.jobs.adapter import JobAdapter, ReportedProgress, ResultExtras
from airflow_tfjob.jobs.kinds import JobKind
from airflow_tfjob.jobs.status import JobStatus
from airflow_tfjob.jobs.trainjob import pods, status
from airflow_tfjob.jobs.trainjob.manifest import PATCH_MANAGER, build_trainjob
from airflow_tfjob.jobs.trainjob.validation import name_limit, validate_trainjob


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def layout(manifest: Mapping[str, Any]) -> tuple[str, str]:
    """A TrainJob's nodes and image: ``"2 node on runtime tensorflow-distributed"``, the trainer's image."""
    spec = _mapping(manifest.get("spec"))
    trainer = _mapping(spec.get("trainer"))
    runtime = _mapping(spec.get("runtimeRef")).get("name")
    nodes = trainer.get("numNodes", "the runtime's")
    return f"{nodes} node on runtime {runtime}", str(trainer.get("image") or "the runtime's")


def _path(value: Any, *keys: str) -> Mapping[str, Any]:
    for key in keys:
        value = value.get(key) if isinstance(value, Mapping) else None
    return _mapping(value)


class TrainJobAdapter:
    """The TrainJob kind's answers."""

    def __init__(self, kind: JobKind) -> None:
        self.kind = kind

    def __repr__(self) -> str:
        return f"TrainJobAdapter({self.kind.kind})"

    def interpret(self, job: Mapping[str, Any]) -> JobStatus:
        return status.interpret(job)

    def with_pods(self, current: JobStatus, live: Sequence[Mapping[str, Any]]) -> JobStatus:
        """Running once a node's pod runs (status.with_pods): no Running condition is waited for."""
        return status.with_pods(current, live)

    def ever_started(self, job: Mapping[str, Any]) -> bool:
        """A Complete or Failed condition (a TrainJob has no Running one, trainjob-behaviour.md §6)."""
        conditions = _mapping(job.get("status")).get("conditions")
        return any(
            isinstance(c, Mapping) and c.get("type") in ("Complete", "Failed") for c in conditions or ()
        )

    def replica_of(self, pod: Mapping[str, Any]) -> tuple[str, int] | None:
        return pods.replica_of(pod)

    def rank0(self, job: Mapping[str, Any]) -> tuple[str, int] | None:
        return pods.rank0(job)

    def selected_as(self, job: Mapping[str, Any], replica_type: str) -> str:
        return pods.tf_type(job, replica_type)

    def expected_pods(self, job: Mapping[str, Any]) -> int:
        return pods.expected_pods(job)

    def assemble_manifest(self, base: dict[str, Any] | None, arguments: Mapping[str, Any]) -> dict[str, Any]:
        return build_trainjob(base, **arguments)

    def with_volume(
        self, arguments: Mapping[str, Any], volume: Mapping[str, Any], mount: Mapping[str, Any]
    ) -> dict[str, Any]:
        """A runtime patch of its own (a TrainJob has no volume parameter): the volume in the trainer
        nodes' pods (the runtime's ``node`` replicated job) and the mount in their training container."""
        pod = {"volumes": [dict(volume)], "containers": [{"name": self.kind.container, "volumeMounts": [dict(mount)]}]}
        patch = {
            "manager": f"{PATCH_MANAGER}-{volume['name']}",
            "trainingRuntimeSpec": {
                "template": {
                    "spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": pod}}}}]}
                }
            },
        }
        out = dict(arguments)
        out["runtime_patches"] = [*(out.get("runtime_patches") or []), patch]
        return out

    def validate_manifest(self, manifest: dict[str, Any]) -> list[str]:
        return validate_trainjob(manifest)

    def max_name_length(self, manifest: Mapping[str, Any]) -> int | None:
        """Short enough for every pod JobSet names, from the nodes the TrainJob asks for."""
        # The nodes a runtime may add are unknown here: as if 100 (two digits of index).
        return name_limit(manifest, unknown_nodes=100)

    def env_entries(self, manifest: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
        """The trainer's env (one for every node), then what runtime patches give the runtime's
        containers (a TFJob run as a TrainJob: its chief's and PS's)."""
        spec = _mapping(manifest.get("spec"))
        trainer = spec.get("trainer")
        if isinstance(trainer, Mapping) and isinstance(trainer.get("env"), list):
            yield from (entry for entry in trainer["env"] if isinstance(entry, dict))
        patches = spec.get("runtimePatches")
        for patch in patches if isinstance(patches, list) else []:
            template = _path(patch, "trainingRuntimeSpec", "template", "spec")
            rjobs = template.get("replicatedJobs")
            for rjob in rjobs if isinstance(rjobs, list) else []:
                pod = _path(rjob, "template", "spec", "template", "spec")
                containers = pod.get("containers")
                for container in containers if isinstance(containers, list) else []:
                    env = container.get("env") if isinstance(container, Mapping) else None
                    yield from (entry for entry in env or [] if isinstance(entry, dict))

    def holds_pods_by_run_policy(self) -> bool:
        return False  # no runPolicy: the controller deletes no pod of a finished TrainJob

    def ttl_patch(self, seconds: int) -> dict[str, Any] | None:
        return None  # Trainer v2.3's TrainJob has no TTL (its JobSet's is the Trainer's to set)

    def layout(self, manifest: Mapping[str, Any]) -> tuple[str, str]:
        return layout(manifest)

    def result_extras(self, job: Mapping[str, Any]) -> ResultExtras:
        """``trainer_status``, the TrainJob's progress status where the cluster fills it, and its metrics."""
        reported = status.trainer_progress(job)
        if reported is None:
            return ResultExtras()
        return ResultExtras(fields={"trainer_status": reported}, metrics=dict(reported["metrics"]))

    def reported_progress(self, job: Mapping[str, Any]) -> ReportedProgress | None:
        """``status.trainerStatus`` (TrainJobStatus gate), what the trainer sent Trainer's status server."""
        reported = status.trainer_progress(job)
        if reported is None:
            return None
        return ReportedProgress(
            source="Trainer", key="trainer_status", value=reported, percent=reported["percentage"],
            remaining_seconds=reported["remaining_seconds"], metrics=dict(reported["metrics"]),
        )  # fmt: skip

    def managed_by(self, job: Mapping[str, Any]) -> str | None:
        value = _mapping(job.get("spec")).get("managedBy")
        return str(value) if value else None

    def replica_specs(self, job: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
        """No replica specs (the runtime's replicated jobs are elsewhere): its nodes, in the same shape,
        from what the TrainJob itself says about them."""
        trainer = _mapping(_mapping(job.get("spec")).get("trainer"))
        container = {
            "name": self.kind.container,
            **({"image": trainer["image"]} if trainer.get("image") else {}),
            # What each node requests, where the TrainJob says (the runtime's own is not read here).
            **({"resources": trainer["resourcesPerNode"]} if trainer.get("resourcesPerNode") else {}),
        }
        return {
            "Node": {
                "replicas": trainer.get("numNodes", 1),
                "template": {"spec": {"containers": [container]}},
            }
        }


    def set_memory_limit(self, manifest: dict[str, Any], replica_type: str, quantity: str) -> bool:
        """Every node runs the one trainer (its pods are labelled by their replicated job): the limit
        is the trainer's ``resourcesPerNode``."""
        trainer = manifest.get("spec", {}).get("trainer") if isinstance(manifest.get("spec"), dict) else None
        if not isinstance(trainer, dict):
            return False
        trainer.setdefault("resourcesPerNode", {}).setdefault("limits", {})["memory"] = quantity
        return True


def adapter(kind: JobKind) -> JobAdapter:
    """The registry's entry point (jobs/adapter.py). Annotated with the interface, so that mypy checks
    TrainJobAdapter implements every phase."""
    return TrainJobAdapter(kind)
