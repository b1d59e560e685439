"""One line that tells a person which job a task submitted (pure).

The task log's first screen is what someone reads while the job starts: the job's kind, name and
namespace, how many replicas of each type and which images they run fit on one line, where a
pretty-printed manifest took a screen of its own. The full manifest stays available (DEBUG log
level, and ``render_only=True`` prints it).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_tfjob.kinds import kind_of


def _replica_specs(manifest: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = manifest.get("spec") or {}
    specs = spec.get(kind_of(dict(manifest)).spec_key) if isinstance(spec, Mapping) else None
    return specs if isinstance(specs, Mapping) else {}


def _images(replica: Any) -> list[str]:
    template = replica.get("template") if isinstance(replica, Mapping) else None
    pod_spec = (template or {}).get("spec") if isinstance(template, Mapping) else None
    containers = (pod_spec or {}).get("containers") if isinstance(pod_spec, Mapping) else None
    if not isinstance(containers, list):
        return []
    return [str(c["image"]) for c in containers if isinstance(c, Mapping) and c.get("image")]


def replica_layout(manifest: Mapping[str, Any]) -> str:
    """``"2 Worker, 1 PS"`` in the manifest's order; a type without ``replicas`` counts 1 (the default)."""
    parts = []
    for rtype, replica in _replica_specs(manifest).items():
        count = replica.get("replicas", 1) if isinstance(replica, Mapping) else 1
        parts.append(f"{count} {rtype}")
    return ", ".join(parts) or "no replicas"


def image_list(manifest: Mapping[str, Any]) -> str:
    """The images, once each; by type only when the types run different ones."""
    by_type = {rtype: _images(replica) for rtype, replica in _replica_specs(manifest).items()}
    distinct = list(dict.fromkeys(image for images in by_type.values() for image in images))
    if len(distinct) <= 1:
        return distinct[0] if distinct else "no image"
    return ", ".join(f"{rtype} {' + '.join(images)}" for rtype, images in by_type.items() if images)


def job_summary(manifest: Mapping[str, Any], links: Mapping[str, str] | None = None) -> str:
    """``TFJob default/digits-x: 2 Worker; image tensorflow/tensorflow:2.21.0`` (and its links, if any)."""
    metadata = manifest.get("metadata") or {}
    kind = kind_of(dict(manifest)).kind
    line = (
        f"{kind} {metadata.get('namespace', '')}/{metadata.get('name', '')}: {replica_layout(manifest)}; "
        f"image {image_list(manifest)}"
    )
    for name, url in (links or {}).items():
        if url:
            line += f"; {name} {url}"
    return line
