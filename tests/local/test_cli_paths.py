"""`tfjob-local serve`'s --workdir and --kubeconfig: every placement of the one relative to the other,
checked before anything starts.

Serve creates the workdir (and its missing folders) and writes the kubeconfig with its folders, so a
kubeconfig inside a workdir that does not exist yet is accepted (it was refused: issue 39). Elsewhere the
kubeconfig's folder must exist, so that a mistyped path is said at once. The matrix below is every
workdir state against every kubeconfig placement, in-process (``check_paths``); one real serve starts with
the issue's own command line.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
from process_support import start_serve, stop_serve

from airflow_tfjob.local.cli import build_parser, check_paths

#: Workdir states: name -> (path under the test's folder, whether serve can use it).
WORKDIRS: dict[str, tuple[str | None, bool]] = {
    "none": (None, True),
    "existing": ("w", True),
    "missing": ("w", True),
    "missing-nested": ("a/b/w", True),
    "a-file": ("w", False),
    "under-a-file": ("f/w", False),
}
#: Kubeconfig placements: name -> (path, "W/..." inside the workdir, else under the test's folder; whether
#: serve can write it there).
KUBECONFIGS: dict[str, tuple[str | None, bool]] = {
    "none": (None, True),
    "in-workdir": ("W/kubeconfig", True),
    "nested-in-workdir": ("W/sub/kubeconfig", True),
    "workdir-dotdot": ("W/../w/kubeconfig", True),
    "in-existing-folder": ("elsewhere/kubeconfig", True),
    "in-missing-folder": ("nowhere/kubeconfig", False),
    "is-a-directory": ("elsewhere", False),
}
CASES = [(w, k) for w in WORKDIRS for k in KUBECONFIGS
         if not (w == "none" and str(KUBECONFIGS[k][0]).startswith("W/"))]  # fmt: skip


def expected(workdir_state: str, kubeconfig_place: str) -> str:
    """"" (serve starts) or the option its refusal names: the workdir is checked first."""
    if not WORKDIRS[workdir_state][1]:
        return "--workdir"
    return "" if KUBECONFIGS[kubeconfig_place][1] else "--kubeconfig"


def argv_for(d: Path, workdir_state: str, kubeconfig_place: str) -> list[str]:
    (d / "elsewhere").mkdir()
    (d / "f").write_text("a file")
    relative = WORKDIRS[workdir_state][0]
    argv = ["serve"]
    workdir = d / relative if relative else None
    if workdir is not None:
        if workdir_state == "existing":
            workdir.mkdir()
        elif workdir_state == "a-file":
            workdir.write_text("a file")
        argv += ["--workdir", str(workdir)]
    place = KUBECONFIGS[kubeconfig_place][0]
    if place is not None:
        kubeconfig = workdir / place[2:] if place.startswith("W/") and workdir is not None else d / place
        argv += ["--kubeconfig", str(kubeconfig)]
    return argv


@pytest.mark.parametrize(("workdir_state", "kubeconfig_place"), CASES)
def test_placement(tmp_path: Path, workdir_state: str, kubeconfig_place: str) -> None:
    args = build_parser().parse_args(argv_for(tmp_path, workdir_state, kubeconfig_place))
    refused_by = expected(workdir_state, kubeconfig_place)
    if not refused_by:
        check_paths(args)
        return
    with pytest.raises(ValueError) as refused:
        check_paths(args)
    said = str(refused.value)
    assert said.startswith(refused_by) and "give" in said, said
    assert workdir_state == "existing" or not (tmp_path / "w").is_dir()  # a refusal creates nothing


def test_the_matrix_holds_both_outcomes_for_each_option() -> None:
    assert {expected(w, k) for w, k in CASES} == {"", "--workdir", "--kubeconfig"}
    assert len(CASES) == 6 * 7 - 3


def test_a_kubeconfig_in_a_missing_folder_elsewhere_is_refused_naming_the_fix(tmp_path: Path) -> None:
    args = build_parser().parse_args(["serve", "--workdir", str(tmp_path / "w"), "--kubeconfig",
                                      str(tmp_path / "nowhere" / "kc")])  # fmt: skip
    with pytest.raises(ValueError, match="existing directory or inside --workdir"):
        check_paths(args)


def test_serve_creates_the_workdir_and_writes_the_kubeconfig_inside_it(tmp_path: Path) -> None:
    """The issue's command line, run for real: `serve --workdir W --kubeconfig W/kubeconfig`, W missing."""
    workdir = tmp_path / "new" / "w"
    proc, _url, kubeconfig = start_serve("--workdir", str(workdir), "--kubeconfig", str(workdir / "kubeconfig"))
    try:
        assert kubeconfig == workdir / "kubeconfig" and kubeconfig.is_file() and workdir.is_dir()
    finally:
        code, _ = stop_serve(proc, signal.SIGTERM)
    assert code == 0
