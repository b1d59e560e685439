"""The training-operator v1.9.4 controllers of the kubeflow.org/v1 kinds (TFJob, PyTorchJob, XGBoostJob,
JAXJob, PaddleJob).

Contract: `controller.V1JobController` runs one kind on the reconcile core, handing each pass its store
and host ports; `jobpass` is the common reconcile pass (pods, services, suspend, deadlines, cleanup,
status), `kindpass` drives it from the kind's row in airflow_tfjob/jobs/kinds.py, `status` and
`kindstatus` its status rules (every kind's UpdateJobStatus by its row's rules); one module per kind
(`tfjob`, `pytorch`, `xgboost`, `jax`, `paddle`) adds what the row does not say and imports no other
kind's. `registry.CONTROLLERS` maps each kind to its controller.
"""
