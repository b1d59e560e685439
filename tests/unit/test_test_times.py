"""`make test`'s closing summary (scripts/test_times.py): each stage's wall and CPU time, the slowest tests
and the modules that used the most CPU.

The Makefile's own `test` recipe runs here against a stand-in for pytest that writes a JUnit XML of
known test times and exits as told (lint, docs, browser and services taken as done, `make -o`): a run
whose stages pass prints each stage and the slowest tests and exits 0; a run whose `alone` stage fails
(the compatibility lane runs beside it) or whose main stage fails (nothing runs after it) prints the
summary all the same and exits with the failing stage's status.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]

# The stand-in: `-m EXPR` names the stage (the Makefile's marker expressions); FAKE_PYTEST_FAIL names the
# one that fails; each stage writes 12 tests of its own, "<stage>_<i>" taking i seconds (the main stage's
# a hundred times as long), so the slowest 15 of all are known.
FAKE_PYTEST = """#!{python}
import os, sys
argv = sys.argv[1:]
xml = next(a.split("=", 1)[1] for a in argv if a.startswith("--junitxml="))
marker = argv[argv.index("-m") + 1] if "-m" in argv else ""
stage = {{"not alone": "main", "alone": "alone"}}[marker]
scale = 100 if stage == "main" else 1
cases = "".join(
    f'<testcase classname="tests.fake.test_{{stage}}" name="{{stage}}_{{i}}" time="{{i * scale}}">'
    f'<properties><property name="cpu" value="{{i * scale}}"/></properties></testcase>'
    for i in range(1, 13)
)
failing = os.environ.get("FAKE_PYTEST_FAIL") == stage
if failing:
    cases += f'<testcase classname="tests.fake.test_{{stage}}" name="broken" time="0.5"><failure message="no"/></testcase>'
with open(xml, "w") as out:
    out.write(f'<?xml version="1.0"?><testsuites><testsuite name="pytest">{{cases}}</testsuite></testsuites>')
with open(os.environ["FAKE_PYTEST_RAN"], "a") as ran:
    ran.write(stage + "\\n")
sys.exit(3 if failing else 0)
"""


# The compatibility lane's stand-in: `--build-only` does nothing; a release's stage writes one quick test.
FAKE_COMPAT = """#!{python}
import os, sys
argv = sys.argv[1:]
if "--build-only" in argv:
    sys.exit(0)
release = next(a for a in argv if a[:1].isdigit())
xml = next(a.split("=", 1)[1] for a in argv if a.startswith("--junitxml="))
with open(xml, "w") as out:
    out.write('<?xml version="1.0"?><testsuites><testsuite name="pytest">'
              f'<testcase classname="tests.fake.test_compat" name="r{{release}}" time="0.1"/></testsuite></testsuites>')
with open(os.environ["FAKE_PYTEST_RAN"], "a") as ran:
    ran.write("compat-" + release + "\\n")
"""


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("test_times", ROOT / "scripts" / "test_times.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("test_times", module)  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _make_test(tmp_path: Path, fail: str | None) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """The Makefile's `test` recipe with the stand-in as $(BIN)/pytest; what it printed and ran."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "pytest"
    fake.write_text(FAKE_PYTEST.format(python=sys.executable))
    fake.chmod(0o755)
    (bin_dir / "python").symlink_to(sys.executable)
    compat = bin_dir / "compat"
    compat.write_text(FAKE_COMPAT.format(python=sys.executable))
    compat.chmod(0o755)
    ran = tmp_path / "ran"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MAKE")}
    env |= {"FAKE_PYTEST_RAN": str(ran), "FAKE_PYTEST_FAIL": fail or ""}
    done_ = ("lint", "docs", "browser", "services")  # taken as made: `make -o TARGET`
    argv = ["make", "--no-print-directory", "-C", str(ROOT), *(f"--old-file={t}" for t in done_),
            f"BIN={bin_dir}", f"TIMES={tmp_path / 'times'}", f"COMPAT={compat}", "COMPAT_RELEASES=3.0.6",
            "test"]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    return done, ran.read_text().split() if ran.exists() else []


def _summary(out: str) -> list[str]:
    assert "== test times" in out, out
    return out.split("== test times", 1)[1].splitlines()


