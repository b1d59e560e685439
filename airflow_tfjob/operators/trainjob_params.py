"""TrainJobOperator's parameters, declared once (the same table form as operators/params.py).

The connection, logging, follow and lifecycle rows are the TFJob table's own (one definition each);
the manifest rows are :class:`~airflow_tfjob.jobs.trainjob.manifest.TrainJobParameters` fields.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from airflow_tfjob.build.checker import JobValidationError
from airflow_tfjob.operators.checks import Rule, log_selection
from airflow_tfjob.operators.params import PARAMETERS, Param, ParameterSet
from airflow_tfjob.operators.shared_checks import is_template

_SHARED = {p.name: p for p in PARAMETERS}
T = True


def _shared(*names: str) -> tuple[Param, ...]:
    return tuple(_SHARED[name] for name in names)


#: The rows after the manifest's (from the first follow row on): how a job is followed and what the
#: task does, those every kind has.
_FIRST = next(i for i, p in enumerate(PARAMETERS) if p.role == "follow")
_STORY = tuple(p for p in PARAMETERS[_FIRST:] if p.kinds is None)


def node_log_selection(name: str, value: Any, given: Mapping[str, Any]) -> Any:
    """``log_replicas`` of a TrainJob: its nodes have no replica types (a TFJob's chief, ps or
    worker:1 would select no pod and leave the task log silent), so every node or node 0."""
    if is_template(value):
        return value
    selection = log_selection(name, value, given) if value in NODE_SELECTIONS else None
    if selection is None:
        raise JobValidationError(
            name,
            f"{value!r} names replicas a TrainJob does not have: its nodes are all alike",
            "use 'all' (every node's log, the default) or 'master' (node 0's)",
            kind="TrainJob",
        )
    return selection


NODE_SELECTIONS = ("all", "master", "*", "all,master", "master,all")


def _manifest(name: str, doc: str, templated: bool = False) -> Param:
    return Param(name, "manifest", doc, None, templated)


#: In the order of TrainJobOperator's signature.
TRAINJOB_ROWS: tuple[Param, ...] = (
    Param("trainjob", "job", "the TrainJob manifest or template: a dict, YAML text or a file", None, T),
    *_shared("name", "namespace", "kubernetes_conn_id", "cluster_context", "config_file", "in_cluster"),
    *_shared("api_retry_timeout"),
    _manifest("runtime", "the ClusterTrainingRuntime (or TrainingRuntime) the job runs on", T),
    _manifest("runtime_kind", "ClusterTrainingRuntime (default) or TrainingRuntime"),
    *_shared("image", "command", "args", "hyperparameters", "env", "secret_env"),
    _manifest("num_nodes", "number of training nodes", T),
    _manifest("resources_per_node", "requests and limits of each node", T),
    _manifest("num_proc_per_node", "processes per node"),
    _manifest("dataset_storage_uri", "the dataset initializer's storage URI", T),
    _manifest("model_storage_uri", "the model initializer's storage URI", T),
    _manifest("runtime_patches", "Trainer's RuntimePatch list over the runtime's pods", T),
    *_shared("labels", "annotations"),
    *_shared("suspend", "active_deadline_seconds", "managed_by"),
    replace(_SHARED["kueue_queue"], target=None),  # a TrainJobParameters field of the same name
    # Then the story's rows, those of every kind (following, logs, lifecycle, lineage, templates): a
    # parameter added there is TrainJobOperator's too. Every node's log by default: a TrainJob's nodes
    # are alike (TrainJobOperator's docstring).
    *(
        replace(row, default="all", check=node_log_selection) if row.name == "log_replicas" else row
        for row in _STORY
    ),
)
TRAINJOB_PARAMETERS = ParameterSet(TRAINJOB_ROWS)


def trainjob_arguments(operator: Any) -> dict[str, Any]:
    """The keyword arguments of trainjob.manifest.build_trainjob: the manifest parameters that are set."""
    return {
        name: getattr(operator, name)
        for name in TRAINJOB_PARAMETERS.manifest_params
        if getattr(operator, name, None) is not None
    }


def every_rule() -> dict[str, Rule]:
    """Every checked parameter's rule (the kubeflow.org/v1 kinds' rows and TrainJob's own), by name, in
    the order of the signatures (check_operator_parameters). Here, above both tables, so that the
    generic table does not import TrainJob's, which imports it."""
    return {row.name: row.check for row in (*PARAMETERS, *TRAINJOB_ROWS) if row.check is not None}
