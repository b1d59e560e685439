"""The embedded local cluster: a Kubernetes-like API server, the job controllers and a process runner.

Nothing in the provider imports this package; tests, scripts and `tfjob-local serve` start it. It imports
only `airflow_tfjob.constants` and `airflow_tfjob.jobs.kinds` from the provider.

Its rooms, each a package whose `__init__` states its contract: model/ (the kinds and what an object is),
store/ (objects, watches, deletion, garbage collection), apiserver/ (the REST API, its middlewares and
documents), admission/ (what a write is checked against), controllers/ (the reconcile core and the
controllers on it), node/ (the kubelet: processes, logs, local networking), kueue/ (the optional Kueue
emulation). At the top: cluster.py assembles them; cli.py, options.py, credential.py and faults.py are
the entry points users name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_tfjob.local.cluster import ClusterRuntime, LocalCluster

__all__ = ["ClusterRuntime", "LocalCluster"]


def __getattr__(name: str) -> Any:
    # On first use, not at the package's import: `tfjob-local` checks its command line (and serves
    # `credential`) without loading the cluster.
    if name in __all__:
        from airflow_tfjob.local import cluster

        return getattr(cluster, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
