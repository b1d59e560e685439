"""The bad-input suite's accounting: every case is tried, classified, and counted in one figure line.

A case is a call that careless or hostile input makes (building an operator, executing it, running a
command-line tool, ranking a sweep...) and what its refusal must say: the field (or option) it names and a
piece of the fix. ``judge`` runs it and puts it in exactly one class:

- ``refused``: it raised the provider's refusal (JobValidationError, or an AirflowException / a tool's
  one-line error) naming the field and the fix, before any request reached the cluster;
- ``accepted``: it raised nothing (the input should not have passed);
- ``unclear``: it raised something else (a raw ValueError, TypeError, a client exception), or a refusal that
  does not name the field or the fix;
- ``after_request``: refused as it should be, but only after a request reached the cluster;
- ``leaked``: any class, with a secret the case planted visible in the error text (callbacks and notifiers
  receive it unmasked).

``FigureLine`` adds the judgements up; each surface's test module asserts that its last four classes are
empty and writes its line to ``build/bad-inputs/<surface>.txt``, which `make test` leaves for the closing
figures (``python tests/badinput_support.py`` prints the total of those files).

The cluster a case may reach is a ``RequestCounter``: a loopback HTTP server that answers every request with
a Kubernetes 404 Status and counts it. A kubeconfig pointing at it makes "no request before refusing" a
number instead of a hope.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FIGURES = ROOT / "build" / "bad-inputs"
CLASSES = ("refused", "accepted", "unclear", "after_request", "leaked")


@dataclass
class TaskInstance:
    """What an operator reads of ``context["ti"]`` in a case, and the XComs it pushes."""

    dag_id: str = "bad_inputs"
    task_id: str = "train"
    run_id: str = "manual__1"
    map_index: int = -1
    try_number: int = 1
    xcoms: dict[str, Any] = field(default_factory=dict)

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcoms[key] = value


def task_context(ti: TaskInstance | None = None, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """The context a task runner hands ``execute`` (and ``render_template_fields``) in a case."""
    ti = ti if ti is not None else TaskInstance()
    return {"ti": ti, "task_instance": ti, "params": params or {}, "ds": "2025-01-02", "run_id": ti.run_id}


@dataclass(frozen=True)
class Case:
    """One bad input: ``call`` makes it; its refusal must name ``field`` and contain ``fix``."""

    id: str
    call: Callable[[], Any]
    field: str
    fix: str
    #: A secret value the input carries: it must not appear in the refusal's text.
    secret: str | None = None


@dataclass
class Judgement:
    case: Case
    outcome: str
    detail: str
    leaked: bool = False

    def __str__(self) -> str:
        return f"{self.case.id}: {self.outcome}{' + leaked' if self.leaked else ''}: {self.detail}"


def _text(error: BaseException) -> str:
    """What a reader of the error sees: its message and, for a refusal, every problem's field and fix."""
    parts = [str(error)]
    for problem in getattr(error, "problems", ()) or ():
        parts.append(
            f"{getattr(problem, 'field', '')}: {getattr(problem, 'problem', '')} {getattr(problem, 'fix', '')}"
        )
    return "\n".join(parts)


def judge(
    case: Case,
    *,
    refusals: tuple[type[BaseException], ...],
    counter: RequestCounter | None = None,
) -> Judgement:
    """Run ``case`` and classify it (``refusals``: the exception types that count as the provider's
    refusal on this surface, e.g. JobValidationError and AirflowException)."""
    before = counter.count if counter is not None else 0
    try:
        case.call()
    except refusals as error:
        text = _text(error)
        leaked = case.secret is not None and case.secret in text
        requests = (counter.count - before) if counter is not None else 0
        if case.field not in text or case.fix not in text:
            return Judgement(case, "unclear", f"{type(error).__name__}: {text[:300]}", leaked)
        if requests:
            return Judgement(case, "after_request", f"{requests} request(s) before: {text[:200]}", leaked)
        return Judgement(case, "refused", text[:200], leaked)
    except BaseException as error:
        if isinstance(error, KeyboardInterrupt):
            raise
        text = f"{type(error).__name__}: {error}"
        leaked = case.secret is not None and case.secret in text
        return Judgement(case, "unclear", text[:300], leaked)
    return Judgement(case, "accepted", "no error raised")


@dataclass
class FigureLine:
    """The judgements of one surface (or all), counted by class."""

    surface: str
    judgements: list[Judgement] = field(default_factory=list)

    def add(self, judgement: Judgement) -> Judgement:
        self.judgements.append(judgement)
        return judgement

    def counts(self) -> dict[str, int]:
        counts = dict.fromkeys(("tried", *CLASSES), 0)
        counts["tried"] = len(self.judgements)
        for j in self.judgements:
            counts[j.outcome] += 1
            counts["leaked"] += int(j.leaked)
        return counts

    def failures(self) -> list[Judgement]:
        return [j for j in self.judgements if j.outcome != "refused" or j.leaked]

    def line(self) -> str:
        c = self.counts()
        return (
            f"{self.surface}: {c['tried']} tried, {c['refused']} refused before any request naming the field "
            f"and the fix, {c['accepted']} accepted but should not be, {c['unclear']} unclear, "
            f"{c['after_request']} refused only after a request, {c['leaked']} secret leaks"
        )

    def write(self) -> Path:
        FIGURES.mkdir(parents=True, exist_ok=True)
        path = FIGURES / f"{self.surface}.json"
        path.write_text(json.dumps({"surface": self.surface, **self.counts()}))
        return path


class _Handler(BaseHTTPRequestHandler):
    def _answer(self) -> None:
        self.server.count += 1  # type: ignore[attr-defined]
        body = json.dumps(
            {"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound", "code": 404,
             "message": "the bad-input suite's counter serves nothing"}
        ).encode()  # fmt: skip
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the count is the point."""


class RequestCounter:
    """A loopback server counting every request, and a kubeconfig that points at it."""

    def __init__(self, directory: Path) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.count = 0  # type: ignore[attr-defined]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self.kubeconfig = directory / "kubeconfig"
        host = f"http://127.0.0.1:{self._server.server_address[1]}"
        self.kubeconfig.write_text(json.dumps({
            "apiVersion": "v1", "kind": "Config", "current-context": "counter",
            "clusters": [{"name": "counter", "cluster": {"server": host}}],
            "users": [{"name": "counter", "user": {"token": "not-a-secret"}}],
            "contexts": [{"name": "counter", "context": {"cluster": "counter", "user": "counter",
                                                         "namespace": "default"}}],
        }))  # fmt: skip

    @property
    def count(self) -> int:
        return int(self._server.count)  # type: ignore[attr-defined]

    def __enter__(self) -> RequestCounter:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


def total(paths: Iterable[Path]) -> str:
    """The figure line over every surface's file."""
    sums = dict.fromkeys(("tried", *CLASSES), 0)
    surfaces = []
    for path in sorted(paths):
        data = json.loads(path.read_text())
        surfaces.append(data["surface"])
        for key in sums:
            sums[key] += int(data[key])
    return (
        f"bad inputs over {len(surfaces)} surfaces ({', '.join(surfaces)}): {sums['tried']} tried, "
        f"{sums['refused']} refused before any request naming the field and the fix, {sums['accepted']} "
        f"accepted but should not be, {sums['unclear']} unclear, {sums['after_request']} refused only after a "
        f"request, {sums['leaked']} secret leaks"
    )


if __name__ == "__main__":
    print(total(FIGURES.glob("*.json")))
    sys.exit(0)
