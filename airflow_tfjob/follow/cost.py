"""What a task's job cost: accelerator-hours (GPU-hours) and CPU core-hours, split into the time it
queued and the time it ran (pure: the clock is passed in).

The figures are requests times time, from the job's own record: every replica's requested accelerators
and CPU cores (its containers' requests, or their limits where no request is given, as the API server
defaults them), times the seconds between the job's timestamps. The job's creation opens the queue,
its start (the training-operator's ``startTime``, a TrainJob's resumption, each set when Kueue admits
a suspended job) ends it, its completion (or the clock, for a job that has not finished) ends the run.
For a job Kueue queued, the follow's own measure of the time waited (which adds up every wait, a
preempted job's second one too) replaces start minus creation, and the run is the rest.

This is what the job held, not what it used: a replica that waits for a node or an image counts from
the job's start, as a reserved GPU does on a bill. No I/O: the operator reads the finished job and
passes it here with the clock and Kueue's wait.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from airflow_tfjob.build.checker import parse_quantity
from airflow_tfjob.constants import GPU_RESOURCE
from airflow_tfjob.jobs.adapter import adapter_of
from airflow_tfjob.jobs.status import epoch_seconds

#: The extended resources counted as accelerators: NVIDIA's device plugin first (the one ``gpus=``
#: sets), then AMD's, Intel's (GPU and Gaudi), AWS Neuron's and Google's TPUs, by their device
#: plugins' resource names. Any other resource ending in ``/gpu`` counts too.
ACCELERATOR_RESOURCES: tuple[str, ...] = (
    GPU_RESOURCE,
    "amd.com/gpu",
    "gpu.intel.com/i915",
    "gpu.intel.com/xe",
    "habana.ai/gaudi",
    "aws.amazon.com/neuron",
    "aws.amazon.com/neuroncore",
    "google.com/tpu",
)

_HOUR = 3600.0


def is_accelerator(resource: str) -> bool:
    return resource in ACCELERATOR_RESOURCES or resource.endswith("/gpu")


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _container_requests(container: Mapping[str, Any]) -> dict[str, Decimal]:
    """What one container requests: its requests, each missing one taken from its limit (the API
    server's defaulting; an extended resource's request always equals its limit)."""
    resources = _mapping(container.get("resources"))
    wanted: dict[str, Decimal] = {}
    for source in (_mapping(resources.get("limits")), _mapping(resources.get("requests"))):
        for name, value in source.items():
            quantity = parse_quantity(value)
            if quantity is not None:
                wanted[str(name)] = quantity  # requests come second: they win over limits
    return wanted


def pod_requests(template: Mapping[str, Any]) -> dict[str, Decimal]:
    """The requests of one replica's pod: the sum over its containers, or the largest init container
    where that is more (the scheduler's rule: init containers run one at a time, before the others)."""
    spec = _mapping(_mapping(template).get("spec"))
    total: dict[str, Decimal] = {}
    for container in spec.get("containers") or ():
        for name, quantity in _container_requests(_mapping(container)).items():
            total[name] = total.get(name, Decimal(0)) + quantity
    for container in spec.get("initContainers") or ():
        for name, quantity in _container_requests(_mapping(container)).items():
            total[name] = max(total.get(name, Decimal(0)), quantity)
    return total


@dataclass(frozen=True)
class JobCost:
    """Requests and times of one job; the hours are derived from them."""

    replicas: int = 0
    accelerators: dict[str, float] = field(default_factory=dict)  # resource -> count, every replica's
    cpu_cores: float = 0.0  # every replica's
    queued_seconds: float = 0.0
    running_seconds: float = 0.0
    finished: bool = True  # False: the run is counted up to the clock the caller passed

    @property
    def gpus(self) -> float:
        """Every accelerator the job requested, whatever its resource name."""
        return sum(self.accelerators.values())

    def gpu_hours(self, seconds: float) -> float:
        return self.gpus * seconds / _HOUR

    def cpu_core_hours(self, seconds: float) -> float:
        return self.cpu_cores * seconds / _HOUR

    def to_dict(self) -> dict[str, Any]:
        """The task's ``cost`` (XCom, the result, the lineage facet): JSON, hours rounded to 6 places."""
        queued, running = self.queued_seconds, self.running_seconds
        return {
            "gpu_hours": _round(self.gpu_hours(queued + running)),
            "queued_gpu_hours": _round(self.gpu_hours(queued)),
            "running_gpu_hours": _round(self.gpu_hours(running)),
            "cpu_core_hours": _round(self.cpu_core_hours(queued + running)),
            "queued_cpu_core_hours": _round(self.cpu_core_hours(queued)),
            "running_cpu_core_hours": _round(self.cpu_core_hours(running)),
            "queued_seconds": round(queued, 3),
            "running_seconds": round(running, 3),
            "replicas": self.replicas,
            "gpus": _number(self.gpus),
            "cpu_cores": _number(self.cpu_cores),
            "accelerators": {name: _number(count) for name, count in sorted(self.accelerators.items())},
            "finished": self.finished,
        }


def _round(hours: float) -> float:
    return round(hours, 6)


def _number(value: float) -> float | int:
    return int(value) if float(value).is_integer() else round(value, 6)


def job_requests(job: Mapping[str, Any]) -> tuple[int, dict[str, float], float]:
    """(replicas, accelerators by resource, CPU cores) over every replica of the job, as its API's
    adapter shapes the replicas (a TrainJob's nodes with their ``resourcesPerNode``)."""
    replicas = 0
    accelerators: dict[str, Decimal] = {}
    cpu = Decimal(0)
    for spec in adapter_of(job).replica_specs(job).values():
        count = spec.get("replicas", 1)
        count = count if isinstance(count, int) and not isinstance(count, bool) and count >= 0 else 1
        replicas += count
        for name, quantity in pod_requests(_mapping(spec.get("template"))).items():
            if name == "cpu":
                cpu += quantity * count
            elif is_accelerator(name):
                accelerators[name] = accelerators.get(name, Decimal(0)) + quantity * count
    return replicas, {name: float(n) for name, n in accelerators.items() if n}, float(cpu)


def job_cost(job: Mapping[str, Any], *, now: float, queue_wait: float | None = None) -> JobCost:
    """The cost of ``job`` (a job object as the API returns it) at epoch second ``now``.

    ``queue_wait``: the seconds Kueue kept the job waiting, as the follow measured them (None for a job
    without a queue, whose wait is its start minus its creation).
    """
    replicas, accelerators, cpu = job_requests(job)
    status = adapter_of(job).interpret(job)
    created = epoch_seconds(_mapping(job.get("metadata")).get("creationTimestamp"))
    started = epoch_seconds(status.start_time)
    ended = epoch_seconds(status.completion_time) if status.finished else None
    end = ended if ended is not None else now
    if created is None:
        created = started if started is not None else end
    elapsed = max(0.0, end - created)
    if queue_wait is not None:
        queued = min(max(0.0, float(queue_wait)), elapsed)
    elif started is not None:
        queued = min(max(0.0, started - created), elapsed)
    else:
        queued = elapsed  # never started: it queued until it ended (or until now)
    return JobCost(
        replicas=replicas,
        accelerators=accelerators,
        cpu_cores=cpu,
        queued_seconds=queued,
        running_seconds=elapsed - queued,
        finished=ended is not None,
    )
