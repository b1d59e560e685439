"""Airflow commands started from a warm interpreter: a fork of a process that has imported Airflow and
built its in-process execution API, instead of a new `airflow` process each time.

An `airflow dags test` here costs about 9 s of CPU before its first task runs, whatever the DAG: about 2
s to import Airflow, 4 s for Cadwyn to build the execution API's versioned routes (`dags test` and
`tasks test` run their tasks against an in-process copy of that API), the rest the command's own
imports. The DAG tests start about thirty such commands, a third of the parallel stage's CPU. A zygote
started with a command's exact environment does that work once and forks for each command run with the
same environment (the same Airflow home, DAG folder and connections); the child is the command: its own
session and process group, the caller's stdout and stderr, the command line's argv, and its exit status
as a process's. That is how Airflow runs its own tasks (the LocalExecutor and Celery fork a parent that
has imported Airflow; `airflow.settings` disposes the ORM's pooled connections in a forked child), and
the command's code from `airflow.__main__.main` on is the release's own.

What differs from a new process: imports made before the fork are not made again (a DAG file that
mutates a module shared with the zygote changes only its child's copy), and the interpreter's teardown
is run by hand (non-daemon threads joined, atexit handlers, streams flushed) instead of by
`Py_Finalize`. A command whose environment matches no zygote gets a new one (at most ``MAX_ZYGOTES`` per
test process, the least recently used closed first); `TFJOB_TEST_COLD_AIRFLOW=1` starts every command as
a new process instead, for a comparison or when a fault might be the zygote's.

The zygote is this file run as a script by the environment's own interpreter (the compatibility lane's
venvs too): one control socket, a request being JSON plus the child's standard streams and a socket of
its own for the answers (the child's pid, then its wait status), both passed as file descriptors.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

MAX_ZYGOTES = 3
#: Variables that differ from command to command without changing what Airflow's import reads.
VOLATILE = frozenset({"PYTEST_CURRENT_TEST", "PYTHONFAULTHANDLER"})
_READY = b"ready\n"
_START_TIMEOUT = 300.0


# ---- the test process's side -------------------------------------------------------------------------


class WarmProcess:
    """A command forked by a zygote, seen as `subprocess.Popen` is by `run_cli`: ``pid`` (its own process
    group's id too), ``returncode`` and ``communicate(timeout)``."""

    def __init__(
        self, zygote: _Zygote, answers: socket.socket, stdout: int | None, stderr: int | None
    ) -> None:
        self._zygote = zygote
        self._answers = answers
        # The read ends of the command's stdout and stderr when the caller reads them (else -1).
        self._order = (-1 if stdout is None else stdout, -1 if stderr is None else stderr)
        self._pipes = {fd: bytearray() for fd in self._order if fd >= 0}
        self._eof: set[int] = set()  # read to the end, and closed
        self._status = b""
        self.returncode: int | None = None
        pid = self._read_answer(time.monotonic() + _START_TIMEOUT)
        if pid is None:
            raise OSError("the zygote did not start the command")
        self.pid = pid

    def poll(self) -> int | None:
        if self.returncode is None:
            self._answers.setblocking(False)
            try:
                chunk = self._answers.recv(64)
            except BlockingIOError:
                return None
            finally:
                self._answers.setblocking(True)
            self._status += chunk
            # End of file before a status: the zygote went away (_finish takes it as a SIGKILL).
            self._finish(self._read_answer(time.monotonic() + 5) if chunk else None)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            deadline = time.monotonic() + (timeout if timeout is not None else 10**9)
            status = self._read_answer(deadline)
            if status is None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired("airflow", timeout or 0.0)
            self._finish(status)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def _finish(self, status: int | None) -> None:
        global _reaped_cpu
        if status is None:
            status = signal.SIGKILL  # the zygote went away: its children died with it
        else:
            # The child's CPU time (with its reaped children's), which the zygote read when it reaped
            # it: a test process's own rusage never sees it (tests/cpu_times.py adds it).
            cpu = self._read_answer(time.monotonic() + 5, float) or 0.0
            with _zygotes_lock:
                _reaped_cpu += cpu
                self._zygote.children_cpu += cpu
        self.returncode = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        self._answers.close()

    def _read_answer(self, deadline: float, kind: Callable[[str], Any] = int) -> Any:
        while b"\n" not in self._status:
            self._answers.settimeout(max(0.0, deadline - time.monotonic()))
            try:
                chunk = self._answers.recv(64)
            except (TimeoutError, OSError):
                return None
            if not chunk:
                return None
            self._status += chunk
        line, _, self._status = self._status.partition(b"\n")
        return kind(line.decode())

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        import selectors

        deadline = time.monotonic() + (timeout if timeout is not None else 10**9)
        with selectors.DefaultSelector() as selector:
            for fd in self._pipes:
                if fd not in self._eof:
                    selector.register(fd, selectors.EVENT_READ)
            while selector.get_map():
                left = deadline - time.monotonic()
                if left <= 0:
                    raise subprocess.TimeoutExpired("airflow", timeout or 0.0)
                for key, _ in selector.select(left):
                    data = os.read(key.fd, 65536)
                    if data:
                        self._pipes[key.fd] += data
                    else:
                        selector.unregister(key.fd)
                        self._eof.add(key.fd)
                        os.close(key.fd)
        if self.returncode is None:
            status = self._read_answer(deadline)
            if status is None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired("airflow", timeout or 0.0)
            self._finish(status)
        out, err = (self._pipes.get(fd, bytearray()).decode(errors="replace") for fd in self._order)
        return out, err


class _Zygote:
    def __init__(self, python: str, env: Mapping[str, str]) -> None:
        import tempfile

        self.control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.lock = threading.Lock()
        self.children_cpu = 0.0  # what its ended commands used, as it reported them
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [python, __file__, str(theirs.fileno())],
            env=dict(env),
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self.stderr,
            start_new_session=True,
        )
        theirs.close()
        self.control.settimeout(_START_TIMEOUT)
        ready = b""
        while not ready.endswith(_READY):
            chunk = self.control.recv(64)
            if not chunk:
                self.proc.wait()
                self.stderr.seek(0)
                err = self.stderr.read().decode(errors="replace")
                self.stderr.close()
                raise OSError(f"the Airflow zygote did not start: {err[-3000:]}")
            ready += chunk
        self.control.settimeout(None)

    def start(
        self, argv: list[str], env: Mapping[str, str], cwd: str | None, output: int | None
    ) -> WarmProcess:
        """``output``: a descriptor both streams go to (as Popen's ``stdout=f, stderr=STDOUT``); else
        each goes to a pipe the returned process reads."""
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        ours: list[int] = []  # the read ends
        given: list[int] = []  # what the child gets as its stdout and stderr
        if output is None:
            for _ in range(2):
                read_end, write_end = os.pipe()
                ours.append(read_end)
                given.append(write_end)
        try:
            request = json.dumps({"argv": argv, "env": dict(env), "cwd": cwd}).encode() + b"\n"
            streams = given if output is None else [output, output]
            with self.lock:
                socket.send_fds(self.control, [request], [theirs.fileno(), *streams])
        except OSError:
            for fd in ours:
                os.close(fd)
            mine.close()
            raise
        finally:
            theirs.close()
            for fd in given:
                os.close(fd)
        return WarmProcess(self, mine, *(ours or (None, None)))

    def close(self) -> None:
        """The zygote exits once its running commands have (it is not waited for here)."""
        self.control.close()
        self.stderr.close()


