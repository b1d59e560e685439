"""Process checks shared by the local cluster's tests."""

from __future__ import annotations

from pathlib import Path


def alive(pid: int) -> bool:
    """True while `pid` is a live process; a zombie (exited, not yet reaped) counts as dead."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"
