"""replica_placement: each replica type's own node selector, tolerations, affinity and priority."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_tfjob.build.manifest import build_job
from airflow_tfjob.build.validation import JobValidationError, validate_job
from airflow_tfjob.jobs.kinds import PYTORCHJOB, TFJOB

GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]
        }
    }
}


def _pod(job: dict[str, Any], spec_key: str, rtype: str) -> dict[str, Any]:
    pod: dict[str, Any] = job["spec"][spec_key][rtype]["template"]["spec"]
    return pod


def test_each_type_gets_its_own_placement_over_the_job_wide_one() -> None:
    job = build_job(
        PYTORCHJOB,
        "p",
        "ns",
        image="img",
        replicas={"master": 1, "worker": 2},
        node_selector={"pool": "cpu", "team": "ml"},
        tolerations=[{"key": "spot", "operator": "Exists"}],
        replica_placement={
            "worker": {
                "node_selector": {"pool": "gpu"},
                "tolerations": [GPU_TOLERATION],
                "affinity": AFFINITY,
                "priority_class": "training-high",
            },
        },
    )
    validate_job(job)
    master = _pod(job, PYTORCHJOB.spec_key, "Master")
    worker = _pod(job, PYTORCHJOB.spec_key, "Worker")
    assert master["nodeSelector"] == {"pool": "cpu", "team": "ml"}
    assert master["tolerations"] == [{"key": "spot", "operator": "Exists"}]
    assert "affinity" not in master and "priorityClassName" not in master
    assert worker["nodeSelector"] == {"pool": "gpu", "team": "ml"}
    assert worker["tolerations"] == [{"key": "spot", "operator": "Exists"}, GPU_TOLERATION]
    assert worker["affinity"] == AFFINITY
    assert worker["priorityClassName"] == "training-high"


def test_camel_case_fields_are_taken_as_they_are() -> None:
    job = build_job(TFJOB, "t", "ns", image="img", replicas={"ps": 1, "worker": 1},
                    replica_placement={"PS": {"nodeSelector": {"pool": "cpu"}, "schedulerName": "volcano"}})  # fmt: skip
    ps = _pod(job, TFJOB.spec_key, "PS")
    assert ps["nodeSelector"] == {"pool": "cpu"} and ps["schedulerName"] == "volcano"
    assert "nodeSelector" not in _pod(job, TFJOB.spec_key, "Worker")


@pytest.mark.parametrize(
    ("placement", "field", "fix"),
    [
        ({"worker": {"zone": "a"}}, "replica_placement.Worker.zone", "use one of node_selector"),
        ({"worker": {"node_selector": {"pool": 1}}}, "replica_placement.Worker.node_selector", "{'pool': 'gpu'}"),
        ({"worker": {"tolerations": {"key": "gpu"}}}, "replica_placement.Worker.tolerations", "[{'key'"),
        ({"worker": {"affinity": "zone-a"}}, "replica_placement.Worker.affinity", "nodeAffinity"),
        ({"worker": {"priority_class": ""}}, "replica_placement.Worker.priority_class", "priority_class='high'"),
        ({"worker": "gpu-pool"}, "replica_placement.worker", "replica_placement={'worker'"),
    ],
)
def test_bad_placement_names_the_field_and_the_fix(placement: dict[str, Any], field: str, fix: str) -> None:
    with pytest.raises(JobValidationError) as caught:
        build_job(PYTORCHJOB, "p", "ns", image="img", replicas={"master": 1, "worker": 1}, replica_placement=placement)
    assert caught.value.field == field
    assert fix in str(caught.value)
