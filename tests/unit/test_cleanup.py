"""Cleanup after a job's logs are drained: the deletions of its pods and services (follow/cleanup.py)."""

from __future__ import annotations

import asyncio
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


# -- a killed task's job: the same deletions side by side, through either hook ---------------------


class KilledPods(Pods):
    """The calls a kill makes besides the deletions: the job goes first, then nothing is left."""

    def __init__(self, parties: int, fail: str | None = None) -> None:
        super().__init__(parties, fail)
        self.gone = False

    def delete_job(self, kind: Any, name: str, namespace: str, **_: Any) -> None:
        self.deleted.append(f"job/{name}")

    def find_job(self, kind: Any, name: str, namespace: str) -> dict[str, Any] | None:
        return None

    def list_job_pods(self, name: str, namespace: str, **kwargs: Any) -> list[dict[str, Any]]:
        if self.gone:
            return []
        self.gone = True
        return super().list_job_pods(name, namespace, **kwargs)


class AsyncKilledPods:
    """KilledPods through the asynchronous hook's interface; each deletion waits at an asyncio barrier."""

    def __init__(self, parties: int) -> None:
        self.sync = KilledPods(parties=1)
        self.barrier = asyncio.Barrier(parties)

    async def delete_job(self, *args: Any, **kwargs: Any) -> None:
        self.sync.delete_job(*args, **kwargs)

    async def find_job(self, *args: Any) -> dict[str, Any] | None:
        return self.sync.find_job(*args)

    async def list_job_pods(self, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        return self.sync.list_job_pods(*args, **kwargs)

    async def delete_pod(self, name: str, namespace: str, grace_period_seconds: int | None = None) -> None:
        await asyncio.wait_for(self.barrier.wait(), 10)  # every deletion in flight at once, or this times out
        self.sync.deleted.append(f"pod/{name}")

    async def delete_service(self, name: str, namespace: str) -> None:
        await asyncio.wait_for(self.barrier.wait(), 10)
        self.sync.deleted.append(f"service/{name}")


KILLED = ["job/j", *(f"{kind}/j-worker-{i}" for kind in ("pod", "service") for i in range(3))]


def test_a_kill_deletes_the_job_then_its_pods_and_services_side_by_side() -> None:
    hook = KilledPods(parties=6)
    lines: list[str] = []
    done = cleanup.kill(hook, "j", "default", on_kill_action="delete", log=lines.append, kind=TFJOB)  # type: ignore[arg-type]
    assert done and hook.deleted[0] == "job/j" and sorted(hook.deleted) == sorted(KILLED)
    assert lines and "Deleting TFJob default/j" in lines[0]


def test_a_kill_through_the_async_hook_deletes_side_by_side_too() -> None:
    hook = AsyncKilledPods(parties=6)
    done = asyncio.run(
        cleanup.kill_async(hook, "j", "default", on_kill_action="delete", log=lambda _: None, kind=TFJOB)  # type: ignore[arg-type]
    )
    assert done and hook.sync.deleted[0] == "job/j" and sorted(hook.sync.deleted) == sorted(KILLED)


def test_a_kills_failed_deletion_is_raised_after_every_other_was_made() -> None:
    hook = KilledPods(parties=6, fail="service/j-worker-2")
    with pytest.raises(RuntimeError, match="could not delete service/j-worker-2"):
        cleanup.kill(hook, "j", "default", on_kill_action="delete", log=lambda _: None, kind=TFJOB)  # type: ignore[arg-type]
    assert sorted(hook.deleted) == sorted(KILLED)
