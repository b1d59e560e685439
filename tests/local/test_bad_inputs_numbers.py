"""The bad-input suite over every numeric option of every command-line tool, found by walking the parsers.

The tools are the console scripts of pyproject.toml; each one's module has a ``build_parser()``. Walking
their argparse actions (sub-commands included) finds every option that takes a number: its ``type`` is a
``constants.NumberOption``, or ``int``/``float``, or its default is a number. Each must be a
NumberOption naming itself, so a new numeric option is tried here without anyone adding it, and one
added with ``type=float`` fails ``test_every_numeric_option_is_a_checked_number``.

Each option is then given what a careless script or user gives: ``nan``, ``inf``, ``-inf``, a negative
number, ``1e400`` and ``10**30`` written out, as ``--opt VALUE`` and ``--opt=VALUE``. A refusal is
argparse's usage error: exit status 2, no traceback, the option named and (when argparse hands the value
to the type; ``--opt -inf`` is read as a missing value) the accepted range. The calls are the tools'
``main`` in-process with stderr captured; a sentinel unknown option at the end makes a value that is
wrongly accepted end in argparse's own refusal of the sentinel, never in a server starting. A few cases
run the installed way, as subprocesses, for the exit status and the absence of a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import tomllib
from badinput_support import Case, FigureLine, judge

from airflow_tfjob.constants import NumberOption

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS: dict[str, str] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
SENTINEL = "--bad-input-suite-sentinel"
BAD_VALUES = ("nan", "inf", "-inf", "-1", "1e400", str(10**30), "NaN", "-0.5e400")


class CliRefusal(Exception):
    """A usage error as it should be: exit status 2, no traceback, not the sentinel's."""


class CliOutcome(Exception):
    """Anything else: a traceback, another status, or a refusal of something other than the value."""


def parser_of(script: str) -> argparse.ArgumentParser:
    module = importlib.import_module(SCRIPTS[script].partition(":")[0])
    return module.build_parser()  # type: ignore[no-any-return]


def main_of(script: str) -> Callable[[list[str]], Any]:
    module_name, _, function = SCRIPTS[script].partition(":")
    return getattr(importlib.import_module(module_name), function)  # type: ignore[no-any-return]


def walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], argparse.Action]]:
    """Every action of ``parser`` and its sub-commands, with the sub-command path that reaches it."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for command, sub in action.choices.items():
                yield from walk(sub, (*path, command))
        else:
            yield path, action


def takes_a_number(action: argparse.Action) -> bool:
    """Whether the option reads a number: its type says so, or its default is one."""
    if action.nargs == 0:  # flags: store_true, help, version
        return False
    if isinstance(action.type, NumberOption) or action.type in (int, float):
        return True
    default = action.default
    return isinstance(default, (int, float)) and not isinstance(default, bool)


def numeric_options() -> list[tuple[str, tuple[str, ...], argparse.Action]]:
    return [(script, path, action) for script in sorted(SCRIPTS)
            for path, action in walk(parser_of(script)) if takes_a_number(action)]  # fmt: skip


def unchecked(options: list[tuple[str, tuple[str, ...], argparse.Action]]) -> list[str]:
    return [
        f"{script} {' '.join(path)} {'/'.join(action.option_strings) or action.dest}: type={action.type!r}"
        for script, path, action in options
        if not (isinstance(action.type, NumberOption) and action.type.option in action.option_strings)
    ]


def run_in_process(script: str, argv: list[str]) -> None:
    """Call the tool's main; raise CliRefusal or CliOutcome (returning means the value was accepted)."""
    err = io.StringIO()
    status: object = None
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            status = main_of(script)(argv)
    except SystemExit as exit_:
        status = exit_.code
    except Exception as error:  # the class of failure this suite exists for
        raise CliOutcome(f"Traceback: {type(error).__name__}: {error}") from None
    text = err.getvalue()
    if SENTINEL in text:
        return  # argparse took the value and went on to the sentinel: accepted
    if status != 2 or "Traceback" in text:
        raise CliOutcome(f"exit {status}: {text[-400:]}")
    raise CliRefusal(text)


