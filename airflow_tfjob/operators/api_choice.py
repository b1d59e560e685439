"""TFJob's ``api`` parameter: run the TFJob on the TFJob API, or on Kubeflow Trainer v2 as a TrainJob.

``"auto"`` (the default) asks the cluster once per try (API discovery, :mod:`airflow_tfjob.trainjob.discovery`):
TFJob where ``kubeflow.org/v1`` serves ``tfjobs``, so nothing changes where the training-operator runs,
else a TrainJob on a shipped TensorFlow runtime. ``"tfjob"`` and ``"trainjob"`` force one. Without a
cluster (``render_only``) "auto" renders the TFJob. The choice is made at the start of ``execute`` and
made again (the same answer from the same cluster) when a deferred task resumes or its trigger failed,
so nothing about it has to travel through the trigger.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from airflow_tfjob.kinds import TFJOB, TRAINJOB, JobKind, kind_named
from airflow_tfjob.trainjob.discovery import Discovery, choose_api


class ApiChoice:
    """Mixin of KubeflowJobOperator: the kind the task's job really is, and the TrainJob steps of a TFJob."""

    kind: str
    api: str
    render_only: bool
    _chosen_api: str | None = None

    @property
    def job_kind(self) -> JobKind:
        """The kind of the job this task submits and follows: a TFJob may run as a TrainJob."""
        return TRAINJOB if self.kind == TFJOB.kind and self._api() == "trainjob" else kind_named(self.kind)

    def _api(self) -> str:
        if self.api in ("tfjob", "trainjob"):
            return self.api
        return self._chosen_api or "tfjob"  # "auto" not asked yet (parse time, render_only): the TFJob

    def check_api(self) -> None:
        """``api="trainjob"`` is TFJob's: another kind runs on Trainer v2 through TrainJobOperator."""
        if self.kind not in (TFJOB.kind, TRAINJOB.kind) and getattr(self, "api", "auto") == "trainjob":
            from airflow_tfjob.validation_checker import TFJobValidationError

            raise TFJobValidationError(
                "api",
                f"'trainjob' maps TFJobs only; a {self.kind} has Trainer v2 runtimes of its own",
                "leave api out, or run it with TrainJobOperator on a runtime (e.g. torch-distributed)",
                kind=self.kind,
            )

    def choose_api(self, hook: Callable[[], Discovery]) -> None:
        """Ask the cluster which API an ``api="auto"`` TFJob runs on (once per operator instance; the
        hook is made only then)."""
        if self.kind == TFJOB.kind and self.api == "auto" and self._chosen_api is None and not self.render_only:
            self._chosen_api = choose_api(hook())

    def trainjob_name_length(self, manifest: Mapping[str, Any]) -> int | None:
        """A derived name short enough for every pod JobSet names (TFJob's limit is longer)."""
        if self.job_kind is not TRAINJOB:
            return None
        from airflow_tfjob.trainjob.validation import max_name_length

        specs = (manifest.get("spec") or {}).get(TFJOB.spec_key) or {}
        workers = max((s.get("replicas", 1) for s in specs.values() if isinstance(s, Mapping)), default=1)
        return max_name_length(workers if isinstance(workers, int) else 100)

    def as_trainjob(self, manifest: dict[str, Any]) -> dict[str, Any]:
        """The validated TFJob as the TrainJob that runs it (refusals name the replica types and the fix)."""
        if self.job_kind is not TRAINJOB or manifest.get("kind") == TRAINJOB.kind:
            return manifest
        from airflow_tfjob.trainjob.from_tfjob import to_trainjob
        from airflow_tfjob.trainjob.validation import validate_trainjob

        trainjob = to_trainjob(manifest)
        validate_trainjob(trainjob)
        return trainjob
