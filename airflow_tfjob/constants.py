"""Names shared by the provider's modules (and the local cluster): training-operator labels and our own
identity and annotation keys, and the one way a command-line tool reads a number (`NumberOption`).

Kept free of imports so that every module (including the cheap-to-import operator module) can use it.
`NumberOption` lives here for that reason: it is the one leaf that all three tools may import (the local
cluster takes only this module and the kind table from the provider, and its credential plugin, run by
kubectl for every token, stays stdlib-only), so every numeric option of `tfjob-local`, `tfjob-preflight`
and `tfjob-runtimes` is parsed, bounded and refused alike.
"""

from __future__ import annotations

# TFJob's names, stated here only: the kind table's TFJOB row (jobs/kinds.py) reads them.
GROUP = "kubeflow.org"
VERSION = "v1"
API_VERSION = f"{GROUP}/{VERSION}"
PLURAL = "tfjobs"
KIND = "TFJob"

# Canonical replica type keys, in the order the training-operator processes them.
REPLICA_TYPES = ("Chief", "Evaluator", "Master", "PS", "Worker")
CONTAINER_NAME = "tensorflow"
PORT_NAME = "tfjob-port"
DEFAULT_PORT = 2222

# Labels the training-operator puts on pods and services.
LABEL_OPERATOR_NAME = "training.kubeflow.org/operator-name"
LABEL_JOB_NAME = "training.kubeflow.org/job-name"
LABEL_REPLICA_TYPE = "training.kubeflow.org/replica-type"
LABEL_REPLICA_INDEX = "training.kubeflow.org/replica-index"
LABEL_JOB_ROLE = "training.kubeflow.org/job-role"

# Identity labels the provider writes on the TFJob, so a later try can find it again.
LABEL_MANAGED = "airflow.apache.org/tfjob-provider"
LABEL_DAG_ID = "airflow.apache.org/dag-id"
LABEL_TASK_ID = "airflow.apache.org/task-id"
LABEL_RUN_ID = "airflow.apache.org/run-id"
LABEL_MAP_INDEX = "airflow.apache.org/map-index"
LABEL_TRY_NUMBER = "airflow.apache.org/try-number"
LABEL_HANDLED = "airflow.apache.org/tfjob-handled"

ANNOTATION_PREFIX = "tfjob.airflow.apache.org/"
ANNOTATION_DAG_ID = ANNOTATION_PREFIX + "dag-id"
ANNOTATION_TASK_ID = ANNOTATION_PREFIX + "task-id"
ANNOTATION_RUN_ID = ANNOTATION_PREFIX + "run-id"
ANNOTATION_INTENDED_CLEAN_POD_POLICY = ANNOTATION_PREFIX + "clean-pod-policy"
ANNOTATION_INTENDED_TTL = ANNOTATION_PREFIX + "ttl-seconds-after-finished"
ANNOTATION_RESULT_REPORTED = ANNOTATION_PREFIX + "result-reported"
# keep_failed_for: when a failed job and its pods go (RFC 3339), on the job and on the batch Job whose
# TTL deletes a job its API gives no TTL (follow/cleanup.py); the label names the job that Job keeps.
ANNOTATION_KEEP_FAILED_UNTIL = ANNOTATION_PREFIX + "keep-failed-until"
LABEL_KEEPS_FAILED = ANNOTATION_PREFIX + "keeps-failed"

KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
GPU_RESOURCE = "nvidia.com/gpu"
ANNOTATION_MAP_INDEX = ANNOTATION_PREFIX + "map-index"
ANNOTATION_TRY_NUMBER = ANNOTATION_PREFIX + "try-number"
# Comma-separated names of env vars whose literal values the user marked secret (`secret_env`):
# the names only, so that rendered manifests, XComs and logs can hide the values.
ANNOTATION_SECRET_ENV = ANNOTATION_PREFIX + "secret-env"

# Values the training-operator gives meaning to (the CRD accepts any string).
RESTART_POLICIES = ("Always", "OnFailure", "ExitCode", "Never")
CLEAN_POD_POLICIES = ("None", "Running", "All")
SUCCESS_POLICIES = ("", "AllWorkers")
#: The ``managedBy`` of the manager's copy of a job Kueue's MultiKueue runs on a worker cluster: the
#: manager's training operator or Trainer leaves such a job alone (its TTL too), its pods are on the worker.
MULTIKUEUE_MANAGED_BY = "kueue.x-k8s.io/multikueue"
MANAGED_BY_VALUES = ("kubeflow.org/training-operator", MULTIKUEUE_MANAGED_BY)
#: The follow event of a MultiKueue job whose worker stayed lost (integrations/kueue/multikueue.py's
#: WorkerPart ends it).
WORKER_LOST = "worker_lost"
#: The follow events the Kueue integration ends a follow with (integrations/kueue/tracker.py's, and the
#: MultiKueue part's ``worker_lost``), and why the operator deletes the job for each (operators/outcome.py,
#: which a DAG file's parse imports: so here, not beside the tracker and its hooks): a job left queued or
#: suspended would hold its place; one whose worker was lost, its quota on the manager.
KUEUE_FAILURE_EVENTS: dict[str, str] = {
    WORKER_LOST: "its worker cluster was lost while it ran",
    "queue_timeout": "it was not admitted by Kueue within queue_timeout",
    "preempted": "Kueue preempted it and on_preemption is 'fail'",
    "kueue_ignored": "Kueue did not take it in and kueue_require_admission is set",
    "kueue_inadmissible": "Kueue says it can never be admitted as things stand",
}

