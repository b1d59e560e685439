"""Host ports for replicas (node/ports.py): chosen outside the kernel's ephemeral range and reserved
host-wide, so that neither an outgoing connection nor another cluster takes a port before its replica
binds it (a parameter server failed with "Failed to add port to server" on a loaded machine)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_tfjob.local.node.ports import (
    HostPorts,
    PortMap,
    bindable,
    ephemeral_range,
    host_ports,
    port_range,
)

# A second process reserving from the same file and range: prints the port it got, or "none".
OTHER = """
import sys
from pathlib import Path
from airflow_tfjob.local.node.ports import HostPorts
ports = HostPorts(Path(sys.argv[1]), (int(sys.argv[2]), int(sys.argv[3])))
try:
    print(ports.reserve(), flush=True)
except RuntimeError:
    print("none", flush=True)
if len(sys.argv) > 4:
    sys.stdin.readline()  # hold the reservation until told
"""


def two_free_ports() -> tuple[int, int]:
    """Two adjacent ports outside the ephemeral range that nothing binds now."""
    first, last = port_range(ephemeral_range()) or (20000, 30000)
    for port in range(first + 1000, last):
        if all(bindable(p) for p in (port, port + 1)):
            return port, port + 1
    raise AssertionError("no two adjacent free ports")


def other_process(lock: Path, first: int, last: int, *, hold: bool = False) -> subprocess.Popen[str]:
    args = [sys.executable, "-c", OTHER, str(lock), str(first), str(last)] + (["hold"] if hold else [])
    return subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def reserved_by_other(lock: Path, first: int, last: int) -> str:
    proc = other_process(lock, first, last)
    out, _ = proc.communicate(timeout=60)
    return out.strip()


@pytest.mark.parametrize(
    ("ephemeral", "chosen"),
    [
        ((32768, 60999), (16384, 32767)),  # Linux's default
        ((20000, 60999), (10000, 19999)),  # never below the floor of well-known services
        ((1024, 40000), (40001, 56384)),  # no room below: above it
        ((1024, 65000), None),  # no room either side: the kernel's choice, as before
        (None, None),  # not Linux (no /proc): the kernel's choice
    ],
)
def test_ports_come_from_outside_the_ephemeral_range(
    ephemeral: tuple[int, int] | None, chosen: tuple[int, int] | None
) -> None:
    assert port_range(ephemeral) == chosen


def test_this_hosts_replica_ports_are_never_ephemeral() -> None:
    ephemeral = ephemeral_range()
    assert ephemeral is not None  # the suite runs on Linux
    ports = [host_ports().reserve() for _ in range(20)]
    try:
        assert not [p for p in ports if ephemeral[0] <= p <= ephemeral[1]]
        assert len(set(ports)) == len(ports)
    finally:
        for port in ports:
            host_ports().release(port)


def test_a_bound_port_is_skipped(tmp_path: Path) -> None:
    first, last = two_free_ports()
    ports = HostPorts(tmp_path / "lock", (first, last))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", first))
        taken.listen()
        assert ports.reserve() == last
        with pytest.raises(RuntimeError, match=f"no free port among 2 tried in {first}-{last}"):
            ports.reserve()
    assert ports.reserve() == first


def test_a_port_reserved_by_another_process_is_not_handed_out_until_released_or_its_holder_dies(
    tmp_path: Path,
) -> None:
    lock = tmp_path / "lock"
    first, last = two_free_ports()
    ours = HostPorts(lock, (first, last))
    mine = {ours.reserve(), ours.reserve()}
    assert mine == {first, last}
    assert reserved_by_other(lock, first, last) == "none"
    ours.release(first)
    assert reserved_by_other(lock, first, last) == str(first)

    # A holder killed (a cluster SIGKILLed) leaves no reservation behind: the kernel drops its locks.
    holder = other_process(lock, first, first, hold=True)
    assert holder.stdout is not None and holder.stdout.readline().strip() == str(first)
    assert HostPorts(lock, (first, first)).claim(first) is False
    holder.kill()
    holder.wait(timeout=30)
    assert reserved_by_other(lock, first, first) == str(first)


def test_a_jobs_ports_are_released_when_it_is_forgotten_and_re_claimed_when_adopted(tmp_path: Path) -> None:
    lock = tmp_path / "lock"
    first, last = two_free_ports()
    ports = HostPorts(lock, (first, last))
    jobs = PortMap(ports)
    assert {jobs.port("uid-1", "worker", 0), jobs.port("uid-1", "worker", 1)} == {first, last}
    assert jobs.port("uid-1", "worker", 0) in {first, last}  # stable for the life of the job
    jobs.forget("uid-1")
    assert ports.held() == set()
    assert reserved_by_other(lock, first, first) == str(first)

    # After a restart the controller re-learns a port from its objects' annotation and holds it again.
    jobs.adopt("uid-2", "ps", 0, last)
    assert ports.held() == {last}
    assert reserved_by_other(lock, last, last) == "none"
