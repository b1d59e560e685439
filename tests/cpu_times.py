"""Each test's CPU time in the JUnit XML, beside the wall time pytest already records.

On two cores the suite is CPU-bound, so a test's wall time says as much about its neighbours on the other
xdist workers as about itself; its CPU time does not. From the start of a test's setup to the end of its
teardown: the worker's own CPU (every thread: the local cluster runs in the worker) plus that of every
child the worker reaped meanwhile (with their reaped children: an `airflow dags test`, a replica, a
`uv pip install`), and that of the Airflow commands forked by a zygote (tests/warm_airflow.py, which
reaps them and reports their CPU; a zygote's own start-up counts once it has exited and been waited
for, so not for one still up when the run ends). A child reaped in a later test counts there; a module fixture's
processes count in the test that ends them. `scripts/test_times.py report` sums it by stage and module.
Beside it, the xdist worker that ran the test: the report says how long each worker of a stage ran
tests, against the stage's wall time.
"""

from __future__ import annotations

import os
import resource
import sys
from collections.abc import Generator

import pytest

_START = pytest.StashKey[float]()


def _cpu_seconds() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    warm = sys.modules.get("warm_airflow")
    forked = warm.reaped_cpu() if warm is not None else 0.0
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime + forked


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    item.stash[_START] = _cpu_seconds()
    return (yield)


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, None, None]:
    try:
        return (yield)
    finally:
        # The teardown report, made after this hook, carries the item's properties into the JUnit XML.
        if _START in item.stash:
            item.user_properties.append(("cpu", f"{_cpu_seconds() - item.stash[_START]:.2f}"))
            # Which worker ran it: how long each xdist worker of a stage ran tests.
            item.user_properties.append(("worker", os.environ.get("PYTEST_XDIST_WORKER", "main")))
