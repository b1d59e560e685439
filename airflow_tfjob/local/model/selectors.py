"""Label and field selectors, parsed and matched as the API server does (400 for what it would refuse)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from airflow_tfjob.local.model.resources import JsonDict, ResourceType, bad_request

_LABEL_KEY = re.compile(r"^([a-z0-9A-Z]([-a-z0-9A-Z.]*[a-z0-9A-Z])?/)?[a-zA-Z0-9]([-a-zA-Z0-9_.]*[a-zA-Z0-9])?$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
_SET_TERM = re.compile(r"^(\S+)\s+(in|notin)\s*\((.*)\)$")


def _split_terms(selector: str) -> list[str]:
    """Split on commas outside parentheses (set-based terms contain commas)."""
    terms: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in selector:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            terms.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
    terms.append("".join(current).strip())
    return [t for t in terms if t]


class LabelSelector:
    """Equality- and set-based label selector, as in `kubectl get -l`."""

    def __init__(self, requirements: list[tuple[str, str, frozenset[str]]]) -> None:
        self.requirements = requirements

    @classmethod
    def parse(cls, selector: str | None) -> LabelSelector | None:
        if not selector or not selector.strip():
            return None
        reqs: list[tuple[str, str, frozenset[str]]] = []
        for term in _split_terms(selector):
            reqs.append(cls._parse_term(term))
        return cls(reqs)

    @staticmethod
    def _parse_term(term: str) -> tuple[str, str, frozenset[str]]:
        def check(key: str, values: Iterable[str]) -> None:
            if not _LABEL_KEY.match(key) or len(key.rsplit("/", 1)[-1]) > 63:
                raise bad_request(f'unable to parse requirement: invalid label key "{key}"')
            for v in values:
                if len(v) > 63 or not _LABEL_VALUE.match(v):
                    raise bad_request(f'unable to parse requirement: invalid label value: "{v}"')

        m = _SET_TERM.match(term)
        if m:
            key, op, raw = m.group(1), m.group(2), m.group(3)
            values = frozenset(v.strip() for v in raw.split(",") if v.strip())
            check(key, values)
            return key, op, values
        if term.startswith("!"):
            key = term[1:].strip()
            check(key, ())
            return key, "!", frozenset()
        for op in ("!=", "==", "="):
            if op in term:
                key, _, value = term.partition(op)
                key, value = key.strip(), value.strip()
                check(key, (value,))
                return key, "!=" if op == "!=" else "=", frozenset((value,))
        key = term.strip()
        if not key or " " in key:
            raise bad_request(f"unable to parse requirement: found '{term}', expected: identifier")
        check(key, ())
        return key, "exists", frozenset()

    @classmethod
    def from_object(cls, selector: Any, where: str) -> LabelSelector:
        """A metav1.LabelSelector (`{matchLabels, matchExpressions}`) as requirements, checked as the API
        server's ValidateLabelSelector checks it; a ValueError names `where`, the field and the fix."""
        if not isinstance(selector, Mapping):
            raise ValueError(f"{where}: must be a label selector mapping (matchLabels, matchExpressions), "
                             f"got {selector!r}")
        unknown = sorted(set(selector) - {"matchLabels", "matchExpressions"})
        if unknown:
            raise ValueError(f"{where}: unknown field {unknown[0]!r}; use matchLabels and matchExpressions")
        reqs: list[tuple[str, str, frozenset[str]]] = []
        match_labels = selector.get("matchLabels") or {}
        if not isinstance(match_labels, Mapping):
            raise ValueError(f"{where}.matchLabels: must be a mapping of label to value")
        for key, value in match_labels.items():
            reqs.append(_checked(f"{where}.matchLabels", key, "=", [value]))
        expressions = selector.get("matchExpressions") or []
        if not isinstance(expressions, list):
            raise ValueError(f"{where}.matchExpressions: must be a list of {{key, operator, values}}")
        for i, expr in enumerate(expressions):
            at = f"{where}.matchExpressions[{i}]"
            if not isinstance(expr, Mapping):
                raise ValueError(f"{at}: must be a mapping {{key, operator, values}}")
            op = _OPERATORS.get(str(expr.get("operator")))
            if op is None:
                raise ValueError(f"{at}.operator: {expr.get('operator')!r} is not one of "
                                 f"{', '.join(_OPERATORS)}")
            values = expr.get("values") or []
            if not isinstance(values, list):
                raise ValueError(f"{at}.values: must be a list of strings")
            if op in ("in", "notin") and not values:
                raise ValueError(f"{at}.values: must be specified when operator is In or NotIn")
            if op in ("exists", "!") and values:
                raise ValueError(f"{at}.values: may not be specified when operator is Exists or DoesNotExist")
            reqs.append(_checked(at, expr.get("key"), op, values))
        return cls(reqs)

    def to_object(self) -> JsonDict:
        """The metav1.LabelSelector these requirements are (a parsed `-l` string written as a config's)."""
        labels: dict[str, str] = {}
        expressions: list[JsonDict] = []
        for key, op, values in self.requirements:
            if op == "=":
                labels[key] = next(iter(values))
                continue
            operator = {"!=": "NotIn", "in": "In", "notin": "NotIn", "exists": "Exists", "!": "DoesNotExist"}[op]
            expr: JsonDict = {"key": key, "operator": operator}
            if values:
                expr["values"] = sorted(values)
            expressions.append(expr)
        found: JsonDict = {}
        if labels:
            found["matchLabels"] = labels
        if expressions:
            found["matchExpressions"] = expressions
        return found

    def matches(self, labels: dict[str, str] | None) -> bool:
        labels = labels or {}
        for key, op, values in self.requirements:
            present = key in labels
            if op == "=" or op == "in":
                if not present or labels[key] not in values:
                    return False
            elif op == "!=" or op == "notin":
                if present and labels[key] in values:
                    return False
            elif op == "exists":
                if not present:
                    return False
            elif op == "!" and present:
                return False
        return True


