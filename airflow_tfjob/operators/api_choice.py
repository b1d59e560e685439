"""TFJob's ``api`` parameter: run the TFJob on the TFJob API, or on Kubeflow Trainer v2 as a TrainJob.

``"auto"`` (the default) asks the cluster once per try (API discovery, :mod:`airflow_tfjob.jobs.trainjob.discovery`):
TFJob where ``kubeflow.org/v1`` serves ``tfjobs``, so nothing changes where the training-operator runs,
else a TrainJob on a shipped TensorFlow runtime. ``"tfjob"`` and ``"trainjob"`` force one. Without a
cluster (``render_only``) "auto" renders the TFJob. The choice is made in ``execute`` once the job
its parameters describe is built and validated (invalid input costs no request). A deferred task that
resumes takes it from the kind its trigger followed (the follow options travel in the event), so its
resumption asks the cluster nothing; a resumption after the trigger failed (no event) asks again, and
gets the same answer from the same cluster.

Where the choice runs a TFJob as a TrainJob, a try's builder asks the TFJob -> TrainJob bridge
(:mod:`airflow_tfjob.jobs.trainjob.from_tfjob`) through :mod:`airflow_tfjob.operators.api_bridge`: the
TFJob's name limit and the TrainJob the cluster is handed; no adapter knows of the bridge. This module
is imported at a DAG file's parse (the kind before a try, the parameter's check), the bridge by a try
only.
"""

# names-job-apis: TFJob's own `api` parameter (run a TFJob on Trainer v2) names the two kinds
# it chooses between and asks Trainer v2's discovery (tests/unit/test_api_blind_core.py).
from __future__ import annotations

from collections.abc import Callable

from airflow_tfjob.build.checker import JobValidationError
from airflow_tfjob.jobs.kinds import TFJOB, TRAINJOB, JobKind, kind_named
from airflow_tfjob.jobs.trainjob.discovery import APIS, Discovery, choose_api

__all__ = ["APIS", "ApiChoice", "check_api"]


def check_api(kind: str, api: str) -> None:
    """``api="trainjob"`` is TFJob's: another kind runs on Trainer v2 through TrainJobOperator (checked at
    DAG parse time, with the operator's other parameters)."""
    if kind not in (TFJOB.kind, TRAINJOB.kind) and api == "trainjob":
        raise JobValidationError(
            "api",
            f"'trainjob' maps TFJobs only; a {kind} has Trainer v2 runtimes of its own",
            "leave api out, or run it with TrainJobOperator on a runtime (e.g. torch-distributed)",
            kind=kind,
        )


class ApiChoice:
    """The kind the task's job really is: a TFJob may run as a TrainJob (its adapter then names the limits,
    and the TFJob is mapped onto the TrainJob that runs it, operators/api_bridge.py).

    One per operator instance, which Airflow makes anew for each try: "auto" is asked of the cluster at
    most once, and the try's builder, follow and kill all read the same answer.
    """

    def __init__(self, kind: str, api: str, *, render_only: bool) -> None:
        self.kind = kind
        self.api = api
        self.render_only = render_only
        #: What the cluster answered for "auto" ("tfjob" or "trainjob"); None: not asked yet.
        self.chosen: str | None = None

    @property
    def job_kind(self) -> JobKind:
        """The kind of the job this task submits and follows: a TFJob may run as a TrainJob."""
        return TRAINJOB if self.kind == TFJOB.kind and self._api() == "trainjob" else kind_named(self.kind)

    def _api(self) -> str:
        if self.api in ("tfjob", "trainjob"):
            return self.api
        return self.chosen or "tfjob"  # "auto" not asked yet (parse time, render_only): the TFJob

    def asks_cluster(self) -> bool:
        """Whether ``choose`` would ask the cluster (the operator validates everything before)."""
        return self.kind == TFJOB.kind and self.api == "auto" and self.chosen is None and not self.render_only

    def api_changed_kind(self) -> bool:
        """Whether the API chosen runs the job as another kind than its parameters describe."""
        return self.job_kind.kind != self.kind

    def resume(self, followed_kind: str | None, hook: Callable[[], Discovery]) -> None:
        """The API a resumed deferred task's job runs on: the one whose kind its trigger followed
        (``followed_kind``, from the event's follow options), else asked as in ``execute``."""
        if followed_kind is not None and self.asks_cluster():
            self.chosen = "trainjob" if followed_kind == TRAINJOB.kind else "tfjob"
        self.choose(hook)

    def choose(self, hook: Callable[[], Discovery]) -> None:
        """Ask the cluster which API an ``api="auto"`` TFJob runs on (once; the hook is made only then)."""
        if self.asks_cluster():
            self.chosen = choose_api(hook())
