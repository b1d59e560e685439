"""The evidence a failed job leaves, gathered at the end of a follow while it still exists: every pod the
follow saw (re-listed, so a pod created late is in), the events of each pod and of the job, and each
replica's last log lines, handed to the pure :func:`diagnostics.diagnose`.

Each read is best effort: a diagnosis with less evidence is still worth more than a failed one, and the
job's outcome is decided already.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from airflow_tfjob.follow import diagnostics

if TYPE_CHECKING:
    from airflow_tfjob.hooks.aio import AsyncKubeflowJobHook
    from airflow_tfjob.jobs.kinds import JobKind


async def gather_diagnosis(
    hook: AsyncKubeflowJobHook,
    name: str,
    namespace: str,
    *,
    kind: JobKind,
    pods: dict[str, dict],
    events: Sequence[dict],
    rings: Mapping[str, Any],
    failed_types: Sequence[str],
    tail: int,
) -> list[diagnostics.ReplicaDiagnosis]:
    """``pods``: the follow's pods by uid (updated in place with what the re-list finds)."""
    with contextlib.suppress(Exception):
        for p in await hook.list_job_pods(name, namespace, kind=kind):
            pods[str((p.get("metadata") or {}).get("uid") or "")] = p
    found = list(events)
    pod_names = {str((p.get("metadata") or {}).get("name", "")) for p in pods.values()}
    for pname in sorted(pod_names):
        with contextlib.suppress(Exception):
            found.extend(await hook.list_events(namespace, involved_name=pname))
    with contextlib.suppress(Exception):
        found.extend(await hook.list_events(namespace, involved_name=name))
    if diagnostics.types_without_pods(pods.values(), failed_types):
        # A failed replica whose pods this follow never saw (gone before it started: a trigger started
        # late, a node lost and its pods collected): their events outlive them and say what happened.
        with contextlib.suppress(Exception):
            found.extend(
                e for e in await hook.list_events(namespace)
                if (e.get("involvedObject") or {}).get("kind") == "Pod"
                and str((e.get("involvedObject") or {}).get("name", "")).startswith(f"{name}-")
            )  # fmt: skip
    unique = {str((e.get("metadata") or {}).get("uid") or id(e)): e for e in found}
    ordered = sorted(
        unique.values(), key=lambda e: str(e.get("lastTimestamp") or e.get("firstTimestamp") or "")
    )
    # Latest state per pod name wins (a recreated pod replaces the old one's failure).
    latest: dict[str, dict] = {}
    for p in pods.values():
        latest[str((p.get("metadata") or {}).get("name", ""))] = p
    return diagnostics.diagnose(
        name, latest.values(), ordered, rings, failed_types, tail=tail, container=kind.container
    )