_zygotes: OrderedDict[tuple[str, tuple[tuple[str, str], ...]], _Zygote] = OrderedDict()
_reaped_cpu = 0.0  # CPU seconds of the warm commands that have ended, as their zygotes reaped them
_closed: list[_Zygote] = []  # closed, their last commands maybe still running: reaped when they exit
_zygotes_lock = threading.Lock()


def _key(python: str, env: Mapping[str, str]) -> tuple[str, tuple[tuple[str, str], ...]]:
    return python, tuple(sorted((k, v) for k, v in env.items() if k not in VOLATILE))


#: What `popen` returns: a zygote's child, or a new process when asked for one.
Process = WarmProcess | subprocess.Popen[str]


def popen(
    argv: list[str], env: Mapping[str, str], cwd: str | None = None, output: int | None = None
) -> Process:
    """``argv`` (an `airflow` command line: the venv's ``bin/airflow`` first) forked from a zygote started
    with ``env``, in a session of its own; a new process when `TFJOB_TEST_COLD_AIRFLOW` is set.
    ``output``: a descriptor for both its streams (else pipes, read by ``communicate``)."""
    python = str(Path(argv[0]).parent / "python")
    if os.environ.get("TFJOB_TEST_COLD_AIRFLOW") or not os.path.exists(python):
        return _cold(argv, env, cwd, output)
    key = _key(python, env)
    with _zygotes_lock:
        _forget_ended()
        zygote = _zygotes.get(key)
        if zygote is not None and zygote.proc.poll() is None:
            _zygotes.move_to_end(key)
            return zygote.start(argv, env, cwd, output)
    # Started outside the lock: another home's commands need not wait the seconds this takes.
    zygote = _Zygote(python, env)
    with _zygotes_lock:
        if key in _zygotes:  # another thread started one meanwhile: use one, close the other
            _closed.append(_zygotes.pop(key))
            _closed[-1].close()
        _zygotes[key] = zygote
        while len(_zygotes) > MAX_ZYGOTES:
            _, oldest = _zygotes.popitem(last=False)
            oldest.close()
            _closed.append(oldest)
    return zygote.start(argv, env, cwd, output)


