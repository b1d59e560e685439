"""What an optional part of the local cluster (the Kueue emulation) adds to the API server: the kinds it
turns on (`ResourceType.feature`), the served versions other than the storage one with their conversion
and deprecation warning, and aggregated API groups answered by its own handler (Kueue's visibility API).

The API server reads these only for requests that name such a kind or group, so a cluster without the
optional part serves and costs exactly what it did before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from aiohttp import web

from airflow_tfjob.local.model.resources import JsonDict

Convert = Callable[[JsonDict], JsonDict]


def _same(obj: JsonDict) -> JsonDict:
    return obj


@dataclass(frozen=True)
class VersionView:
    """A served version that is not the storage version: objects are converted on the way in and out,
    and every request through it gets `warning` (a deprecated CRD version's deprecationWarning)."""

    to_storage: Convert = _same
    from_storage: Convert = _same
    warning: str | None = None


class AggregatedApi(Protocol):
    """An API group served by its own handler, as an APIService-backed aggregated API is."""

    group: str
    versions: tuple[str, ...]

    async def handle(self, request: web.Request, parts: list[str]) -> web.StreamResponse:
        """Answer /apis/<group>/... (`parts` is what follows the group: version, resources...),
        discovery included."""
        ...


@dataclass(frozen=True)
class Extensions:
    features: frozenset[str] = frozenset()
    views: Mapping[str, VersionView] = field(default_factory=dict)  # by "group/version"
    aggregated: Mapping[str, AggregatedApi] = field(default_factory=dict)  # by group

    def view(self, group: str, version: str) -> VersionView | None:
        return self.views.get(f"{group}/{version}")
