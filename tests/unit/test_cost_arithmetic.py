"""What a task's job cost (follow/cost.py): requests times time from the job's own timestamps, for the
v1 kinds and TrainJob, and how the summary line, the lineage facet and a sweep's ranking show it."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_tfjob.follow.cost import job_cost, job_requests, pod_requests
from airflow_tfjob.follow.summary import cost_summary
from airflow_tfjob.integrations.lineage import operator_lineage
from airflow_tfjob.integrations.sweeps import RankTrialsError, rank_trials

T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z


def at(offset: float) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(T0 + offset, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def container(limits: dict[str, Any] | None = None, requests: dict[str, Any] | None = None) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if limits is not None:
        resources["limits"] = limits
    if requests is not None:
        resources["requests"] = requests
    return {"name": "tensorflow", "image": "train:1", "resources": resources}


def tfjob(
    replicas: dict[str, tuple[int, list[dict[str, Any]]]],
    *,
    start: float | None = 10,
    end: float | None = 3610,
    state: str = "Succeeded",
) -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": []}
    if start is not None:
        status["startTime"] = at(start)
        status["conditions"].append({"type": "Running", "status": "False"})
    if end is not None:
        status["completionTime"] = at(end)
        status["conditions"].append({"type": state, "status": "True", "lastTransitionTime": at(end)})
    return {
        "apiVersion": "kubeflow.org/v1",
        "kind": "TFJob",
        "metadata": {"name": "j", "namespace": "ml", "creationTimestamp": at(0)},
        "spec": {
            "tfReplicaSpecs": {
                rtype: {"replicas": n, "template": {"spec": {"containers": containers}}}
                for rtype, (n, containers) in replicas.items()
            }
        },
        "status": status,
    }


def test_gpu_hours_are_replicas_times_gpus_times_hours_split_at_the_start() -> None:
    job = tfjob({"Worker": (2, [container({"nvidia.com/gpu": 2, "cpu": "4"})])}, start=360, end=360 + 3600)
    cost = job_cost(job, now=T0 + 99_999).to_dict()
    assert (cost["queued_seconds"], cost["running_seconds"]) == (360, 3600)
    assert cost["running_gpu_hours"] == 4.0  # 2 replicas x 2 GPUs x 1 h
    assert cost["queued_gpu_hours"] == 0.4
    assert cost["gpu_hours"] == 4.4
    assert cost["cpu_core_hours"] == pytest.approx(8.8)
    assert (cost["replicas"], cost["gpus"], cost["cpu_cores"]) == (2, 4, 8)
    assert cost["accelerators"] == {"nvidia.com/gpu": 4}
    assert cost["finished"] is True


def test_requests_win_over_limits_and_a_missing_request_is_the_limit() -> None:
    template = {"spec": {"containers": [container({"cpu": "2", "amd.com/gpu": "1"}, {"cpu": "500m"})]}}
    assert {k: float(v) for k, v in pod_requests(template).items()} == {"cpu": 0.5, "amd.com/gpu": 1.0}


def test_containers_add_up_and_the_largest_init_container_counts_when_larger() -> None:
    template = {
        "spec": {
            "initContainers": [container(requests={"cpu": "8"})],
            "containers": [container(requests={"cpu": "1"}), container(requests={"cpu": "2"})],
        }
    }
    assert float(pod_requests(template)["cpu"]) == 8.0
    template["spec"]["initContainers"] = [container(requests={"cpu": "1"})]
    assert float(pod_requests(template)["cpu"]) == 3.0


def test_every_known_accelerator_and_any_gpu_resource_counts_memory_does_not() -> None:
    job = tfjob(
        {
            "Chief": (1, [container({"google.com/tpu": 4, "memory": "8Gi"})]),
            "Worker": (3, [container({"example.com/gpu": 1, "habana.ai/gaudi": 2})]),
            "PS": (2, [container(requests={"cpu": "250m"})]),
        }
    )
    replicas, accelerators, cpu = job_requests(job)
    assert (replicas, cpu) == (6, 0.5)
    assert accelerators == {"google.com/tpu": 4.0, "example.com/gpu": 3.0, "habana.ai/gaudi": 6.0}


def test_kueues_measured_wait_replaces_start_minus_creation() -> None:
    # A preempted job's startTime is its last admission: the follow's sum of the waits is the queue.
    job = tfjob({"Worker": (1, [container({"nvidia.com/gpu": 1})])}, start=3000, end=3600)
    cost = job_cost(job, now=T0 + 99_999, queue_wait=1200)
    assert (cost.queued_seconds, cost.running_seconds) == (1200, 2400)
    assert job_cost(job, now=T0, queue_wait=99_999).running_seconds == 0  # never more than elapsed


def test_a_job_that_never_started_only_queued_and_an_unfinished_one_counts_to_now() -> None:
    job = tfjob({"Worker": (1, [container({"nvidia.com/gpu": 1})])}, start=None, end=600, state="Failed")
    cost = job_cost(job, now=T0 + 99_999)
    assert (cost.queued_seconds, cost.running_seconds, cost.finished) == (600, 0, True)
    running = tfjob({"Worker": (1, [container({"nvidia.com/gpu": 1})])}, start=60, end=None)
    cost = job_cost(running, now=T0 + 1860)
    assert (cost.queued_seconds, cost.running_seconds, cost.finished) == (60, 1800, False)


def test_a_trainjob_costs_its_nodes_resources_per_node_from_its_conditions() -> None:
    job = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": "t", "namespace": "ml", "creationTimestamp": at(0)},
        "spec": {
            "runtimeRef": {"name": "torch-distributed"},
            "trainer": {
                "image": "train:1",
                "numNodes": 3,
                "resourcesPerNode": {"limits": {"nvidia.com/gpu": "2"}, "requests": {"cpu": "1"}},
            },
        },
        "status": {
            "conditions": [
                {"type": "Suspended", "status": "False", "lastTransitionTime": at(1800)},
                {"type": "Complete", "status": "True", "lastTransitionTime": at(1800 + 7200)},
            ]
        },
    }
    cost = job_cost(job, now=T0 + 99_999).to_dict()
    assert (cost["replicas"], cost["gpus"], cost["cpu_cores"]) == (3, 6, 3)
    assert (cost["queued_seconds"], cost["running_seconds"]) == (1800, 7200)
    assert (cost["queued_gpu_hours"], cost["running_gpu_hours"]) == (3.0, 12.0)


def test_the_summary_line_says_hours_split_devices_and_times() -> None:
    job = tfjob({"Worker": (2, [container({"nvidia.com/gpu": 1}, {"cpu": "2"})])}, start=30, end=30 + 5400)
    line = cost_summary("TFJob", "ml", "j", job_cost(job, now=T0).to_dict())
    assert line == (
        "Cost of TFJob ml/j: 3.017 GPU-hours (0.01667 queued, 3 running) on 2 nvidia.com/gpu; "
        "6.033 CPU core-hours (0.03333 queued, 6 running) on 4 cores; queued 30 s, ran 90 min 0 s"
    )
    cpu_only = tfjob({"Worker": (1, [container()])}, start=0, end=5)
    assert cost_summary("TFJob", "ml", "j", job_cost(cpu_only, now=T0).to_dict()) == (
        "Cost of TFJob ml/j: no GPU requested; no CPU request; queued 0 s, ran 5 s"
    )


def test_the_lineage_cost_facet_carries_the_figures() -> None:
    from openlineage.client.serde import Serde

    job = tfjob({"Worker": (2, [container({"nvidia.com/gpu": 1})])}, start=0, end=3600)
    cost = job_cost(job, now=T0).to_dict()
    lineage = operator_lineage([], [], cost=cost)
    facet = Serde.to_dict(lineage.run_facets["kubeflowJobCost"])
    assert (facet["gpu_hours"], facet["running_gpu_hours"], facet["accelerators"]) == (
        2.0,
        2.0,
        {"nvidia.com/gpu": 2},
    )
    assert facet["_schemaURL"].endswith("/docs/howto/cost.md")


def test_a_sweep_shows_each_trials_cost_beside_it() -> None:
    lines: list[str] = []
    costs = [{"gpu_hours": 1.5, "cpu_core_hours": 3.0}, None]
    result = rank_trials(
        [{"lr": 1}, {"lr": 2}], [{"acc": 0.5}, {"acc": 0.9}], "acc", log=lines.append, costs=costs
    )
    assert lines == [
        "#1 trial 1 {'lr': 2}: acc=0.9 cost unknown",
        "#2 trial 0 {'lr': 1}: acc=0.5 gpu_hours=1.5 cpu_core_hours=3.0",
    ]
    assert result["trials"][0]["cost"] == {"gpu_hours": 1.5, "cpu_core_hours": 3.0}
    assert result["best"]["cost"] is None
    with pytest.raises(RankTrialsError, match="costs: 2 trials but 1 costs"):
        rank_trials([{"lr": 1}, {"lr": 2}], [{"acc": 0.5}, {"acc": 0.9}], "acc", costs=costs[:1])
    with pytest.raises(RankTrialsError, match=r"costs\[1\]: is a str"):
        rank_trials([{"lr": 1}, {"lr": 2}], [{"acc": 0.5}, {"acc": 0.9}], "acc", costs=[None, "x"])
