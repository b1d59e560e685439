"""The optional Kueue emulation of the local cluster (`tfjob-local serve --kueue`, `LocalCluster(kueue=...)`).

Only `options` is imported by the cluster when Kueue is off; `assembly.Kueue` wires the rest in when it
is on. docs/local-cluster.md, "Kueue", says what it does and where it deviates from Kueue v0.19.2.

An optional room of its own (admission webhook, API kinds and visibility API, a manager on the controllers'
reconcile core): imports model/, store/, controllers/reconciler.py, the API server's extension points
(apiserver/extensions.py, apiserver/request.py) and the structural-schema walk its CRDs are checked with
(admission/schemacheck.py)."""

from airflow_tfjob.local.kueue.options import DEFAULT_INTEGRATIONS, KUBEFLOW_V1, KueueOptions, queue_objects

__all__ = ["DEFAULT_INTEGRATIONS", "KUBEFLOW_V1", "KueueOptions", "queue_objects"]
