"""A label selector in the API server's syntax, parsed once and matched against a job's labels (pure).

Apart from the asset watcher's stream (:mod:`airflow_tfjob.integrations.assets`) because the asset
trigger's constructor parses its selector where the trigger is made: in a DAG file, and on the
triggerer's event loop, neither of which should load the stream's watch and hooks.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_KEY = r"(?:[A-Za-z0-9][-A-Za-z0-9_.]{0,251}/)?[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
_VALUE = r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?"
_REQUIREMENT = re.compile(
    rf"\s*(?:(?P<not>!)\s*(?P<absent>{_KEY})"
    rf"|(?P<key>{_KEY})(?:\s*(?P<op>==|!=|=)\s*(?P<value>{_VALUE})"
    rf"|\s+(?P<set>in|notin)\s*\(\s*(?P<values>{_VALUE}(?:\s*,\s*{_VALUE})*)\s*\))?)\s*(?:,|$)"
)


@dataclass(frozen=True)
class LabelSelector:
    """A label selector in the API server's syntax, matched against a job's labels (pure)."""

    text: str
    requirements: tuple[tuple[str, str, frozenset[str]], ...]  # (key, op, values)

    @classmethod
    def parse(cls, text: str) -> LabelSelector:
        """Every requirement of ``text``; ValueError naming the part that is not a requirement."""
        if not isinstance(text, str) or not text.strip():
            raise ValueError(
                "label_selector: give the labels that mark the jobs to watch, e.g. 'team=vision' or "
                "'model=resnet,stage in (prod,staging)' (an empty selector would emit every job of the namespace)"
            )
        found: list[tuple[str, str, frozenset[str]]] = []
        at = 0
        while at < len(text):
            match = _REQUIREMENT.match(text, at)
            if match is None or match.end() == at:
                raise ValueError(
                    f"label_selector {text!r}: {text[at:]!r} is not a requirement; write key=value, key!=value, "
                    "key in (a,b), key notin (a,b), key or !key, separated by commas"
                )
            if match.group("absent"):
                found.append((match.group("absent"), "!", frozenset()))
            elif match.group("op"):
                op = "!=" if match.group("op") == "!=" else "="
                found.append((match.group("key"), op, frozenset({match.group("value")})))
            elif match.group("set"):
                values = frozenset(v.strip() for v in match.group("values").split(","))
                found.append((match.group("key"), match.group("set"), values))
            else:
                found.append((match.group("key"), "exists", frozenset()))
            at = match.end()
        return cls(text, tuple(found))

    def matches(self, labels: Mapping[str, Any] | None) -> bool:
        labels = labels or {}
        for key, op, values in self.requirements:
            value = labels.get(key)
            ok = {
                "=": value is not None and value in values,
                "in": value is not None and value in values,
                "!=": value is None or value not in values,
                "notin": value is None or value not in values,
                "exists": key in labels,
                "!": key not in labels,
            }[op]
            if not ok:
                return False
        return True
