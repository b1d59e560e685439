"""Where `make test`'s time went: each pytest stage's wall time and the slowest tests across stages.

    python scripts/test_times.py stage DIR NAME -- COMMAND...   run one stage (COMMAND is a pytest command
                                                                line), writing DIR/NAME.xml (its JUnit XML)
                                                                and DIR/NAME.json (wall time, exit status);
                                                                exits with COMMAND's status
    python scripts/test_times.py report DIR [--slowest N]       print every stage's wall time, CPU time and
                                                                status, the N (default 15) slowest tests of
                                                                all of them and the N modules that used the
                                                                most CPU; exits 0 whatever they say
    python scripts/test_times.py weights DIR                    write tests/module_times.json, each module's
                                                                time in DIR's main stage: the order in which
                                                                the main stage hands modules to its workers

`make test` runs its three stages through `stage` and prints `report` at its end, when a stage failed too
(then it still exits with that stage's status). A test's time is its setup, call and teardown together, as
the JUnit XML counts it: a module- or session-scoped fixture's setup is in the first test that used it.
A test's CPU time is the property `tests/cpu_times.py` records (the worker's and its reaped children's):
on two busy cores the wall time of a test says much about its neighbours, its CPU time does not.
"""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

SLOWEST = 15
ROOT = Path(__file__).resolve().parents[1]
#: Each module's time in a recent main stage (tests/conftest.py hands the longest to the workers first).
MODULE_TIMES = ROOT / "tests" / "module_times.json"


@dataclass(frozen=True)
class Stage:
    name: str
    seconds: float | None  # None: the stage did not say (its record is missing)
    status: int | None
    tests: int
    started: float | None = None  # epoch seconds


@dataclass(frozen=True)
class Timed:
    stage: str
    test: str
    seconds: float
    outcome: str
    cpu: float | None  # None: the stage did not record it (a run without tests/cpu_times.py)
    worker: str | None = None  # the xdist worker that ran it


def run_stage(directory: Path, name: str, command: list[str]) -> int:
    """Run ``command`` with ``--junitxml`` into ``directory``; record its wall time and status."""
    directory.mkdir(parents=True, exist_ok=True)
    xml = directory / f"{name}.xml"
    xml.unlink(missing_ok=True)
    record = directory / f"{name}.json"
    record.unlink(missing_ok=True)
    argv = [*command, f"--junitxml={xml}"]
    print(f"==> test stage {name}: {shlex.join(argv)}", flush=True)
    started, start = time.time(), time.monotonic()
    proc = subprocess.Popen(argv)
    try:
        status = proc.wait()
    except KeyboardInterrupt:
        # pytest got the same SIGINT (one process group): let it write its report and stop.
        status = proc.wait()
    seconds = time.monotonic() - start
    if status < 0:  # killed by a signal: say so as a shell would
        status = 128 - status
    record.write_text(
        json.dumps({"stage": name, "started": started, "seconds": round(seconds, 1), "status": status})
    )
    return status


def _outcome(case: ET.Element) -> str:
    for child in case:
        if child.tag in ("failure", "error"):
            return "failed" if child.tag == "failure" else "error"
        if child.tag == "skipped":
            return "skipped"
    return "passed"


def _property(case: ET.Element, name: str) -> str | None:
    for prop in case.iter("property"):
        if prop.get("name") == name:
            return prop.get("value") or ""
    return None


def _cpu(case: ET.Element) -> float | None:
    value = _property(case, "cpu")
    return None if value is None else float(value or 0.0)


def _module(test: str) -> str:
    """The module of a JUnit classname (``tests.unit.test_x`` or ``tests.unit.test_x.TestClass``)."""
    parts = test.split("::", 1)[0].split(".")
    for index, part in enumerate(parts):
        if part.startswith("test_"):
            return ".".join(parts[: index + 1])
    return ".".join(parts)


def read(directory: Path) -> tuple[list[Stage], list[Timed]]:
    """The stages recorded in ``directory`` (in the order they ran) and every test they timed."""
    stages: list[tuple[float, Stage]] = []
    timed: list[Timed] = []
    names = {p.stem for p in directory.glob("*.json")} | {p.stem for p in directory.glob("*.xml")}
    for name in names:
        record = directory / f"{name}.json"
        xml = directory / f"{name}.xml"
        seconds = status = started = None
        order = xml.stat().st_mtime if xml.is_file() else 0.0
        if record.is_file():
            data = json.loads(record.read_text())
            seconds, status = float(data["seconds"]), int(data["status"])
            started = float(data["started"]) if "started" in data else None
            order = started if started is not None else order
        cases: list[ET.Element] = []
        if xml.is_file():
            try:
                cases = list(ET.parse(xml).getroot().iter("testcase"))
            except ET.ParseError:
                cases = []
        for case in cases:
            test = f"{case.get('classname', '')}::{case.get('name', '')}".lstrip(":")
            seconds_taken, worker = float(case.get("time") or 0.0), _property(case, "worker")
            timed.append(Timed(name, test, seconds_taken, _outcome(case), _cpu(case), worker))
        stages.append((order, Stage(name, seconds, status, len(cases), started)))
    return [s for _, s in sorted(stages, key=lambda pair: pair[0])], timed


