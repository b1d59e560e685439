"""Runs triggers the way a triggerer does, in a fresh process, and reports what held its event loop.

Usage: ``python loop_probe.py THRESHOLD SPECS_JSON`` where SPECS_JSON is a list of
``[classpath, kwargs]``; prints one JSON object: the events of each trigger, Airflow's own
block-watchdog warnings, and the stalls this probe attributes.

What it reproduces of ``airflow triggerer`` (Airflow 3.3's ``TriggerRunner``): everything the
triggerer imports before its loop runs (``airflow.jobs.triggerer_job_runner``), the trigger class
imported by classpath on the loop (``create_triggers`` calls ``import_string`` there), then the
trigger's ``run()``; and Airflow's detector itself, ``TriggerRunner.block_watchdog``, run unchanged on
the same loop (with a stand-in for the runner's three attributes it reads).

Why a second detector beside Airflow's: the watchdog measures wall time, so on a busy machine (two
cores shared by many processes) it also fires when the OS simply did not schedule the process. This
probe samples the loop thread every 10 ms from a thread of its own: while the loop is late it records
where the loop thread is and how much CPU it used since the loop last turned. A stall is the
provider's when the loop thread was running the provider's code (or an import) and used at least half
the threshold in CPU time (the watchdog's sleep is 0.1 s of its 0.2 s threshold), or was seen in a blocking call (DNS, a file read) made from the provider.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
import traceback
import types
from typing import Any

import airflow.jobs.triggerer_job_runner as triggerer  # what a triggerer has loaded before its loop
from airflow._shared.module_loading import import_string

TICK = 0.01  # how often the loop marks that it turned, and the sampler looks
LATE = 0.05  # the loop is late when it has not turned for this long
PROVIDER_MARKS = ("airflow_tfjob/", "<frozen importlib._bootstrap")
#: Python-level frames of calls that wait on the OS or parse files: on the loop they are the provider's
#: fault whatever CPU they use (a blocking C call itself is not seen by a stack sample, its caller is).
BLOCKING_CALLS = (
    " getaddrinfo",
    " gethostbyname",
    " safe_load",
    " load_kube_config",
    " read_text",
    " read_bytes",
)


class _Sampler:
    def __init__(self, loop_thread: int) -> None:
        self.loop_thread = loop_thread
        self.clock = time.pthread_getcpuclockid(loop_thread)
        self.turned = time.monotonic()
        self.cpu_at_turn = time.clock_gettime(self.clock)
        self.stalls: list[dict[str, Any]] = []
        self._current: dict[str, Any] | None = None
        self.stop = False

    def turn(self) -> None:
        """Called on the loop every TICK: the loop is free."""
        self.turned = time.monotonic()
        self.cpu_at_turn = time.clock_gettime(self.clock)
        if self._current is not None:
            self.stalls.append(self._current)
            self._current = None
        if not self.stop:
            asyncio.get_running_loop().call_later(TICK, self.turn)

    def run(self) -> None:
        while not self.stop:
            time.sleep(TICK)
            late = time.monotonic() - self.turned
            if late < LATE:
                continue
            frame = sys._current_frames().get(self.loop_thread)
            stack = (
                [f"{f.filename}:{f.lineno} {f.name}" for f in traceback.extract_stack(frame)] if frame else []
            )
            cpu = time.clock_gettime(self.clock) - self.cpu_at_turn
            current = self._current
            if current is None or current["turned"] != self.turned:
                current = self._current = {
                    "turned": self.turned,
                    "late": 0.0,
                    "cpu": 0.0,
                    "provider_samples": [],
                    "samples": 0,
                }
            current["late"], current["cpu"] = late, cpu
            current["samples"] += 1
            whole = " < ".join(reversed(stack))
            if any(mark in whole for mark in PROVIDER_MARKS):
                # The innermost frames and the innermost provider frame: what it was doing, and for whom.
                ours = next((f for f in reversed(stack) if any(m in f for m in PROVIDER_MARKS)), "")
                current["provider_samples"].append(" < ".join(reversed(stack[-8:])) + " ... " + ours)


class _WatchdogLog:
    """Where TriggerRunner.block_watchdog writes its warning (its ``self.log.ainfo``)."""

    def __init__(self) -> None:
        self.warnings: list[str] = []

    async def ainfo(self, message: str, *args: Any) -> None:
        self.warnings.append(message % args)


async def main(threshold: float, specs: list[list[Any]]) -> dict[str, Any]:
    loop = asyncio.get_running_loop()
    sampler = _Sampler(threading.get_ident())
    sampler.turn()
    threading.Thread(target=sampler.run, daemon=True).start()
    log = _WatchdogLog()
    runner = types.SimpleNamespace(stop=False, log=log, blocked_main_thread_warning_threshold=threshold)
    watchdog = loop.create_task(triggerer.TriggerRunner.block_watchdog(runner))

    async def one(classpath: str, kwargs: dict[str, Any]) -> list[Any]:
        trigger_class = import_string(classpath)  # as TriggerRunner.create_triggers does, on the loop
        await asyncio.sleep(0)
        return [event.payload async for event in trigger_class(**kwargs).run()]

    started = time.monotonic()
    events = await asyncio.gather(*(one(classpath, kwargs) for classpath, kwargs in specs))
    runner.stop = True
    await watchdog
    sampler.stop = True
    provider = [
        {"late": round(s["late"], 3), "cpu": round(s["cpu"], 3), "where": s["provider_samples"][-1]}
        for s in sampler.stalls
        if s["provider_samples"]
        and (
            s["cpu"] >= threshold / 2
            or any(call in w for w in s["provider_samples"] for call in BLOCKING_CALLS)
        )
    ]
    return {
        "events": events,
        "seconds": time.monotonic() - started,
        "watchdog": log.warnings,
        "stalls": len(sampler.stalls),
        "longest_stall": max((s["late"] for s in sampler.stalls), default=0.0),
        "provider_stalls": provider,
    }


if __name__ == "__main__":
    result = asyncio.run(main(float(sys.argv[1]), json.loads(sys.argv[2])))
    print(json.dumps(result, default=str))
