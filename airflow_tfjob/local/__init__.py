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

from airflow_tfjob.local.cluster import ClusterRuntime, LocalCluster

__all__ = ["ClusterRuntime", "LocalCluster"]
