"""The job kinds the provider runs, one row each naming its API (pure; it imports constants alone).

Every v1 value is what training-operator v1.9.4 serves (the TrainJob row, Kubeflow Trainer v2.3);
docs/reference/kubeflow-v1-kinds.md §5.1 holds
them with the source file each was read from, and tests/unit/test_kinds.py checks the two agree.
Everything that differs between kinds is here, so that the rest of the provider (and the local
cluster) reads a row instead of naming a kind. Adding a kind: one row below and one controller module in
the local cluster (its admission and OpenAPI schema follow from the row; webhook quirks, if any, go in
local/admission/webhooks.py) (docs/architecture.md, "Where new things go").
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# TFJob's names are stated once, in constants (the modules written before this table still read them
# there, and the local cluster may import only constants and this table); its row below reads them.
from airflow_tfjob import constants

GROUP = constants.GROUP
VERSION = constants.VERSION
API_VERSION = constants.API_VERSION

# Who decides that a job succeeded (the controller's UpdateJobStatus):
SUCCESS_TF = "tf"  # Chief/Master if present, else Workers per successPolicy (TFJob)
SUCCESS_MASTER_ELSE_WORKERS = "master-else-workers"  # Master if present, else all Workers (any, if elastic)
SUCCESS_MASTER = "master"  # the Master alone (XGBoostJob)
SUCCESS_ALL_WORKERS = "all-workers"  # every Worker (JAXJob)

# When a replica pod ends Failed, what the status pass records (before restarts and backoff):
FAILURE_TF = "tf"  # Failed, unless the replica is being restarted (TFJob)
FAILURE_RESTART_UNLESS_NEVER = "restart-unless-never"  # Restarting unless restartPolicy is Never
FAILURE_RESTART_ONLY_EXITCODE = "restart-only-exitcode"  # Restarting only under ExitCode (XGBoostJob)


@dataclass(frozen=True)
class JobKind:
    """One kubeflow.org/v1 job kind: its API names, replica layout, defaults and rules."""

    kind: str
    plural: str
    singular: str
    spec_key: str
    # Canonical replica types, in the order the provider lists them (logs, diagnostics, defaults).
    replica_types: tuple[str, ...]
    container: str
    port_name: str
    port: int
    restart_policy: str
    controller: str  # the operator-name label value and the events' source
    success_rule: str
    failure_rule: str
    # Spec fields besides the replica specs and runPolicy.
    extra_spec_fields: tuple[str, ...] = ()
    # The webhook refuses keys not spelled exactly as a replica type (all but TFJob, which normalises).
    exact_case_keys: bool = True
    # Types whose `replicas` the webhook requires to be given and equal to 1.
    single_replica_types: tuple[str, ...] = ()
    # Types that must be present (XGBoostJob's Master).
    required_types: tuple[str, ...] = ()
    # Whether the webhook checks runPolicy.managedBy's value (JAXJob's does not).
    checks_managed_by: bool = True
    # The replica type the `scale` subresource and replicaStatuses' selector are about, if any.
    scale_type: str | None = None
    # The API group and version serving the kind (Trainer v2's TrainJob is not kubeflow.org/v1).
    group: str = GROUP
    version: str = VERSION
    # The pod label naming the job a pod belongs to (what the provider selects a job's pods by).
    pod_job_label: str = "training.kubeflow.org/job-name"
    # The pod label naming the replica type, for a selector of one type's pods.
    pod_type_label: str = "training.kubeflow.org/replica-type"
    # The pod label holding the replica's index within its type.
    pod_index_label: str = "training.kubeflow.org/replica-index"
    # The job API the kind belongs to: which adapter (airflow_tfjob/jobs/adapter.py's registry) reads its
    # objects, names its pods and builds its manifests.
    api: str = "kubeflow.org/v1"

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def kueue_framework(self) -> str:
        """The kind's name in Kueue's ``integrations.frameworks``: ``kubeflow.org/tfjob``,
        ``trainer.kubeflow.org/trainjob`` (docs/reference/kueue-behaviour.md §9.1)."""
        return f"{self.group}/{self.singular}"

    @property
    def reason_prefix(self) -> str:
        return self.kind

    @property
    def list_kind(self) -> str:
        return self.kind + "List"

    def canonical_type(self, key: str) -> str | None:
        """The canonical spelling of a replica key, matched without regard to case; None if unknown."""
        for rtype in self.replica_types:
            if rtype.lower() == key.lower():
                return rtype
        return None

    def has_master_type(self) -> bool:
        return "Master" in self.replica_types


TFJOB = JobKind(
    kind=constants.KIND,
    plural=constants.PLURAL,
    singular="tfjob",
    spec_key="tfReplicaSpecs",
    replica_types=constants.REPLICA_TYPES,
    container=constants.CONTAINER_NAME,
    port_name=constants.PORT_NAME,
    port=constants.DEFAULT_PORT,
    restart_policy="Never",
    controller="tfjob-controller",
    success_rule=SUCCESS_TF,
    failure_rule=FAILURE_TF,
    extra_spec_fields=("successPolicy", "enableDynamicWorker"),
    exact_case_keys=False,
)

PYTORCHJOB = JobKind(
    kind="PyTorchJob",
    plural="pytorchjobs",
    singular="pytorchjob",
    spec_key="pytorchReplicaSpecs",
    replica_types=("Master", "Worker"),
    container="pytorch",
    port_name="pytorchjob-port",
    port=23456,
    restart_policy="OnFailure",
    controller="pytorchjob-controller",
    success_rule=SUCCESS_MASTER_ELSE_WORKERS,
    failure_rule=FAILURE_RESTART_UNLESS_NEVER,
    extra_spec_fields=("elasticPolicy", "nprocPerNode"),
    single_replica_types=("Master",),
    scale_type="Worker",
)

XGBOOSTJOB = JobKind(
    kind="XGBoostJob",
    plural="xgboostjobs",
    singular="xgboostjob",
    spec_key="xgbReplicaSpecs",
    replica_types=("Master", "Worker"),
    container="xgboost",
    port_name="xgboostjob-port",
    port=9999,
    restart_policy="Never",
    controller="xgboostjob-controller",
    success_rule=SUCCESS_MASTER,
    failure_rule=FAILURE_RESTART_ONLY_EXITCODE,
    single_replica_types=("Master",),
    required_types=("Master",),
)

JAXJOB = JobKind(
    kind="JAXJob",
    plural="jaxjobs",
    singular="jaxjob",
    spec_key="jaxReplicaSpecs",
    replica_types=("Worker",),
    container="jax",
    port_name="jaxjob-port",
    port=6666,
    restart_policy="Never",
    controller="jaxjob-controller",
    success_rule=SUCCESS_ALL_WORKERS,
    failure_rule=FAILURE_RESTART_UNLESS_NEVER,
    checks_managed_by=False,
    scale_type="Worker",
)

PADDLEJOB = JobKind(
    kind="PaddleJob",
    plural="paddlejobs",
    singular="paddlejob",
    spec_key="paddleReplicaSpecs",
    replica_types=("Master", "Worker"),
    container="paddle",
    port_name="master",
    port=36543,
    restart_policy="OnFailure",
    controller="paddlejob-controller",
    success_rule=SUCCESS_MASTER_ELSE_WORKERS,
    failure_rule=FAILURE_RESTART_UNLESS_NEVER,
    extra_spec_fields=("elasticPolicy",),
    scale_type="Worker",
)

# Kubeflow Trainer v2's TrainJob (docs/reference/trainjob-behaviour.md): not a kubeflow.org/v1 kind, so
# not in KINDS (the local cluster serves one v1 CRD per row there); its replicas are the JobSet's
# replicated jobs (`node`...), its pods named and labelled by JobSet. The provider's adapter is
# airflow_tfjob/trainjob/; the fields the v1 kinds need for their replica specs are placeholders here.
TRAINER_GROUP = "trainer.kubeflow.org"
TRAINER_VERSION = "v1alpha1"
TRAINJOB = JobKind(
    kind="TrainJob",
    plural="trainjobs",
    singular="trainjob",
    spec_key="",  # no replica specs: the runtime's replicated jobs are not in the TrainJob
    replica_types=("node",),
    container="node",
    port_name="",
    port=29500,
    restart_policy="OnFailure",
    controller="trainjob-controller",
    success_rule="jobset",
    failure_rule="jobset",
    group=TRAINER_GROUP,
    version=TRAINER_VERSION,
    pod_job_label="jobset.sigs.k8s.io/jobset-name",
    pod_type_label="jobset.sigs.k8s.io/replicatedjob-name",
    pod_index_label="batch.kubernetes.io/job-completion-index",
    api="trainer.kubeflow.org",
)

KINDS: tuple[JobKind, ...] = (TFJOB, PYTORCHJOB, XGBOOSTJOB, JAXJOB, PADDLEJOB)
#: Every kind the provider runs: the v1 kinds and TrainJob.
ALL_KINDS: tuple[JobKind, ...] = (*KINDS, TRAINJOB)
#: The kind a manifest naming none is (templates written for this provider before other kinds existed),
#: and the one an object of a kind the provider does not know is read as.
DEFAULT_KIND: JobKind = TFJOB
_BY_NAME = {k.kind.lower(): k for k in ALL_KINDS} | {k.plural: k for k in ALL_KINDS}


def kind_named(name: str) -> JobKind:
    """The row for a kind given as `PyTorchJob`, `pytorchjob` or `pytorchjobs`.

    Raises ValueError naming the kinds there are; callers that check user input turn it into a
    validation error naming their own field.
    """
    row = _BY_NAME.get(name.strip().lower())
    if row is None:
        known = ", ".join(k.kind for k in ALL_KINDS)
        raise ValueError(f"unknown job kind {name!r}: use one of {known} (MPIJob v1 is not supported)")
    return row


def as_kind(kind: JobKind | str) -> JobKind:
    """A row given as itself or by any name kind_named takes (the hooks' and triggers' `kind` argument)."""
    return kind if isinstance(kind, JobKind) else kind_named(kind)


def kind_of(manifest: dict[str, object]) -> JobKind:
    """The row for a manifest's `kind` (TFJob when the manifest names none, as templates written for
    this provider before other kinds existed do)."""
    kind = manifest.get("kind")
    return kind_named(kind) if isinstance(kind, str) and kind else DEFAULT_KIND


def read_kind(job: Mapping[str, Any]) -> JobKind:
    """The row for a job object's kind, never raising: one of a kind the provider does not know is read
    as :data:`DEFAULT_KIND`'s (what the status, summary and cleanup of an odd object fall back to)."""
    try:
        return kind_of(dict(job))
    except ValueError:
        return DEFAULT_KIND
