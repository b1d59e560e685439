"""The job controllers the local cluster runs: one per kind of airflow_tfjob/kinds.py, each a
JobController over its kind's JobPass (tfjobcontroller.py and the kind modules beside it)."""

from __future__ import annotations

from airflow_tfjob.kinds import KINDS
from airflow_tfjob.local import (
    jaxcontroller,
    paddlecontroller,
    pytorchcontroller,
    tfjobcontroller,
    xgboostcontroller,
)
from airflow_tfjob.local.jobcontroller import JobController

CONTROLLERS: dict[str, type[JobController]] = {
    c.job_pass.kind: c
    for c in (
        tfjobcontroller.Controller,
        pytorchcontroller.Controller,
        xgboostcontroller.Controller,
        jaxcontroller.Controller,
        paddlecontroller.Controller,
    )
}
assert set(CONTROLLERS) == {k.kind for k in KINDS}, "every kind in kinds.py needs a controller module"