def cases() -> list[Case]:
    out = []
    for script, path, action in numeric_options():
        option = action.option_strings[0]
        number = action.type
        accepted = number.accepted() if isinstance(number, NumberOption) else "(unchecked)"
        for value in BAD_VALUES:
            for joined in (False, True):
                given = [f"{option}={value}"] if joined else [option, value]
                # argparse reads a value that starts with '-' and is not a plain negative number as an option:
                # then the option is named for its missing value, the range is not said.
                missing = not joined and value.startswith("-") and not value.lstrip("-").replace(".", "").isdigit()
                out.append(Case(
                    f"{script}{''.join(' ' + p for p in path)} {' '.join(given)}",
                    lambda s=script, argv=[*path, *given, SENTINEL]: run_in_process(s, argv),
                    option,
                    "expected one argument" if missing else accepted,
                ))  # fmt: skip
    return out


@pytest.fixture(scope="module")
def line() -> FigureLine:
    figure = FigureLine("command-line-numbers")
    for case in cases():
        figure.add(judge(case, refusals=(CliRefusal,)))
    figure.write()
    print(figure.line())
    return figure


def test_the_walk_finds_every_tool_and_its_numeric_options() -> None:
    assert set(SCRIPTS) == {"tfjob-local", "tfjob-preflight", "tfjob-runtimes"}
    found = {(script, *path, action.option_strings[0]) for script, path, action in numeric_options()}
    assert {
        ("tfjob-local", "serve", "--port"),
        ("tfjob-local", "serve", "--token-ttl"),
        ("tfjob-local", "serve", "--kueue-pods-ready-timeout"),
        ("tfjob-local", "credential", "--ttl"),
        ("tfjob-preflight", "--timeout"),
    } <= found


def test_every_numeric_option_is_a_checked_number() -> None:
    assert unchecked(numeric_options()) == []


def test_an_unchecked_numeric_option_is_caught_by_the_walk() -> None:
    """The detector itself: `type=float`, `type=int` and an untyped option with a numeric default all
    count as numeric and unchecked; a flag and a string option do not count."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", type=float)
    parser.add_argument("--count", type=int)
    parser.add_argument("--retries", default=3)
    parser.add_argument("--ok", type=NumberOption("--ok", minimum=0, maximum=1, example="0.5"))
    parser.add_argument("--wrong-name", type=NumberOption("--other", minimum=0, maximum=1, example="0.5"))
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--name", default="x")
    options = [("probe", (), a) for _, a in walk(parser) if takes_a_number(a)]
    assert sorted(a.option_strings[0] for _, _, a in options) == ["--count", "--ok", "--rate", "--retries", "--wrong-name"]
    assert sorted(u.split(":")[0].split()[-1] for u in unchecked(options)) == [
        "--count", "--rate", "--retries", "--wrong-name"]  # fmt: skip


def test_figure_line(line: FigureLine) -> None:
    assert line.counts()["tried"] >= 5 * len(BAD_VALUES) * 2
    assert line.failures() == [], "\n".join(str(f) for f in line.failures())


@pytest.mark.parametrize(("script", "argv", "option"), [
    ("tfjob-local", ["credential", "--secret-file", "/nonexistent", "--user", "u", "--ttl", "nan"], "--ttl"),
    ("tfjob-local", ["credential", "--secret-file", "/nonexistent", "--user", "u", "--ttl", "inf"], "--ttl"),
    ("tfjob-local", ["serve", "--token-ttl", "1e400"], "--token-ttl"),
    ("tfjob-preflight", ["--kind", "TFJob", f"--timeout={10**30}"], "--timeout"),
])  # fmt: skip
def test_installed_way(script: str, argv: list[str], option: str) -> None:
    """As kubectl or a shell runs the tool: exit status 2, one usage error naming the option, no traceback."""
    module = SCRIPTS[script].partition(":")[0]
    done = subprocess.run([sys.executable, "-m", module, *argv], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and option in done.stderr and "at most 31536000" in done.stderr


def test_in_range_values_are_taken() -> None:
    """The bounds are inclusive where the range says "to" and "at most"."""
    for _, _, action in numeric_options():
        number = action.type
        assert isinstance(number, NumberOption)
        assert number(str(int(number.maximum))) == number.maximum
        if not number.above_minimum:
            assert number(str(int(number.minimum))) == number.minimum