def _worker_busy(stage: Stage, timed: list[Timed]) -> dict[str, float]:
    """How long each xdist worker of ``stage`` ran tests (their setup, call and teardown added up)."""
    busy: dict[str, float] = {}
    for t in timed:
        if t.stage == stage.name and t.worker is not None:
            busy[t.worker] = busy.get(t.worker, 0.0) + t.seconds
    return busy


def _clock(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes}:{rest:02d}"


def report(directory: Path, slowest: int = SLOWEST) -> str:
    stages, timed = read(directory)
    if not stages:
        return f"test times: no stage recorded in {directory}"
    lines = ["", f"== test times ({directory})", "stage wall time (and its tests' CPU time):"]
    for stage in stages:
        wall = (
            f"{stage.seconds:8.1f} s ({_clock(stage.seconds)})"
            if stage.seconds is not None
            else "    (no record)"
        )
        if stage.status is None:
            said = "did not finish"
        elif stage.status == 0:
            said = "passed"
        else:
            said = f"FAILED (exit {stage.status})"
        cpus = [t.cpu for t in timed if t.stage == stage.name and t.cpu is not None]
        cpu = f"  cpu {sum(cpus):7.1f} s" if cpus else ""
        lines.append(f"  {stage.name:<8} {wall}{cpu}  {stage.tests:5d} tests  {said}")
        busy = _worker_busy(stage, timed)
        if len(busy) > 1:
            of = f" of its {stage.seconds:.0f} s" if stage.seconds is not None else ""
            each = ", ".join(f"{seconds:.0f}" for seconds in sorted(busy.values()))
            lines.append(f"             its {len(busy)} workers ran tests for {each} s{of}")
    total = sum(s.seconds for s in stages if s.seconds is not None)
    spans = [
        (s.started, s.started + s.seconds) for s in stages if s.started is not None and s.seconds is not None
    ]
    if spans:  # the stages run side by side: from the first start to the last end is what the run took
        span = max(end for _, end in spans) - min(start for start, _ in spans)
        lines.append(f"  {'all':<8} {span:8.1f} s ({_clock(span)}) from the first start to the last end")
    lines.append(f"  {'sum':<8} {total:8.1f} s ({_clock(total)})")
    lines.append(
        f"{min(slowest, len(timed))} slowest tests (setup + call + teardown; a shared fixture's setup "
        "counts in the first test using it):"
    )
    for t in sorted(timed, key=lambda t: t.seconds, reverse=True)[:slowest]:
        mark = "" if t.outcome == "passed" else f"  [{t.outcome}]"
        lines.append(f"  {t.seconds:8.1f} s  {t.stage:<6} {t.test}{mark}")
    by_module: dict[tuple[str, str], float] = {}
    for t in timed:
        if t.cpu is not None:
            key = (t.stage, _module(t.test))
            by_module[key] = by_module.get(key, 0.0) + t.cpu
    if by_module:
        lines.append(f"{min(slowest, len(by_module))} modules using the most CPU (their tests' CPU time):")
        for (name, module), seconds in sorted(by_module.items(), key=lambda kv: kv[1], reverse=True)[
            :slowest
        ]:
            lines.append(f"  {seconds:8.1f} s  {name:<6} {module}")
    failed = [s.name for s in stages if s.status not in (0, None)]
    if failed:
        lines.append(f"failed stage(s): {', '.join(failed)}")
    return "\n".join(lines)


def module_times(directory: Path, stage: str = "main") -> dict[str, float]:
    """Each module's time in ``stage`` (its tests' setup, call and teardown), by its path from the root."""
    _, timed = read(directory)
    times: dict[str, float] = {}
    for t in timed:
        if t.stage == stage:
            path = _module(t.test).replace(".", "/") + ".py"
            times[path] = times.get(path, 0.0) + t.seconds
    return {path: round(seconds, 1) for path, seconds in sorted(times.items())}


def write_weights(directory: Path, out: Path = MODULE_TIMES) -> str:
    times = module_times(directory)
    if not times:
        raise SystemExit(f"test_times.py: no main stage recorded in {directory}: nothing written")
    out.write_text(json.dumps(times, indent=0, sort_keys=True) + "\n")
    return f"{out}: {len(times)} modules, {sum(times.values()):.0f} s in all"


def main(argv: list[str]) -> int:
    if len(argv) >= 5 and argv[0] == "stage" and argv[3] == "--":
        return run_stage(Path(argv[1]), argv[2], argv[4:])
    if len(argv) in (2, 4) and argv[0] == "report":
        slowest = SLOWEST
        if len(argv) == 4:
            if argv[2] != "--slowest":
                raise SystemExit(__doc__)
            slowest = int(argv[3])
        print(report(Path(argv[1]), slowest), flush=True)
        return 0
    if len(argv) == 2 and argv[0] == "weights":
        print(write_weights(Path(argv[1])))
        return 0
    raise SystemExit(__doc__)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sys.exit(main(sys.argv[1:]))
