"""A command-line tool's ``main(argv)`` run in this process as a new interpreter would run it, for the
tests that read what a tool prints: a process that imports Airflow costs seconds of CPU, and the suite
runs tools by the hundred. Each module that uses it keeps a few subprocess cases for what only a real
process shows (the exit status a shell sees, no traceback at all)."""

from __future__ import annotations

import contextlib
import io
import logging
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import pytest


@contextlib.contextmanager
def as_a_new_process(
    env: Mapping[str, str] | None, out: io.StringIO, err: io.StringIO, patches: Mapping[str, Any] | None = None
) -> Iterator[None]:
    """What a new interpreter gives the tool, as far as its output goes: the environment given, stdout and
    stderr captured, no logging handler and logging not disabled (a warning logged reaches stderr through
    logging's last resort), Python's default warning filters with each warning shown written to stderr,
    and ``patches`` (dotted name: replacement) in place; everything put back after, a tool that disables
    logging (as ``tfjob-preflight`` does) included."""
    root = logging.getLogger()
    handlers, level, disabled = root.handlers[:], root.level, logging.root.manager.disable

    def show(
        message: Any, category: Any, filename: str, lineno: int, file: Any = None, line: Any = None
    ) -> None:
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))

    with pytest.MonkeyPatch.context() as patch, warnings.catch_warnings():
        for name, value in (env or {}).items():
            patch.setenv(name, value)
        for target, replacement in (patches or {}).items():
            patch.setattr(target, replacement)
        warnings.resetwarnings()
        for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
            warnings.simplefilter("ignore", category)
        warnings.showwarning = show
        root.handlers = []
        root.setLevel(logging.WARNING)
        logging.disable(logging.NOTSET)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                yield
        finally:
            root.handlers = handlers
            root.setLevel(level)
            logging.disable(disabled)


def run_main(
    main: Callable[[list[str]], int | None],
    args: Sequence[str],
    env: Mapping[str, str] | None = None,
    patches: Mapping[str, Any] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``main(args)`` as the process ``tool ARGS`` would end: its exit status (from the return or
    SystemExit; 1 with a traceback on stderr for an exception that escapes), stdout and stderr."""
    out, err = io.StringIO(), io.StringIO()
    with as_a_new_process(env, out, err, patches):
        try:
            code: object = main(list(args))
        except SystemExit as exit_:
            code = exit_.code
        except Exception as error:  # what the interpreter would print as a traceback, exit status 1
            err.write(f"Traceback (most recent call last):\n  ...\n{type(error).__name__}: {error}\n")
            code = 1
    if isinstance(code, str):  # sys.exit("message"): the interpreter prints it, status 1
        err.write(code + "\n")
        code = 1
    returncode = 0 if code is None else int(code)  # type: ignore[call-overload]
    return subprocess.CompletedProcess(["main", *args], returncode, out.getvalue(), err.getvalue())