_OPERATORS = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}


def _checked(at: str, key: Any, op: str, values: list[Any]) -> tuple[str, str, frozenset[str]]:
    """One requirement of a LabelSelector object, its key and values checked as label keys and values."""
    if not isinstance(key, str) or not _LABEL_KEY.match(key) or len(key.rsplit("/", 1)[-1]) > 63:
        raise ValueError(f"{at}: {key!r} is not a label key; use e.g. kubernetes.io/metadata.name")
    for value in values:
        if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE.match(value):
            raise ValueError(f"{at}: {value!r} is not a label value; use at most 63 letters, digits, '-', "
                             "'_' and '.', quoted")
    return key, op, frozenset(values)


def _field_value(obj: JsonDict, path: str) -> str:
    if path == "source":
        path = "source.component"
    value: Any = obj
    for part in path.split("."):
        if not isinstance(value, dict):
            return ""
        value = value.get(part)
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)


class FieldSelector:
    """`metadata.name=x,status.phase!=Running`: only the fields the real API server indexes."""

    def __init__(self, requirements: list[tuple[str, bool, str]]) -> None:
        self.requirements = requirements

    @classmethod
    def parse(cls, selector: str | None, info: ResourceType) -> FieldSelector | None:
        if not selector or not selector.strip():
            return None
        allowed = ("metadata.name", "metadata.namespace", *info.extra_fields)
        reqs: list[tuple[str, bool, str]] = []
        for term in _split_terms(selector):
            for op in ("!=", "==", "="):
                if op in term:
                    field, _, value = term.partition(op)
                    break
            else:
                raise bad_request(f"invalid selector: '{selector}'; can't understand '{term}'")
            field = field.strip()
            if field not in allowed:
                raise bad_request(
                    f'field label not supported: {field}'
                )
            reqs.append((field, op == "!=", value.strip()))
        return cls(reqs)

    def matches(self, obj: JsonDict) -> bool:
        for field, negate, value in self.requirements:
            if (_field_value(obj, field) == value) == negate:
                return False
        return True


def selected(obj: JsonDict, labels: LabelSelector | None, fields: FieldSelector | None) -> bool:
    if labels is not None and not labels.matches(obj.get("metadata", {}).get("labels")):
        return False
    return fields is None or fields.matches(obj)