def test_a_passing_run_ends_with_each_stage_and_the_15_slowest_tests(tmp_path: Path) -> None:
    done, ran = _make_test(tmp_path, fail=None)
    assert done.returncode == 0, done.stdout + done.stderr
    # The alone stage and the compatibility lane run side by side, after the main stage.
    assert ran[0] == "main" and sorted(ran[1:]) == ["alone", "compat-3.0.6"], ran
    lines = _summary(done.stdout)
    stages = [line.split()[0] for line in lines if line.startswith("  ") and " tests " in line]
    assert stages[0] == "main" and sorted(stages[1:]) == ["alone", "compat-3.0.6"], stages
    assert all("passed" in line for line in lines if line.split()[:1] and line.split()[0] in stages)
    heads = [i for i, line in enumerate(lines) if "slowest tests" in line or "using the most CPU" in line]
    slowest = [line.split()[-1] for line in lines[heads[0] + 1 : heads[1]]]
    # main_12 (1,200 s) down to main_1 (100 s), then alone's 12, 11 and 10 s tests.
    assert slowest[:12] == [f"tests.fake.test_main::main_{i}" for i in range(12, 0, -1)]
    assert slowest[12:] == [f"tests.fake.test_alone::alone_{i}" for i in (12, 11, 10)], slowest
    assert "FAILED" not in done.stdout + done.stderr
    # Each test's recorded CPU time (tests/cpu_times.py), summed by stage and by module: (1 + ... + 12) s,
    # a hundred times that in the main stage.
    main_line = next(line for line in lines if line.startswith("  main "))
    assert "cpu  7800.0 s" in main_line, main_line
    by_module = lines[lines.index(next(line for line in lines if "using the most CPU" in line)) + 1 :]
    assert by_module[0].split() == ["7800.0", "s", "main", "tests.fake.test_main"], by_module
    assert by_module[1].split() == ["78.0", "s", "alone", "tests.fake.test_alone"], by_module
    # Each stage's command is shown as it starts.
    assert "==> test stage alone: " in done.stdout and "-m alone --junitxml=" in done.stdout


def test_a_failing_stage_still_prints_the_summary_and_fails_the_run(tmp_path: Path) -> None:
    done, ran = _make_test(tmp_path, fail="alone")
    assert done.returncode != 0
    # The lane ran beside the failing stage; the summary comes all the same.
    assert ran[0] == "main" and sorted(ran[1:]) == ["alone", "compat-3.0.6"], ran
    lines = _summary(done.stdout)
    by_stage = {line.split()[0]: line for line in lines if line.startswith("  ") and " tests " in line}
    assert sorted(by_stage) == ["alone", "compat-3.0.6", "main"]
    assert "passed" in by_stage["main"] and "FAILED (exit 3)" in by_stage["alone"]
    assert "passed" in by_stage["compat-3.0.6"]
    assert "13 tests" in by_stage["alone"]
    assert "failed stage(s): alone" in done.stdout
    assert "make test: FAILED: a test stage exited with status 3" in done.stderr


def test_a_failing_main_stage_runs_nothing_after_it(tmp_path: Path) -> None:
    done, ran = _make_test(tmp_path, fail="main")
    assert done.returncode != 0 and ran == ["main"], ran
    assert "failed stage(s): main" in done.stdout
    assert "make test: FAILED: a test stage exited with status 3" in done.stderr


def test_the_report_reads_a_stage_that_left_no_record(tmp_path: Path) -> None:
    """A stage killed before its wrapper wrote its record (or a JUnit XML that was cut short) is shown,
    not a crash that would hide the other stages' times."""
    times = _script()
    (tmp_path / "main.json").write_text('{"stage": "main", "seconds": 61.5, "status": 0}')
    (tmp_path / "main.xml").write_text(
        '<testsuites><testsuite><testcase classname="a" name="t" time="2.5"/></testsuite></testsuites>'
    )
    (tmp_path / "apart.xml").write_text("<testsuites><testsuite><testcase classname=")
    out = times.report(tmp_path)
    words = [line.split() for line in out.splitlines()]
    assert ["main", "61.5", "s", "(1:02)", "1", "tests", "passed"] in words
    assert ["apart", "(no", "record)", "0", "tests", "did", "not", "finish"] in words
    assert ["2.5", "s", "main", "a::t"] in words
    assert times.report(tmp_path / "none").startswith("test times: no stage recorded")


@pytest.mark.parametrize("status", [0, 5])
def test_a_stage_records_its_status_and_wall_time(tmp_path: Path, status: int) -> None:
    times = _script()
    code = f"import sys; open(sys.argv[-1].split('=', 1)[1], 'w').write('<testsuites/>'); sys.exit({status})"
    assert times.run_stage(tmp_path, "one", [sys.executable, "-c", code]) == status
    stage, *_ = times.read(tmp_path)[0]
    assert (stage.name, stage.status, stage.tests) == ("one", status, 0)
    assert stage.seconds is not None and 0 <= stage.seconds < 60


