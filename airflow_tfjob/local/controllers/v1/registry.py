"""The job controllers the local cluster runs: one per kind of airflow_tfjob/jobs/kinds.py, each a
V1JobController over its kind's KindPass (tfjob.py and the kind modules beside it)."""

from __future__ import annotations

from airflow_tfjob.jobs.kinds import KINDS
from airflow_tfjob.local.controllers.v1.controller import V1JobController
from airflow_tfjob.local.controllers.v1.jax import JAXJobController
from airflow_tfjob.local.controllers.v1.paddle import PaddleJobController
from airflow_tfjob.local.controllers.v1.pytorch import PyTorchJobController
from airflow_tfjob.local.controllers.v1.tfjob import TFJobController
from airflow_tfjob.local.controllers.v1.xgboost import XGBoostJobController

CONTROLLERS: dict[str, type[V1JobController]] = {
    c.job_pass.kind: c
    for c in (TFJobController, PyTorchJobController, XGBoostJobController, JAXJobController, PaddleJobController)
}
assert set(CONTROLLERS) == {k.kind for k in KINDS}, "every kind in kinds.py needs a controller module"
