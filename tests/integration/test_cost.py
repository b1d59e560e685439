"""What a task cost, for a GPU job on a local cluster with two GPUs: the GPU-hours and CPU core-hours
in the task log's summary line, in the XCom ``cost`` and the result, and in the OpenLineage run facet,
equal to the replicas' requests times the job's own timestamps."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pytest
from operator_support import TaskInstance, context_for, replica_command

from airflow_tfjob.jobs.kinds import TFJOB
from airflow_tfjob.operators.tfjob import TFJobOperator

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def local_cluster() -> Iterator[Any]:
    """This module's own cluster: a node with two GPUs (the runner hands out nvidia.com/gpu)."""
    from airflow_tfjob.local import LocalCluster

    with LocalCluster(gpus=["0", "1"], apis=["v1"]) as cluster:
        yield cluster


def epoch(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def test_a_gpu_jobs_cost_is_in_the_summary_xcom_result_and_lineage(
    hook: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    from openlineage.client.serde import Serde

    ti = TaskInstance()
    op = TFJobOperator(
        task_id="train", image="local/python", command=replica_command(), namespace="default",
        worker=2, gpus=1, container_resources={"requests": {"cpu": "500m"}}, env={"SLEEP": "2"},
        startup_timeout=60,
    )  # fmt: skip
    result = op.execute(context_for(ti))
    assert result["state"] == "succeeded"

    job = hook.find_job(TFJOB, result["name"], "default")
    elapsed = epoch(job["status"]["completionTime"]) - epoch(job["metadata"]["creationTimestamp"])
    cost = ti.xcoms["cost"]
    assert cost == result["cost"]
    assert (cost["replicas"], cost["gpus"], cost["cpu_cores"]) == (2, 2, 1)
    assert cost["accelerators"] == {"nvidia.com/gpu": 2}
    assert cost["queued_seconds"] + cost["running_seconds"] == pytest.approx(elapsed)
    assert cost["running_seconds"] >= 2  # each replica slept 2 s after the job started
    assert cost["gpu_hours"] == pytest.approx(2 * elapsed / 3600, abs=1e-6)
    assert cost["cpu_core_hours"] == pytest.approx(elapsed / 3600, abs=1e-6)

    logged = "".join(capfd.readouterr())
    line = next(line for line in logged.splitlines() if "Cost of TFJob" in line)
    assert f"Cost of TFJob default/{result['name']}: {cost['gpu_hours']:.4g} GPU-hours" in line
    assert "on 2 nvidia.com/gpu" in line

    lineage = op.get_openlineage_facets_on_complete(ti)
    facet = Serde.to_dict(lineage.run_facets["kubeflowJobCost"])
    assert (facet["gpu_hours"], facet["accelerators"]) == (cost["gpu_hours"], {"nvidia.com/gpu": 2})
