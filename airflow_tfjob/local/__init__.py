"""The embedded local cluster: a Kubernetes-like API server, the job controllers and a process runner.

Nothing in the provider imports this package; tests, scripts and `tfjob-local serve` start it.
"""

from __future__ import annotations

from airflow_tfjob.local.cluster import ClusterRuntime, LocalCluster

__all__ = ["ClusterRuntime", "LocalCluster"]
