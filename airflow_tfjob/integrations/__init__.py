"""Optional integrations: Kueue, OpenLineage and Assets, TensorBoard, extra links, sweeps, the plugin.

Contract: each is loaded only when a task uses it (a job with a queue label, a task with lineage, a
TensorBoard asked for); no core room (``jobs``, ``build``, ``hooks``, ``follow``) imports one at module
load, which import-linter checks. They may use every room below the Airflow-facing ones.
"""
