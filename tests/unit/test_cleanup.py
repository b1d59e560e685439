"""Cleanup after a job's logs are drained: the deletions of its pods and services (follow/cleanup.py)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from airflow_tfjob.follow import cleanup
from airflow_tfjob.jobs.kinds import TFJOB


class Pods:
    """The part of the hook cleanup uses, over three pods; each deletion waits at a barrier."""

    def __init__(self, parties: int, fail: str | None = None) -> None:
        self.barrier = threading.Barrier(parties, timeout=10)
        self.fail = fail
        self.deleted: list[str] = []
        self._lock = threading.Lock()

    def list_job_pods(self, name: str, namespace: str, **_: Any) -> list[dict[str, Any]]:
        phases = ("Succeeded", "Running", "Pending")
        return [{"metadata": {"name": f"{name}-worker-{i}"}, "status": {"phase": p}} for i, p in enumerate(phases)]

    def _delete(self, what: str) -> None:
        self.barrier.wait()  # every deletion in flight at once, or this times out
        with self._lock:
            self.deleted.append(what)
        if what == self.fail:
            raise RuntimeError(f"could not delete {what}")

    def delete_pod(self, name: str, namespace: str, grace_period_seconds: int | None = None) -> None:
        self._delete(f"pod/{name}")

    def delete_service(self, name: str, namespace: str) -> None:
        self._delete(f"service/{name}")


def test_the_pods_and_services_of_a_job_are_deleted_side_by_side() -> None:
    hook = Pods(parties=6)  # three pods and their three services, all waiting for each other
    deleted = cleanup.delete_pods(hook, "j", "default", only_active=False, kind=TFJOB)  # type: ignore[arg-type]
    assert deleted == ["j-worker-0", "j-worker-1", "j-worker-2"]
    assert sorted(hook.deleted) == sorted(
        [f"{kind}/j-worker-{i}" for kind in ("pod", "service") for i in range(3)]
    )


def test_only_active_pods_with_policy_running() -> None:
    hook = Pods(parties=4)
    deleted = cleanup.delete_pods(hook, "j", "default", only_active=True, kind=TFJOB)  # type: ignore[arg-type]
    assert deleted == ["j-worker-1", "j-worker-2"]
    assert len(hook.deleted) == 4


def test_a_failed_deletion_is_raised_after_every_other_was_made() -> None:
    hook = Pods(parties=6, fail="pod/j-worker-1")
    with pytest.raises(RuntimeError, match="could not delete pod/j-worker-1"):
        cleanup.delete_pods(hook, "j", "default", only_active=False, kind=TFJOB)  # type: ignore[arg-type]
    assert len(hook.deleted) == 6