def test_weights_are_each_modules_time_in_the_main_stage(tmp_path: Path) -> None:
    """`weights` writes what tests/conftest.py orders the main stage by: each module's tests' times
    added up (a class's tests in their module), the other stages' left out."""
    times = _script()
    cases = (
        '<testcase classname="tests.a.test_x" name="one" time="2.5"/>'
        '<testcase classname="tests.a.test_x.TestGroup" name="two" time="1.0"/>'
        '<testcase classname="tests.b.test_y" name="three" time="40"/>'
    )
    (tmp_path / "main.xml").write_text(f"<testsuites><testsuite>{cases}</testsuite></testsuites>")
    (tmp_path / "alone.xml").write_text(
        '<testsuites><testsuite><testcase classname="tests.e2e.test_z" name="t" time="99"/></testsuite></testsuites>'
    )
    out = tmp_path / "module_times.json"
    said = times.write_weights(tmp_path, out)
    assert json.loads(out.read_text()) == {"tests/a/test_x.py": 3.5, "tests/b/test_y.py": 40.0}
    assert "2 modules, 44 s" in said
    with pytest.raises(SystemExit, match="no main stage"):
        times.write_weights(tmp_path / "none", out)


def test_the_recorded_module_times_name_only_modules_that_exist() -> None:
    """A module renamed or removed since the weights were written would weigh nothing: written again."""
    recorded = json.loads((ROOT / "tests" / "module_times.json").read_text())
    stale = sorted(path for path in recorded if not (ROOT / path).is_file())
    assert not stale, f"{stale}: write them again (python scripts/test_times.py weights build/test-times)"


def test_the_main_stage_hands_out_the_longest_modules_first(pytestconfig: pytest.Config) -> None:
    """The order tests/conftest.py gives the main stage (pytest-xdist's own, by number of tests, is off):
    longest recorded first, a module not recorded weighed by its markers, each module's tests together
    and in their order."""
    from types import SimpleNamespace

    conftest = pytestconfig.pluginmanager.get_plugin(str(ROOT / "tests" / "conftest.py"))
    assert conftest is not None
    recorded = {"tests/a/test_long.py": 300.0, "tests/a/test_short.py": 2.0}

    def item(path: str, name: str, *markers: str) -> Any:
        marks = [SimpleNamespace(name=m) for m in markers]
        return SimpleNamespace(path=ROOT / path, name=name, iter_markers=lambda: iter(marks))

    items = [
        item("tests/a/test_short.py", "s1"),
        item("tests/a/test_new_units.py", "u1"),
        item("tests/a/test_new_dag.py", "d1", "dags"),
        item("tests/a/test_long.py", "l1"),
        item("tests/a/test_short.py", "s2"),
        item("tests/a/test_long.py", "l2"),
    ]
    old = conftest.MODULE_TIMES
    conftest.MODULE_TIMES = recorded
    try:
        ordered = conftest.longest_modules_first(items, ROOT)
    finally:
        conftest.MODULE_TIMES = old
    # 300 s, a new DAG module (60 s a test), 2 s, a new unit module (0.3 s a test).
    assert [i.name for i in ordered] == ["l1", "l2", "d1", "s1", "s2", "u1"]


def test_the_report_says_how_long_each_worker_ran_tests(tmp_path: Path) -> None:
    """The worker of each test (tests/cpu_times.py's property) gives each xdist worker's time running
    tests, against the stage's: how much of the stage a worker spent with nothing to run."""
    times = _script()
    (tmp_path / "main.json").write_text('{"stage": "main", "started": 1000.0, "seconds": 95.0, "status": 0}')

    def case(name: str, seconds: float, worker: str) -> str:
        props = f'<properties><property name="worker" value="{worker}"/></properties>'
        return f'<testcase classname="tests.a.test_x" name="{name}" time="{seconds}">{props}</testcase>'

    cases = case("a", 10, "gw0") + case("b", 80, "gw0") + case("c", 30, "gw1")
    (tmp_path / "main.xml").write_text(f"<testsuites><testsuite>{cases}</testsuite></testsuites>")
    out = times.report(tmp_path)
    assert "its 2 workers ran tests for 30, 90 s of its 95 s" in out, out


def test_the_report_says_how_long_the_stages_side_by_side_took(tmp_path: Path) -> None:
    """The lane's stages run beside the main and alone stages: the run took from the first stage's start
    to the last one's end, not the sum of the stages."""
    times = _script()
    stages = (("main", 1000.0, 500.0), ("compat-3.0.6", 1001.0, 650.0), ("alone", 1500.5, 120.0))
    for name, started, seconds in stages:
        (tmp_path / f"{name}.json").write_text(
            json.dumps({"stage": name, "started": started, "seconds": seconds, "status": 0})
        )
    words = [line.split() for line in times.report(tmp_path).splitlines()]
    assert ["all", "651.0", "s", "(10:51)", *"from the first start to the last end".split()] in words
    assert ["sum", "1270.0", "s", "(21:10)"] in words
