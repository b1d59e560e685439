"""The training-operator v1.9.4 controllers of the kubeflow.org/v1 kinds (TFJob, PyTorchJob, XGBoostJob,
JAXJob, PaddleJob).

Contract: `controller.JobController` runs one kind on the reconcile core; `jobpass` is the common reconcile
pass (pods, services, suspend, deadlines, cleanup, status), `status` and `kindstatus` its status rules; one
module per kind (`tfjob`, `pytorch`, `xgboost`, `jax`, `paddle`) adds what the kind's row in
airflow_tfjob/kinds.py does not say. `registry.CONTROLLERS` maps each kind to its controller.
"""
