"""The job-API interface (:class:`JobAdapter`) and its registry (:func:`adapter_for`).

An adapter is bound to one kind's row and answers, for objects of that kind, every question whose answer
differs between APIs. The questions come in three phases, each a small Protocol of its own:
:class:`ManifestFacts` (facts about a manifest in hand), :class:`ReadsJob` (reading a job and its pods as
the cluster shows them) and :class:`BuildsJob` (building the manifest a task submits); a caller that needs
one phase can say so in its types, and an adapter is checked against all three by mypy (each registry
module's ``adapter(kind) -> JobAdapter``). The core holds no ``if kind is ...``: it asks ``adapter_for(kind)`` (or
:func:`adapter_of` for an object) and uses the answer. Adapters are pure: they read the objects they are
given and call no API; the modules they build on are imported when an adapter is first asked for, so
importing this module costs nothing at a DAG file's parse.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any, Protocol

from airflow_tfjob.jobs.kinds import ALL_KINDS, JobKind, as_kind, read_kind

if TYPE_CHECKING:
    from airflow_tfjob.jobs.status import JobStatus

#: The module of each API's adapter, by the ``api`` a kind row names; each has ``adapter(kind)``.
#: A new API: its module and one line here.
ADAPTER_MODULES: dict[str, str] = {
    "kubeflow.org/v1": "airflow_tfjob.jobs.v1",
    "trainer.kubeflow.org": "airflow_tfjob.jobs.trainjob.adapter",
}


@dataclass(frozen=True)
class ResultExtras:
    """What a finished job adds to the task's result beyond the keys every API has."""

    #: Keys added to the result as they are (Trainer v2: ``trainer_status``).
    fields: dict[str, Any] = field(default_factory=dict)
    #: Metrics the job's status reports; the log's own value of a metric wins over these.
    metrics: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ReportedProgress:
    """Progress a job's API reports in the job's own status (Trainer v2's ``trainerStatus``), as the
    program reported it: the follow logs it when it changes and the result keeps it."""

    #: Who reports it, as the task log names it (``"Trainer"``).
    source: str
    #: The result key it is kept under (``"trainer_status"``) and its value there.
    key: str
    value: dict[str, Any]
    percent: float | None = None
    remaining_seconds: float | None = None
    metrics: dict[str, Any] = field(default_factory=dict)


