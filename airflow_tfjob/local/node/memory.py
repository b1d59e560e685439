"""A container's memory limit, enforced as the kernel's memory cgroup does: past the limit the
container's processes are killed (SIGKILL) and the kubelet reports the container terminated with reason
OOMKilled and exit code 137.

There is no cgroup here: the runner polls the resident memory of the container's process tree
(`/proc/<pid>/statm` of the process and its descendants, `/proc/<pid>/task/*/children`) every
`POLL_INTERVAL` seconds, and kills the process group when the sum passes `resources.limits.memory`.
Deviations (docs/local-cluster.md): a peak shorter than the interval can pass unseen, shared pages count
once per process, and page cache does not count.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from decimal import Decimal, InvalidOperation
from typing import Any

POLL_INTERVAL = 0.05
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_BINARY: dict[str, int | Decimal] = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}
_DECIMAL: dict[str, int | Decimal] = {
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "m": Decimal("0.001"),
}


def limit_bytes(container: dict[str, Any]) -> int | None:
    """The container's memory limit in bytes, or None (no limit, or not a quantity: admission would have
    refused it on a real server)."""
    value = ((container.get("resources") or {}).get("limits") or {}).get("memory")
    if value is None:
        return None
    text = str(value).strip()
    try:
        for table in (_BINARY, _DECIMAL):
            for suffix, factor in table.items():
                if text.endswith(suffix):
                    return int(Decimal(text[: -len(suffix)]) * Decimal(factor))
        return int(Decimal(text))
    except (InvalidOperation, ValueError):
        return None


def _children(pid: int) -> list[int]:
    out: list[int] = []
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError, ValueError), open(f"/proc/{pid}/task/{tid}/children") as f:
                out.extend(int(p) for p in f.read().split())
    return out


def tree_rss(pid: int) -> int:
    """Resident bytes of `pid` and every descendant (0 for those already gone)."""
    total, todo, seen = 0, [pid], set()
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        with contextlib.suppress(OSError, ValueError, IndexError), open(f"/proc/{current}/statm") as f:
            total += int(f.read().split()[1]) * _PAGE
        todo.extend(_children(current))
    return total


async def watch(pid: int, limit: int, kill: Any) -> bool:
    """Poll the process tree of `pid` until it passes `limit` bytes, then `kill()` it and return True; the
    caller cancels the watch once the process has exited by itself (a gone process counts 0 bytes)."""
    while True:
        if tree_rss(pid) > limit:
            kill()
            return True
        await asyncio.sleep(POLL_INTERVAL)
