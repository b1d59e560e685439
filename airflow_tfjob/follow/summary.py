"""One line that tells a person which job a task submitted (pure).

The task log's first screen is what someone reads while the job starts: the job's kind, name and
namespace, how many replicas of each type and which images they run fit on one line, where a
pretty-printed manifest took a screen of its own. The full manifest stays available (DEBUG log
level, and ``render_only=True`` prints it). The log's last screen says what the job cost, in one line
too (:func:`cost_summary`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_tfjob.jobs.adapter import adapter_for
from airflow_tfjob.jobs.kinds import kind_of


def job_summary(manifest: Mapping[str, Any], links: Mapping[str, str] | None = None) -> str:
    """``TFJob default/digits-x: 2 Worker; image tensorflow/tensorflow:2.21.0`` (and its links, if any);
    a TrainJob's: ``TrainJob default/digits-x: 2 node on runtime tensorflow-distributed; image ...``."""
    metadata = manifest.get("metadata") or {}
    kind = kind_of(dict(manifest))
    layout, images = adapter_for(kind).layout(manifest)  # its kind's: replica types, or a TrainJob's nodes
    line = f"{kind.kind} {metadata.get('namespace', '')}/{metadata.get('name', '')}: {layout}; image {images}"
    for name, url in (links or {}).items():
        if url:
            line += f"; {name} {url}"
    return line


def _hours(value: float) -> str:
    return f"{value:.4g}"


def _duration(seconds: float) -> str:
    seconds = round(seconds)
    if seconds < 120:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 120:
        return f"{minutes} min {seconds} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def cost_summary(kind: str, namespace: str, name: str, cost: Mapping[str, Any]) -> str:
    """The line that ends a task's log with what its job held (``follow.cost.JobCost.to_dict``):
    ``Cost of TFJob default/x: 0.02 GPU-hours (0 queued, 0.02 running) on 2 nvidia.com/gpu; 0.04 CPU
    core-hours (0 queued, 0.04 running); queued 2 s, ran 36 s``."""
    parts = []
    if cost.get("gpus"):
        devices = ", ".join(f"{count} {resource}" for resource, count in cost["accelerators"].items())
        parts.append(
            f"{_hours(cost['gpu_hours'])} GPU-hours ({_hours(cost['queued_gpu_hours'])} queued, "
            f"{_hours(cost['running_gpu_hours'])} running) on {devices}"
        )
    else:
        parts.append("no GPU requested")
    if cost.get("cpu_cores"):
        parts.append(
            f"{_hours(cost['cpu_core_hours'])} CPU core-hours ({_hours(cost['queued_cpu_core_hours'])} "
            f"queued, {_hours(cost['running_cpu_core_hours'])} running) on {cost['cpu_cores']} cores"
        )
    else:
        parts.append("no CPU request")
    ran = "running for" if cost.get("finished") is False else "ran"
    parts.append(f"queued {_duration(cost['queued_seconds'])}, {ran} {_duration(cost['running_seconds'])}")
    return f"Cost of {kind} {namespace}/{name}: " + "; ".join(parts)
