"""The preflight: what a job needs from a cluster, asked of the cluster before anything is submitted.

Contract: given the jobs a DAG runs (each a :class:`~airflow_tfjob.preflight.needs.Target`: its kind,
the runtime a TrainJob runs on, the Kueue queue it asks for) and a hook on the cluster, return a
:class:`~airflow_tfjob.preflight.report.Report`: one row per part the jobs need (each API's kinds and
served versions, Trainer v2, the runtimes, JobSet, Kueue and its integration for each kind, whether the
Kueue and the Trainer a TrainJob meets fit together, each verb of the provider's Role), saying what is there, what is missing and the fix. A row is blocking when a job
cannot run without the part; the report is ok when no blocking row misses anything. Nothing is created
or changed: the questions are API discovery, reads, and one SelfSubjectAccessReview per verb, all
through the hooks.

The same knowledge serves three callers: the ``tfjob-preflight`` console script (preflight/cli.py), an
operator's ``preflight=True`` (checked before submitting) and an operator's failure at submit time (a
403 or 404 explained by what the cluster lacks, preflight/failures.py).
"""