def _cold(
    argv: list[str], env: Mapping[str, str], cwd: str | None, output: int | None
) -> subprocess.Popen[str]:
    stdout = subprocess.PIPE if output is None else output
    stderr = subprocess.PIPE if output is None else subprocess.STDOUT
    return subprocess.Popen(argv, env=dict(env), cwd=cwd, stdout=stdout, stderr=stderr, text=True,
                            start_new_session=True)  # fmt: skip


def _forget_ended() -> None:
    """Drop the closed zygotes that have exited. This process's own rusage of its children now holds an
    exited zygote's CPU with its commands' (it waited for them), so they leave the separate count."""
    global _reaped_cpu
    for zygote in [z for z in _closed if z.proc.poll() is not None]:
        _closed.remove(zygote)
        _reaped_cpu -= zygote.children_cpu


def reaped_cpu() -> float:
    """CPU seconds the warm commands of this process used that its own rusage does not hold yet: those
    that ended, of zygotes this process has not waited for (tests/cpu_times.py)."""
    with _zygotes_lock:
        _forget_ended()
        return _reaped_cpu


def close_all() -> None:
    with _zygotes_lock:
        while _zygotes:
            _, zygote = _zygotes.popitem()
            zygote.close()
            _closed.append(zygote)


# ---- the zygote ------------------------------------------------------------------------------------


def _warm() -> None:
    """What every command would do first: import Airflow, its CLI and the provider, build the in-process
    execution API (Cadwyn's versioned routes, the bulk of a `dags test` start-up)."""
    import airflow
    import airflow.__main__  # noqa: F401
    from airflow.cli import cli_parser

    cli_parser.get_parser()
    for name in ("airflow.cli.commands.dag_command", "airflow.cli.commands.task_command",
                 "airflow_tfjob.operators", "airflow_tfjob.sensors", "airflow_tfjob.triggers"):  # fmt: skip
        with contextlib.suppress(ImportError):
            __import__(name)
    try:
        from airflow.sdk.execution_time.supervisor import in_process_api_server
    except ImportError:
        return
    app: Any = in_process_api_server().app
    initialize = getattr(app, "_cadwyn_initialize", None)
    if callable(initialize) and not getattr(app, "_cadwyn_initialized", True):
        initialize()


