"""Fault injection for the local API server: the failures a busy production API server produces.

A `FaultPlan` says how often and which faults to inject; `FaultInjector` is the aiohttp middleware that
applies it in front of the routes, so the store and the controller never know. Faults:

* ``throttle``: 429 TooManyRequests Status with a ``Retry-After`` header (as API Priority and Fairness).
* ``unavailable``: 503 ServiceUnavailable Status.
* ``server_error``: 500, 502 or 504 Status (the RNG chooses; reasons as client-go names them).
* ``lost_reply`` (POST, PUT, PATCH, DELETE, DELETECOLLECTION only): the change IS applied, then the
  client gets no reply (the connection is closed) or a 500/504, so it cannot know whether it happened.
* ``stream_cut`` (watches and ``follow=true`` logs only): the stream is cut after a random while.
* ``unterminated`` (watches and ``follow=true`` logs only): the stream is served whole, then ends by
  closing the connection without HTTP's final (zero-length) chunk, as some API gateways and load
  balancers end them; the client sees a payload error where the stream would have ended cleanly.
* ``stream_end`` (watches and ``follow=true`` logs only): the stream ends properly, with its final
  chunk, after a random while (``stream_cut_after``) although more was to come, as a server or proxy
  that closes idle or long-lived streams does; the client cannot tell it from a container's exit.

Each eligible request draws from one seeded RNG in arrival order, so a run is reproducible when the
requests arrive in the same order; with concurrent clients the order (and so which request gets which
fault) can vary between runs, while the rate and the mix of kinds stay the same.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import random
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from airflow_tfjob.local.apiserver.request import ENDS_EARLY, UNTERMINATED
from airflow_tfjob.local.apiserver.requestmetrics import classify
from airflow_tfjob.local.model.resources import ApiError, JsonDict

KINDS = ("throttle", "unavailable", "server_error", "lost_reply", "stream_cut", "unterminated", "stream_end")
#: Kinds a plan gets when it names none: ``unterminated`` and ``stream_end`` are asked for by name (they
#: change how the streams they draw end, which the mixes tuned before they existed did not expect).
DEFAULT_KINDS = ("throttle", "unavailable", "server_error", "lost_reply", "stream_cut")
STREAM_ONLY = frozenset(("stream_cut", "unterminated", "stream_end"))
VERBS = ("GET", "LIST", "WATCH", "POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION")
MUTATING = frozenset(("POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION"))
METRIC = "tfjob_local_injected_faults_total"
_TRUE = frozenset(("1", "t", "T", "TRUE", "true", "True"))

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
_EXAMPLES = {"seed": "7", "rate": "0.05", "latency": "0.01", "retry_after": "1", "stream_cut_after": "0.5+2"}


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class FaultPlan:
    """Which faults the local API server injects. JSON-serialisable via `to_dict` / `from_dict`."""

    seed: int = 0
    rate: float = 0.0  # share of eligible requests that get a fault (0..1)
    kinds: tuple[str, ...] = DEFAULT_KINDS
    verbs: tuple[str, ...] | None = None  # only requests with these verbs; None = all
    latency: float = 0.0  # up to this many seconds (uniform jitter) added to every request
    retry_after: float = 1.0  # seconds in the 429's Retry-After (rounded up to whole seconds on the wire)
    stream_cut_after: tuple[float, float] = (0.5, 2.0)  # a cut (or ended) stream lives this long (uniform), s
    exempt_paths: tuple[str, ...] = ("/metrics", "/healthz", "/readyz", "/livez", "/version")

    def __post_init__(self) -> None:
        for name in ("kinds", "verbs", "stream_cut_after", "exempt_paths"):
            value = getattr(self, name)
            if isinstance(value, list):  # from JSON
                object.__setattr__(self, name, tuple(value))
        if isinstance(self.seed, bool) or not isinstance(self.seed, int):
            raise ValueError(f"FaultPlan.seed must be an integer (e.g. seed=7), got {self.seed!r}")
        if not _number(self.rate) or not 0.0 <= self.rate <= 1.0:
            raise ValueError(f"FaultPlan.rate must be a share between 0 and 1 (e.g. rate=0.05), got {self.rate!r}")
        unknown = [k for k in self.kinds if k not in KINDS]
        if unknown or not self.kinds:
            raise ValueError(f"FaultPlan.kinds: unknown or empty {unknown or list(self.kinds)}; "
                             f"choose among {', '.join(KINDS)}")
        if self.verbs is not None:
            bad = [v for v in self.verbs if v not in VERBS]
            if bad or not self.verbs:
                raise ValueError(f"FaultPlan.verbs: unknown or empty {bad or list(self.verbs)}; "
                                 f"choose among {', '.join(VERBS)} (or None for all)")
        for name in ("latency", "retry_after"):
            value = getattr(self, name)
            # An infinite latency or Retry-After would hang every request rather than test a client.
            if not _number(value) or value < 0:
                raise ValueError(f"FaultPlan.{name} must be a finite number of seconds >= 0 (e.g. "
                                 f"{name}={_EXAMPLES[name]}), got {value!r}")
        cut = self.stream_cut_after
        if len(cut) != 2 or not all(_number(x) for x in cut) or not 0 <= cut[0] <= cut[1]:
            raise ValueError("FaultPlan.stream_cut_after must be (low, high) finite seconds with 0 <= low <= high "
                             f"(e.g. stream_cut_after=0.5+2), got {self.stream_cut_after!r}")

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> FaultPlan:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"FaultPlan: unknown field(s) {unknown}; known: {', '.join(sorted(known))}")
        return cls(**data)

    @classmethod
    def parse(cls, spec: str) -> FaultPlan:
        """The CLI form: ``seed=7,rate=0.05,kinds=throttle+lost_reply,verbs=GET+LIST,latency=0.01,
        retry_after=1,stream_cut_after=0.5+2`` (lists joined with ``+``; omitted fields keep defaults)."""
        data: dict[str, Any] = {}
        for item in filter(None, (part.strip() for part in spec.split(","))):
            key, sep, value = item.partition("=")
            key = key.strip()
            if not sep:
                raise ValueError(f"--faults: {item!r} is not key=value (e.g. rate=0.05)")
            try:
                if key == "seed":
                    data[key] = int(value)
                elif key in ("rate", "latency", "retry_after"):
                    data[key] = float(value)
                elif key == "stream_cut_after":
                    data[key] = tuple(float(v) for v in value.split("+"))
                else:
                    data[key] = tuple(v.strip() for v in value.split("+") if v.strip())
            except ValueError:
                example = _EXAMPLES.get(key, "")
                raise ValueError(f"--faults: {key}={value!r} is not a number"
                                 + (f" (e.g. {key}={example})" if example else "")) from None
        try:
            return cls.from_dict(data)
        except ValueError as exc:
            raise ValueError(f"--faults: {exc}") from None


def _status(code: int, reason: str, message: str, details: JsonDict | None = None) -> web.Response:
    body = ApiError(code, reason, message, details).status()
    return web.json_response(body, status=code)


def _server_error(code: int) -> web.Response:
    if code == 504:
        return _status(504, "Timeout", "the server was unable to return a response in the time allotted, "
                                       "but may still be processing the request (injected fault)")
    if code == 502:
        return _status(502, "InternalError", 'an error on the server ("502 Bad Gateway") has prevented the '
                                             "request from succeeding (injected fault)")
    return _status(500, "InternalError", "Internal error occurred: injected fault")


@dataclass(frozen=True)
class _State:
    plan: FaultPlan
    rng: random.Random
    latency_rng: random.Random  # separate, so that turning latency on does not change which faults occur


def _is_stream(verb: str, subresource: str, request: web.Request) -> bool:
    return verb == "WATCH" or (subresource == "log" and request.query.get("follow") in _TRUE)


class FaultInjector:
    """The middleware and its counters. `set_plan` may be called from any thread."""

    def __init__(self, plan: FaultPlan | None = None) -> None:
        self._lock = threading.Lock()
        self._state: _State | None = None
        self._counts: Counter[tuple[str, str]] = Counter()
        self.set_plan(plan)

    def set_plan(self, plan: FaultPlan | None) -> None:
        state = None
        if plan is not None:
            state = _State(plan, random.Random(plan.seed), random.Random(f"{plan.seed}:latency"))
        with self._lock:
            self._state = state

    @property
    def plan(self) -> FaultPlan | None:
        state = self._state
        return state.plan if state else None

    def counts(self) -> dict[str, int]:
        """Faults injected so far, by kind."""
        by_kind: Counter[str] = Counter()
        with self._lock:
            for (kind, _verb), n in self._counts.items():
                by_kind[kind] += n
        return dict(by_kind)

    def render(self) -> str:
        lines = [f"# HELP {METRIC} Faults injected by the local API server.", f"# TYPE {METRIC} counter"]
        with self._lock:
            items = sorted(self._counts.items())
        lines += [f'{METRIC}{{kind="{kind}",verb="{verb}"}} {n}' for (kind, verb), n in items]
        return "\n".join(lines) + "\n"

    def _draw(self, verb: str, stream: bool) -> tuple[_State, float, str | None, float]:
        """(state, latency, fault kind or None, the kind's parameter) for one request, under the lock."""
        with self._lock:
            state = self._state
            assert state is not None
            plan = state.plan
            delay = state.latency_rng.uniform(0.0, plan.latency) if plan.latency else 0.0
            if plan.verbs is not None and verb not in plan.verbs:
                return state, delay, None, 0.0
            eligible = [k for k in plan.kinds if (k != "lost_reply" or verb in MUTATING)
                        and (k not in STREAM_ONLY or stream)]
            if not eligible or plan.rate <= 0 or state.rng.random() >= plan.rate:
                return state, delay, None, 0.0
            kind = eligible[0] if len(eligible) == 1 else state.rng.choice(eligible)
            param = 0.0
            if kind == "server_error":
                param = state.rng.choice((500, 502, 504))
            elif kind == "lost_reply":
                param = state.rng.choice((0, 500, 504))  # 0: the connection is closed without a reply
            elif kind in ("stream_cut", "stream_end"):
                param = state.rng.uniform(*plan.stream_cut_after)
            self._counts[(kind, verb)] += 1
            return state, delay, kind, param

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        state = self._state
        if state is None or request.path in state.plan.exempt_paths:
            return await handler(request)
        verb, _resource, subresource = classify(request.method, request.path, request.query)
        state, delay, kind, param = self._draw(verb, _is_stream(verb, subresource, request))
        if delay:
            await asyncio.sleep(delay)
        if kind == "throttle":
            seconds = math.ceil(state.plan.retry_after)
            response = _status(429, "TooManyRequests", "Too many requests, please try again later. "
                               "(injected fault)", {"retryAfterSeconds": seconds})
            response.headers["Retry-After"] = str(seconds)
            return response
        if kind == "unavailable":
            return _status(503, "ServiceUnavailable",
                           "the server is currently unable to handle the request (injected fault)")
        if kind == "server_error":
            return _server_error(int(param))
        if kind == "lost_reply":
            applied = await handler(request)  # the change is applied ...
            if param:
                return _server_error(int(param))  # ... and the reply says it failed
            if request.transport is not None:
                request.transport.abort()  # ... and the reply never comes
            return applied
        if kind == "stream_cut":
            return await self._cut_later(request, handler, state, param)
        if kind == "stream_end":
            request[ENDS_EARLY] = param  # the stream endpoints end it (watchendpoint, logendpoint)
        if kind == "unterminated":
            request[UNTERMINATED] = True  # the stream endpoints end it (apiserver/request.end_stream)
        return await handler(request)

    async def _cut_later(self, request: web.Request, handler: Handler, state: _State,
                         after: float) -> web.StreamResponse:
        """Serve the stream and drop its connection after `after` seconds, unless the plan changed by
        then (tests turn faults off and expect no more faults). Closing the transport makes aiohttp
        cancel the handler, exactly as when a client hangs up."""

        def cut() -> None:
            if self._state is state and request.transport is not None:
                request.transport.abort()

        timer = asyncio.get_running_loop().call_later(after, cut)
        try:
            return await handler(request)
        finally:
            timer.cancel()
