"""The job controllers the local cluster runs: one per kind of airflow_tfjob/kinds.py, each a
JobController over its kind's JobPass (tfjob.py and the kind modules beside it)."""

from __future__ import annotations

from airflow_tfjob.jobs.kinds import KINDS
from airflow_tfjob.local.controllers.v1 import jax, paddle, pytorch, tfjob, xgboost
from airflow_tfjob.local.controllers.v1.controller import JobController

CONTROLLERS: dict[str, type[JobController]] = {
    c.job_pass.kind: c
    for c in (
        tfjob.Controller,
        pytorch.Controller,
        xgboost.Controller,
        jax.Controller,
        paddle.Controller,
    )
}
assert set(CONTROLLERS) == {k.kind for k in KINDS}, "every kind in kinds.py needs a controller module"