def _child(request: dict[str, Any], fds: list[int], zygotes_fds: list[int]) -> None:
    """In the forked child: become the command. Never returns."""
    code: int = 1
    try:
        answers, out, err = fds
        os.setsid()
        with contextlib.suppress(Exception):
            import ctypes

            ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: gone with the zygote
        for fd in (answers, *zygotes_fds):
            with contextlib.suppress(OSError):
                os.close(fd)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        for fd in (devnull, out, err):
            os.close(fd)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.set_wakeup_fd(-1)
        if request.get("cwd"):
            os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        import faulthandler

        if os.environ.get("PYTHONFAULTHANDLER"):
            faulthandler.enable()
        else:
            faulthandler.disable()
        sys.argv = list(request["argv"])
        from airflow.__main__ import main

        try:
            result = main()
            code = 0 if result is None else int(result)
        except SystemExit as exc:
            if exc.code is None:
                code = 0
            elif isinstance(exc.code, int):
                code = exc.code
            else:
                print(exc.code, file=sys.stderr)
                code = 1
        except KeyboardInterrupt:
            code = 128 + signal.SIGINT
        except BaseException:
            import traceback

            traceback.print_exc()
            code = 1
        # Py_Finalize's part that a command can observe: non-daemon threads joined, atexit handlers run.
        with contextlib.suppress(BaseException):
            threading._shutdown()  # type: ignore[attr-defined]
        with contextlib.suppress(BaseException):
            import atexit

            atexit._run_exitfuncs()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(BaseException):
                stream.flush()
        os._exit(code & 0xFF)


def _serve(control: socket.socket) -> None:
    import selectors

    answers: dict[int, socket.socket] = {}
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    buffer = b""
    pending: list[list[int]] = []  # each request's descriptors, which come with its first bytes
    open_control = True
    with selectors.DefaultSelector() as selector:
        selector.register(control, selectors.EVENT_READ)
        selector.register(wake_r, selectors.EVENT_READ)
        while open_control or answers:
            for key, _ in selector.select():
                if key.fileobj is control:
                    message, fds, _, _ = socket.recv_fds(control, 1 << 20, 3)
                    if not message and not fds:
                        # The test process closed its end (or died): serve the running commands out.
                        selector.unregister(control)
                        open_control = False
                        continue
                    buffer += message
                    if fds:
                        pending.append(list(fds))
                    while pending and b"\n" in buffer:
                        line, _, buffer = buffer.partition(b"\n")
                        request, fds = json.loads(line), pending.pop(0)
                        pid = os.fork()
                        if pid == 0:
                            mine = [control.fileno(), wake_r, wake_w, *(a.fileno() for a in answers.values())]
                            selector.close()
                            _child(request, fds, mine)
                        answer = socket.socket(fileno=fds[0])
                        for fd in fds[1:]:
                            os.close(fd)
                        answer.sendall(f"{pid}\n".encode())
                        answers[pid] = answer
                else:
                    with contextlib.suppress(BlockingIOError):
                        os.read(wake_r, 4096)
                    while True:
                        try:
                            pid, status, usage = os.wait4(-1, os.WNOHANG)
                        except ChildProcessError:
                            break
                        if pid == 0:
                            break
                        sock = answers.pop(pid, None)
                        if sock is not None:
                            with contextlib.suppress(OSError):
                                cpu = usage.ru_utime + usage.ru_stime
                                sock.sendall(f"{status}\n{cpu:.3f}\n".encode())
                            sock.close()


def _zygote_main(fd: int) -> None:
    control = socket.socket(fileno=fd)
    _warm()
    control.sendall(_READY)
    _serve(control)


if __name__ == "__main__":
    sys.path.pop(0)  # this file's folder: the commands must not import the tests' modules by accident
    _zygote_main(int(sys.argv[1]))