class ManifestFacts(Protocol):
    """Facts about a manifest of the API, or about how the API's controller treats its jobs: asked by
    the submission summary, secret redaction, naming, submission and cleanup, of a manifest in hand."""

    def max_name_length(self, manifest: Mapping[str, Any]) -> int | None:
        """The longest name a job of this kind built from ``manifest`` may get so that every name its
        controllers derive fits; None when the validation's own limit stands."""
        ...

    def env_entries(self, manifest: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
        """Every env entry a manifest gives a container where this API's manifests hold them (the
        entries themselves, so that redaction can replace a secret's value in place); a manifest of
        another API yields none of this API's places, so every adapter may be asked of any manifest."""
        ...

    def layout(self, manifest: Mapping[str, Any]) -> tuple[str, str]:
        """The submission summary's replica layout and images (``"2 Worker"``, ``"tensorflow/tensorflow:2.21.0"``)."""
        ...

    def holds_pods_by_run_policy(self) -> bool:
        """Whether the job's ``spec.runPolicy`` lets the controller delete pods or the job after it ends
        (cleanPodPolicy, TTL): submission then turns it off so the provider drains the logs first."""
        ...

    def ttl_patch(self, seconds: int) -> dict[str, Any] | None:
        """The merge patch that has the API's own controller delete a finished job, with its pods,
        ``seconds`` after its completion time (``keep_failed_for``); None when the API has no such TTL
        (the provider then has a batch Job's TTL delete it, follow/cleanup.py)."""
        ...


class ReadsJob(Protocol):
    """Reading a job (and its pods) as the cluster shows it: the follow, the outcome, the result, lineage
    and the trigger ask these of the objects they read."""

    def interpret(self, job: Mapping[str, Any]) -> JobStatus:
        """The job object's state in the provider's one vocabulary (JobStatus): the deciding condition's
        reason and message, replica counts by type, the failed types, start and completion time."""
        ...

    def with_pods(self, status: JobStatus, pods: Sequence[Mapping[str, Any]]) -> JobStatus:
        """``status`` (what :meth:`interpret` read from the job object) corrected by the job's live pods
        where the object is not the word on the job's running phase: a TrainJob has no Running condition
        and its ``jobsStatus`` follows its JobSet's status a step behind the pods (kubeflow/sdk#803: a
        Kueue-managed TrainJob read by conditions alone looks Created forever). An API whose object says
        it (v1's Running condition) returns ``status`` as it is."""
        ...

    def ever_started(self, job: Mapping[str, Any]) -> bool:
        """Whether the job's conditions (which keep their history) show it reached its running phase
        at some point: a restarted follow is then not held to the start-up window again."""
        ...

    def replica_of(self, pod: Mapping[str, Any]) -> tuple[str, int] | None:
        """(replica type, index) of a pod as this API's controllers label it, which the task log names
        the replica by (``[worker-1]``); None for a pod that is not such a replica."""
        ...

    def rank0(self, job: Mapping[str, Any]) -> tuple[str, int] | None:
        """The replica whose log counts as the master's (metrics, return value, ``log_replicas="master"``)
        where no pod says so by its job-role label; None when the labels decide."""
        ...

    def selected_as(self, job: Mapping[str, Any], replica_type: str) -> str:
        """The replica type ``log_replicas`` selects a replica of ``replica_type`` by (the type itself, but
        for a job run on another API than the one the user wrote it for)."""
        ...

    def expected_pods(self, job: Mapping[str, Any]) -> int:
        """How many pods the job asks for, so that start-up knows when every replica has started (0 when
        the job leaves the count to something the provider does not read)."""
        ...

    def result_extras(self, job: Mapping[str, Any]) -> ResultExtras:
        """What the finished job object adds to the task's result."""
        ...

    def reported_progress(self, job: Mapping[str, Any]) -> ReportedProgress | None:
        """The progress the job's status reports (a TrainJob's ``trainerStatus``, which its program sends to
        Trainer's status server); None where the API has none or the job reports none yet."""
        ...

    def managed_by(self, job: Mapping[str, Any]) -> str | None:
        """The controller the job names as its manager (``managedBy``), None when it names none: Kueue's
        MultiKueue (``kueue.x-k8s.io/multikueue``) says the job runs on a worker cluster."""
        ...

    def replica_specs(self, job: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
        """The job's replicas by type in the v1 shape (``{"Worker": {"replicas": 2, "template": ...}}``),
        for what describes a job's replicas and images whatever its API (lineage's run facet)."""
        ...


class BuildsJob(Protocol):
    """Building the manifest a task submits: from the operator's parameters, validated, and changed for a
    retry. (Running a manifest of one API on another is no adapter's: the TFJob -> TrainJob bridge,
    jobs/trainjob/from_tfjob.py, is the API choice's.)"""

    def assemble_manifest(self, base: dict[str, Any] | None, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The kind's manifest from the operator's manifest parameters (``arguments``, as the kind's
        parameter table names them) over ``base`` (the template or manifest given, if any)."""
        ...

    def validate_manifest(self, manifest: dict[str, Any]) -> list[str]:
        """Raise JobValidationError naming every problem of a manifest of this kind; return the warnings."""
        ...

    def with_volume(
        self, arguments: Mapping[str, Any], volume: Mapping[str, Any], mount: Mapping[str, Any]
    ) -> dict[str, Any]:
        """The manifest ``arguments`` with ``volume`` added to every replica's pod and ``mount`` to its
        training container, in the parameters this kind's builder takes (``checkpoint=``'s claim)."""
        ...

    def set_memory_limit(self, manifest: dict[str, Any], replica_type: str, quantity: str) -> bool:
        """Set the memory limit of ``replica_type``'s training container (the type as its pods are
        labelled, any case) in ``manifest``, in place; False if the manifest has no such replica.
        The retry policy's raised limit after an OOM kill (operators/retry_policy.py)."""
        ...


class JobAdapter(ManifestFacts, ReadsJob, BuildsJob, Protocol):
    """One kind's adapter: the three phases, bound to the kind's row.

    Each API's module returns its adapter from ``adapter(kind) -> JobAdapter``, so mypy checks that the
    class implements every phase (structural typing: no base class to inherit), the way Trainer v2's
    plugins assert their interfaces at compile time; tests/unit/test_adapter_phases.py holds each
    method to exactly one phase and each registry module to that annotation.
    """

    #: The kind's row in the kind table.
    kind: JobKind


@cache
def _adapter(kind: JobKind) -> JobAdapter:
    module = ADAPTER_MODULES.get(kind.api)
    if module is None:
        raise ValueError(
            f"no adapter for the job API {kind.api!r} of {kind.kind} (jobs/adapter.py ADAPTER_MODULES)"
        )
    made: JobAdapter = importlib.import_module(module).adapter(kind)
    return made


def adapter_for(kind: JobKind | str) -> JobAdapter:
    """The adapter for a kind, given as its row or by any name the kind table takes."""
    return _adapter(as_kind(kind))


def adapter_of(job: Mapping[str, Any]) -> JobAdapter:
    """The adapter for a job object or manifest, by its ``kind`` (an unknown or missing kind is read as the
    kind table's default kind's, as the status of an odd object always was)."""
    return _adapter(read_kind(job))


def pod_replica(pod: Mapping[str, Any]) -> tuple[str, int] | None:
    """(type, index) of a replica pod, whichever API's controller labelled it (the first whose adapter
    recognises it, in the kind table's order); None for any other pod."""
    for adapter in _one_per_api():
        ident = adapter.replica_of(pod)
        if ident is not None:
            return ident
    return None


@cache
def _one_per_api() -> tuple[ReadsJob, ...]:
    first = {kind.api: kind for kind in reversed(ALL_KINDS)}
    return tuple(_adapter(first[api]) for api in dict.fromkeys(kind.api for kind in ALL_KINDS))
