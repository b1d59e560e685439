"""The one line a task logs about the job it submits."""

from __future__ import annotations

from typing import Any

from airflow_tfjob.build.manifest import build_job
from airflow_tfjob.follow.summary import job_summary
from airflow_tfjob.jobs.kinds import PYTORCHJOB, TFJOB


def _job(kind: Any = TFJOB, **kwargs: Any) -> dict[str, Any]:
    job = build_job(
        kind, name="digits", image="tensorflow/tensorflow:2.21.0", command=["python", "t.py"], **kwargs
    )
    job["metadata"]["namespace"] = "ml"
    return job


def test_one_line_names_the_job_its_replicas_and_its_image() -> None:
    line = job_summary(_job(replicas={"Worker": 2, "PS": 1}))
    assert "\n" not in line
    assert line.startswith("TFJob ml/digits: ")
    assert "2 Worker" in line and "1 PS" in line
    assert line.endswith("; image tensorflow/tensorflow:2.21.0")


def test_images_by_type_when_the_types_differ_and_links_when_known() -> None:
    job = _job(PYTORCHJOB, replicas={"Master": 1, "Worker": 3}, images={"Worker": "trainer:2"})
    line = job_summary(job, {"TensorBoard": "http://127.0.0.1:6006/", "Logs": ""})
    assert line.startswith("PyTorchJob ml/digits: 1 Master, 3 Worker; image ")
    assert "Master tensorflow/tensorflow:2.21.0" in line and "Worker trainer:2" in line
    assert line.endswith("; TensorBoard http://127.0.0.1:6006/")


def test_a_manifest_missing_parts_still_summarises() -> None:
    assert (
        job_summary({"metadata": {"name": "x", "namespace": "d"}}) == "TFJob d/x: no replicas; image no image"
    )
