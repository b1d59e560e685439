"""The job APIs: the one room that knows an API or a kind differs.

The provider runs jobs of two APIs today, the kubeflow.org/v1 kinds (TFJob, PyTorchJob, XGBoostJob,
JAXJob, PaddleJob) and Kubeflow Trainer v2's TrainJob, and it will run more. What differs between them
is answered here and nowhere else:

- :mod:`~airflow_tfjob.jobs.kinds`: the kind table, one row per kind naming its API (pure and
  import-free like ``constants``: the local cluster reads it too);
- :mod:`~airflow_tfjob.jobs.status`: the provider's one status vocabulary (``JobState``, ``JobStatus``)
  that every adapter answers in;
- :mod:`~airflow_tfjob.jobs.adapter`: the interface every API implements (:class:`JobAdapter`, in three
  one-phase Protocols: ``ManifestFacts`` (layout, env entries, name limits, run policy), ``ReadsJob``
  (a job's status, which replica a pod is, rank 0, the pods to expect, the result's extras) and
  ``BuildsJob`` (the submission manifest's steps)) and the registry (:func:`adapter_for`);
- one adapter per API: :mod:`~airflow_tfjob.jobs.v1` for the v1 kinds (data driven by their rows) and
  Trainer v2's, beside the TrainJob code it calls (:mod:`~airflow_tfjob.jobs.trainjob.adapter`).

Contract: the core (follow, status, logs, diagnostics, cleanup, summary, the generic operator, sensor and
trigger) asks an adapter and never branches on an API or names a kind; tests/unit/test_api_blind_core.py
holds it to that. A new API is one adapter module and its line in the registry; a new kind of an
existing API is one row of the kind table. This package's ``__init__`` imports nothing: the local
cluster imports the kind table through it.
"""
