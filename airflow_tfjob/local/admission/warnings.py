"""Warnings a request collects on its way through the API server (admission webhooks' warnings, unknown
fields under `fieldValidation=Warn`), sent back as `Warning: 299 - "<text>"` headers as a real API
server does (kubectl prints them as `Warning: <text>`).

A context variable rather than a return value: the store's admission hook and the field validation run
inside one request's handler, and the store's signatures stay as they are.
"""

from __future__ import annotations

import contextvars

_WARNINGS: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("request_warnings", default=None)


def collect() -> contextvars.Token[list[str] | None]:
    """Start collecting for the current request (the API server calls this per request)."""
    return _WARNINGS.set([])


def add(*texts: str) -> None:
    """Record warnings; outside a request (the controller, tests on the store) they are dropped."""
    collected = _WARNINGS.get()
    if collected is not None:
        collected.extend(t for t in texts if t not in collected)


def pending() -> list[str]:
    """What the current request collected so far (a stream sends them before it starts)."""
    return list(_WARNINGS.get() or [])


def take(token: contextvars.Token[list[str] | None]) -> list[str]:
    collected = _WARNINGS.get() or []
    _WARNINGS.reset(token)
    return collected


def header_value(text: str) -> str:
    """RFC 7234 warn-value with the API server's agent `-` and Go-style quoting."""
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'299 - "{escaped}"'
