"""``@task.pytorchjob``: a Python function as the program of every replica of a PyTorchJob.

The mechanism is every decorator's (decorators/replica_function.py): the function travels in environment
variables, every replica calls it, and rank 0 prints its value as the marker line the follow core
keeps. Rank 0 is the Master if the job has one (the operator gives it ``RANK=0``, and Workers
``index + 1``), else Worker-0: a PyTorchJob without a Master gets no ``RANK``, so the replica reads
its pod name, which the kubelet gives as ``HOSTNAME`` (``<job>-worker-0``).
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
from airflow_tfjob.operators.pytorchjob import PyTorchJobOperator

BOOTSTRAP = bootstrap(
    "@task.pytorchjob",
    """
rank = os.environ.get("RANK")
rank0 = rank == "0" if rank is not None else os.environ.get("HOSTNAME", "").endswith("-worker-0")
""",
)


class _PyTorchJobDecoratedOperator(ReplicaFunctionOperator, PyTorchJobOperator):
    custom_operator_name = "@task.pytorchjob"
    template_fields: Sequence[str] = decorated_template_fields(PyTorchJobOperator)
    replica_program = BOOTSTRAP
    replica_args = ("master", "worker")


def pytorchjob_task(
    python_callable: Callable[..., Any] | None = None,
    multiple_outputs: bool | None = None,
    **kwargs: Any,
) -> TaskDecorator:
    """Run the decorated function as a PyTorchJob: ``@task.pytorchjob(master=1, worker=2, image=...)``.

    Takes every PyTorchJobOperator argument except ``command`` (``nproc_per_node``, ``elastic_policy``,
    resources, env, volumes, deferrable...), and ``secret_args`` as ``@task.tfjob`` does. Each replica
    calls the function; the value returned by rank 0 (the Master, else Worker-0) is the task's XCom.
    """
    return task_decorator_factory(
        python_callable=python_callable,
        multiple_outputs=multiple_outputs,
        decorated_operator_class=_PyTorchJobDecoratedOperator,
        **kwargs,
    )