#: The grace period (seconds) of a kill's deletions unless the operator's ``kill_grace_period`` says
#: otherwise: SIGTERM, then SIGKILL one second later. A killed task's job must stop within seconds, not
#: after the pods' own terminationGracePeriodSeconds (30 s by default); 1 rather than 0 because 0 is a
#: forced deletion, which removes the pod objects before the kubelet has stopped their processes.
KILL_GRACE_PERIOD = 1
#: Seconds a job may take to start (FollowOptions.startup_timeout's default).
STARTUP_TIMEOUT = 600.0

#: The task_state_store key under which the job of a task instance is recorded (its durable identity:
#: operators/submit.py); TFJobOperator's module re-exports it as ``STATE_KEY``.
JOB_STATE_KEY = "tfjob"
#: The keys of an operator's result (XCom ``return_value``) for a succeeded job (operators/outcome.py);
#: here so that TFJobOperator's module re-exports them without loading what a run reports with.
RESULT_KEYS = (
    "name",
    "namespace",
    "uid",
    "api",
    "state",
    "reason",
    "message",
    "replica_statuses",
    "start_time",
    "completion_time",
    "metrics",
    "cost",
)

# Extra time given to Airflow's own trigger timeout beyond the job deadline: the trigger enforces the
# deadline itself (and deletes the job); Airflow's timeout is the backstop for a stuck trigger. Here so
# that TFJobOperator's module re-exports it without loading what a deferral needs.
TRIGGER_TIMEOUT_MARGIN = 120.0


class NumberOption:
    """The argparse ``type=`` of every numeric command-line option: a finite number within
    [``minimum``, ``maximum``] (``minimum`` itself excluded when ``above_minimum``), whole when ``whole``.

    Why one type for all: ``type=float`` lets ``nan``, ``inf`` and ``1e400`` through, and the first
    ``int()`` or timer that meets them fails far from the command line, with a traceback (a token TTL of
    ``nan`` did). A refusal here is argparse's usage error (exit status 2, no traceback) whose message
    names the option, the value, the accepted range and an example. The bounds are part of the option's
    meaning, so a test can walk every parser and try each option's edges
    (tests/local/test_bad_inputs_numbers.py)."""

    def __init__(self, option: str, *, minimum: float, maximum: float, example: str, whole: bool = False,
                 above_minimum: bool = False, unit: str = "", minimum_means: str = "") -> None:
        self.option = option
        self.minimum = minimum
        self.maximum = maximum
        self.whole = whole
        self.above_minimum = above_minimum
        self.example = example
        self.unit = unit
        self.minimum_means = minimum_means
        # argparse names the type in some of its own messages.
        self.__name__ = f"{option} number"

    def accepted(self) -> str:
        """The accepted range in words, e.g. ``a positive number of seconds, at most 31536000``."""
        unit = f" of {self.unit}" if self.unit else ""
        noun = "whole number" if self.whole else "number"
        if self.above_minimum and self.minimum == 0:
            return f"a positive {noun}{unit}, at most {_plain(self.maximum)}"
        low = f"{_plain(self.minimum)}{f' ({self.minimum_means})' if self.minimum_means else ''}"
        above = "above " if self.above_minimum else "from "
        return f"a {noun}{unit} {above}{low} to {_plain(self.maximum)}"

    def __call__(self, text: str) -> int | float:
        value: int | float | None
        try:
            value = int(text) if self.whole else float(text)
        except (ValueError, OverflowError):  # "nan" for a whole number, "1e9999" digits, "soon"
            value = None
        # NaN fails every comparison, so it fails this one; an infinity is past every maximum.
        if value is None or not (
            (value > self.minimum if self.above_minimum else value >= self.minimum) and value <= self.maximum
        ):
            import argparse  # only on a refusal: this module stays import-free

            shown = text if len(text) <= 40 else f"{text[:20]}...({len(text)} characters)"
            problem = "is out of range" if value is not None and value == value else f"is not a {'whole ' if self.whole else ''}number"
            raise argparse.ArgumentTypeError(
                f"{self.option} {shown!r} {problem}: give {self.accepted()}, e.g. {self.option} {self.example}"
            )
        return value

    def __repr__(self) -> str:
        return f"NumberOption({self.option!r}, {self.accepted()})"


def _plain(bound: float) -> str:
    """A bound as a reader writes it: 31536000, not 3.1536e+07."""
    return str(int(bound)) if float(bound).is_integer() else str(bound)


#: The longest a command-line lifetime or timeout may be (a year, in seconds): far past any real use,
#: short of what timers, ``time.gmtime`` and RFC 3339 stamps can hold.
MAX_CLI_SECONDS = 365 * 24 * 3600
