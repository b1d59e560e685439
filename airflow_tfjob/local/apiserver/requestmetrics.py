"""Request counters and the open-watch gauge of the local API server, in the real server's metric names.

Benchmarks and tests need to know how many requests a client made and how many watch streams it holds
(e.g. "1,000 triggers share one watch"). The API server serves them on `/metrics` in the Prometheus text
format, under the names a real kube-apiserver uses:

* `apiserver_request_total{verb, resource, subresource}`: requests received, counted when they arrive
  (a real server counts them when they complete and adds a `code` label). Verbs are the real metric's:
  GET (one object), LIST, WATCH, POST, PUT, PATCH, DELETE, DELETECOLLECTION; requests outside the
  resource API (discovery, /version, /healthz) have an empty resource. Reads of `/metrics` itself are not
  counted, so reading the counters twice does not change them.
* `apiserver_longrunning_requests{verb="WATCH", resource}`: watch streams open right now.

`LocalCluster.request_count()` / `watch_count()` read the same numbers in-process.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping

from airflow_tfjob.local.model.resources import RESOURCES

REQUESTS = "apiserver_request_total"
LONGRUNNING = "apiserver_longrunning_requests"
_TRUE = frozenset(("1", "t", "T", "TRUE", "true", "True"))
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
_METHODS = frozenset(("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"))
_SUBRESOURCES = frozenset(("", "status", "log"))

RequestKey = tuple[str, str, str]  # (verb, resource, subresource)


def classify(method: str, path: str, query: Mapping[str, str]) -> RequestKey:
    """(verb, resource, subresource) of a request, from its URL alone (cheap: no object lookup).

    Label values are limited to known methods, resources and subresources, so that odd URLs cannot make
    the counters grow without bound."""
    if method not in _METHODS:
        method = "OTHER"
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 3 and parts[0] == "api":
        rest = parts[2:]
    elif len(parts) >= 4 and parts[0] == "apis":
        rest = parts[3:]
    else:
        return method, "", ""
    watch_prefix = rest[0] == "watch"
    if watch_prefix:
        rest = rest[1:]
    if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] != "status":
        rest = rest[2:]
    resource = rest[0] if rest and rest[0] in RESOURCES else ""
    has_name = len(rest) > 1
    subresource = rest[2] if len(rest) > 2 else ""
    if not resource or subresource not in _SUBRESOURCES:
        return method, "", ""
    verb = method
    if method == "GET":
        if watch_prefix or query.get("watch") in _TRUE:
            verb = "WATCH"
        elif not has_name:
            verb = "LIST"
    elif method == "DELETE" and not has_name:
        verb = "DELETECOLLECTION"
    return verb, resource, subresource


class RequestMetrics:
    """The counters; owned by one ApiServer and only touched on its event loop."""

    def __init__(self) -> None:
        self._requests: Counter[RequestKey] = Counter()
        self._watches: Counter[str] = Counter()

    def observe(self, key: RequestKey) -> None:
        self._requests[key] += 1

    def watch_opened(self, resource: str) -> None:
        self._watches[resource] += 1

    def watch_closed(self, resource: str) -> None:
        self._watches[resource] -= 1

    def request_count(
        self, verb: str | None = None, resource: str | None = None, subresource: str | None = None
    ) -> int:
        """Requests received so far matching every given label (None matches any value)."""
        return sum(
            n
            for (v, r, s), n in self._requests.items()
            if (verb is None or v == verb) and (resource is None or r == resource)
            and (subresource is None or s == subresource)
        )

    def watch_count(self, resource: str | None = None) -> int:
        """Watch streams open now (on `resource`, or on any)."""
        if resource is None:
            return sum(self._watches.values())
        return self._watches[resource]

    def render(self) -> str:
        lines = [f"# HELP {REQUESTS} Requests received by the local API server.", f"# TYPE {REQUESTS} counter"]
        for (verb, resource, sub), n in sorted(self._requests.items()):
            lines.append(f'{REQUESTS}{{verb="{verb}",resource="{resource}",subresource="{sub}"}} {n}')
        lines += [f"# HELP {LONGRUNNING} Watch streams open now.", f"# TYPE {LONGRUNNING} gauge"]
        for resource, n in sorted(self._watches.items()):
            lines.append(f'{LONGRUNNING}{{verb="WATCH",resource="{resource}"}} {n}')
        return "\n".join(lines) + "\n"


def parse_text(text: str) -> list[tuple[str, dict[str, str], float]]:
    """(name, labels, value) of each sample in Prometheus text format (enough for `render`'s output)."""
    samples = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if match is None:
            continue
        name, labels, value = match.groups()
        samples.append((name, dict(_LABEL.findall(labels or "")), float(value)))
    return samples
