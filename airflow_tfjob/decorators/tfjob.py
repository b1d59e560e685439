"""``@task.tfjob``: a Python function as the training program of every replica of a TFJob.

The mechanism is every decorator's (decorators/replica_function.py); a TFJob's rank 0, the replica
that returns the value, is the Chief, else the Master, else Worker-0.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from airflow.sdk.bases.decorator import TaskDecorator, task_decorator_factory

from airflow_tfjob.decorators.replica_function import (
    ReplicaFunctionOperator,
    bootstrap,
    decorated_template_fields,
)
from airflow_tfjob.operators.tfjob import TFJobOperator

# TFJob: the Chief, else the Master, else Worker-0, read from the TF_CONFIG the operator injects.
BOOTSTRAP = bootstrap(
    "@task.tfjob",
    """
config = json.loads(os.environ.get("TF_CONFIG") or "{}")
task = config.get("task") or {}
cluster = config.get("cluster") or {}
kind, index = str(task.get("type", "worker")).lower(), int(task.get("index", 0))
has_chief = bool(cluster.get("chief") or cluster.get("master"))
rank0 = kind in ("chief", "master") or (kind == "worker" and index == 0 and not has_chief)
""",
)


class _TFJobDecoratedOperator(ReplicaFunctionOperator, TFJobOperator):
    custom_operator_name = "@task.tfjob"
    replica_program = BOOTSTRAP
    template_fields: Sequence[str] = decorated_template_fields(TFJobOperator)


def tfjob_task(
    python_callable: Callable[..., Any] | None = None,
    multiple_outputs: bool | None = None,
    **kwargs: Any,
) -> TaskDecorator:
    """Run the decorated function as a TFJob: ``@task.tfjob(worker=2, image=..., container_resources=...)``.

    Takes every TFJobOperator argument (replica counts per type, image, resources, env, volumes,
    clean_pod_policy, deferrable...) except ``command``, and ``secret_args``: names of the function's
    parameters whose values are secret (masked in the task log, the call hidden in shown manifests). Each replica calls the function; the value
    returned by the Chief (or Worker-0 when there is none) becomes the task's XCom.
    """
    return task_decorator_factory(
        python_callable=python_callable,
        multiple_outputs=multiple_outputs,
        decorated_operator_class=_TFJobDecoratedOperator,
        **kwargs,
    )
