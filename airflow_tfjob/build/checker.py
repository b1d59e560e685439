"""The vocabulary of validation: the error and its problems, the syntax of Kubernetes values
(quantities, names, label keys, env var names), and the checker that collects every problem of a
manifest so that the user sees them all in one error.

Used by :mod:`airflow_tfjob.build.validation` (the TFJob's rules), :mod:`airflow_tfjob.build.container_validation`
(a container's) and every parameter check; re-exported by :mod:`airflow_tfjob.build.validation`.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, TypeGuard

from airflow_tfjob.build.naming import DNS1123_LABEL_RE, LABEL_VALUE_RE, MAX_NAME
from airflow_tfjob.constants import REPLICA_TYPES

# --------------------------------------------------------------------------- errors


@dataclass(frozen=True)
class Problem:
    field: str
    problem: str
    fix: str

    def __str__(self) -> str:
        return f"{self.field}: {self.problem.rstrip('.')}. Fix: {self.fix.rstrip('.')}."


class JobValidationError(ValueError):
    """One or more problems with a job manifest (or the parameters it is built from).

    ``JobValidationError(field, problem, fix)`` for one, ``JobValidationError([Problem, ...])``
    for several. ``field``/``problem``/``fix`` are those of the first problem. ``kind`` only names
    the job kind in the message.
    """

    def __init__(
        self, field: str | Sequence[Problem], problem: str = "", fix: str = "", kind: str = "TFJob"
    ) -> None:
        self.problems: tuple[Problem, ...] = (
            (Problem(field, problem, fix),) if isinstance(field, str) else tuple(field)
        )
        if not self.problems:
            raise ValueError("JobValidationError needs at least one problem")
        self.kind = kind
        super().__init__(self._message())

    def _message(self) -> str:
        if len(self.problems) == 1:
            return f"Invalid {self.kind}: {self.problems[0]}"
        lines = "\n".join(f"  - {p}" for p in self.problems)
        return f"Invalid {self.kind} ({len(self.problems)} problems):\n{lines}"

    @property
    def field(self) -> str:
        return self.problems[0].field

    @property
    def problem(self) -> str:
        return self.problems[0].problem

    @property
    def fix(self) -> str:
        return self.problems[0].fix

    def __reduce__(self) -> tuple[Any, ...]:
        # Exceptions are pickled by their args; ours are problems, not the message.
        return (type(self), (list(self.problems), "", "", self.kind))


# --------------------------------------------------------------------------- syntax helpers

_QUANTITY_RE = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$")
_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
DNS1123_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_LABEL_NAME_RE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_IANA_SVC_RE = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")
CLASSIC_ENV_RE = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
PRINTABLE_ENV_RE = re.compile(r"^[\x21-\x3c\x3e-\x7e]+$")  # printable ASCII except space and "="
_QUANTITY_FIX = (
    'write a Kubernetes quantity such as "500m", "2", "512Mi" or "4Gi" (no spaces, binary units end in "i")'
)
_ALIASES = {
    "parameterserver": "PS",
    "parameter-server": "PS",
    "parameter_server": "PS",
    "paramserver": "PS",
    "eval": "Evaluator",
    "evaluation": "Evaluator",
}


def parse_quantity(value: Any) -> Decimal | None:
    """A Kubernetes quantity as a Decimal, or None if it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return Decimal(str(value))
    if not isinstance(value, str):
        return None
    match = _QUANTITY_RE.match(value)
    if not match:
        return None
    suffix = match.group(3) or ""
    number = value[: len(value) - len(suffix)] if suffix else value
    try:
        base = Decimal(number)
    except InvalidOperation:
        return None
    if suffix in _BINARY:
        return base * _BINARY[suffix]
    if suffix in _DECIMAL:
        return base * _DECIMAL[suffix]
    return base * (Decimal(10) ** int(suffix[1:]))


def _closest(value: str, choices: Iterable[str]) -> str | None:
    choices = list(choices)
    lowered = {c.lower(): c for c in choices}
    if value.lower() in lowered:
        return lowered[value.lower()]
    match = difflib.get_close_matches(value.lower(), list(lowered), n=1, cutoff=0.6)
    return lowered[match[0]] if match else None


def choice_fix(value: Any, allowed: Sequence[str]) -> str:
    shown = ", ".join(repr(a) for a in allowed)
    close = _closest(value, allowed) if isinstance(value, str) else None
    return (f"did you mean {close!r}? " if close is not None else "") + f"use one of {shown}"


def suggest_replica_type(key: str, types: Sequence[str] = REPLICA_TYPES) -> str | None:
    """The replica type among ``types`` (a kind's) that ``key`` most likely meant, or None."""
    if _ALIASES.get(key.lower()) in types:
        return _ALIASES[key.lower()]
    lowered = {t.lower(): t for t in types}
    match = difflib.get_close_matches(key.lower(), list(lowered), n=1, cutoff=0.5)
    if match:
        return lowered[match[0]]
    # "Workers0", "worker-pool": a known type as a prefix
    for low, canon in lowered.items():
        if key.lower().startswith(low):
            return canon
    return None


def is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


# --------------------------------------------------------------------------- the checker


class Checker:
    def __init__(self) -> None:
        self.problems: list[Problem] = []
        self.warnings: list[str] = []

    def error(self, path: str, problem: str, fix: str) -> None:
        self.problems.append(Problem(path, problem, fix))

    def warn(self, path: str, message: str) -> None:
        self.warnings.append(f"{path}: {message}")

    # ---- generic shapes

    def mapping(self, value: Any, path: str, what: str = "a mapping") -> Mapping[str, Any] | None:
        if value is None:
            return None
        if not isinstance(value, Mapping):
            self.error(
                path,
                f"must be {what}, got {type(value).__name__}",
                f"write {path.rsplit('.', 1)[-1]} as key: value pairs",
            )
            return None
        return value

    def seq(self, value: Any, path: str) -> list[Any]:
        if value is None:
            return []
        if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
            self.error(path, f"must be a list, got {type(value).__name__}", "write it as a YAML/JSON list")
            return []
        return list(value)

    def entries(self, value: Any, path: str, form: str) -> Iterator[tuple[int, str, Mapping[str, Any]]]:
        """(index, path, entry) of each mapping in the list at ``path``; anything else is an error."""
        for j, entry in enumerate(self.seq(value, path)):
            if isinstance(entry, Mapping):
                yield j, f"{path}[{j}]", entry
            else:
                self.error(f"{path}[{j}]", "is not a mapping", f"write {form}")

    def unknown_keys(
        self, value: Mapping[str, Any], allowed: Sequence[str], path: str, kind: str = "TFJob"
    ) -> None:
        for key in value:
            if key not in allowed:
                self.error(
                    f"{path}.{key}" if path else str(key),
                    f"is not a field of {path or 'the ' + kind} (the API server would drop it silently)",
                    choice_fix(str(key), allowed),
                )

    def non_negative_int(self, value: Any, path: str, minimum: int = 0) -> None:
        if value is None:
            return
        if not is_int(value):
            self.error(
                path,
                f"must be a whole number, got {value!r}",
                f"write an integer >= {minimum} without quotes",
            )
        elif value < minimum:
            self.error(
                path,
                f"must be >= {minimum}, got {value}",
                f"use a value of at least {minimum}, or remove the field",
            )

    def labels(self, value: Any, path: str, values_are_labels: bool = True) -> None:
        mapping = self.mapping(value, path)
        if mapping is None:
            return
        total = 0
        for key, val in mapping.items():
            self.label_key(key, f"{path}.{key}")
            if not isinstance(val, str):
                self.error(
                    f"{path}.{key}",
                    f"value {val!r} is a {type(val).__name__}, Kubernetes wants a string",
                    f'quote it: "{str(val).lower() if isinstance(val, bool) else val}"',
                )
                continue
            total += len(key) + len(val)
            if values_are_labels and (len(val) > MAX_NAME or not LABEL_VALUE_RE.match(val)):
                self.error(
                    f"{path}.{key}",
                    f"label value {val!r} is not valid (at most 63 characters, letters, digits, '-', '_', '.', "
                    "starting and ending with a letter or digit)",
                    "shorten it or replace the other characters; put free text in an annotation instead",
                )
        if not values_are_labels and total > 256 * 1024:
            self.error(
                path,
                f"annotations total {total} bytes, over the 256 KiB limit",
                "move large values elsewhere (a ConfigMap)",
            )

    def choice(self, value: Any, path: str, allowed: Sequence[str], problem: str) -> bool:
        """Whether ``value`` is None or one of ``allowed`` (case-sensitive, as Kubernetes compares)."""
        if value is None or value in allowed:
            return True
        self.error(path, f"{value!r} {problem}", choice_fix(value, allowed))
        return False

    def unique_name(self, value: Any, path: str, what: str, seen: set[str], *, port: bool = False) -> None:
        """A volume, container or port name: valid syntax, and not used before in ``seen``."""
        if port:
            valid = isinstance(value, str) and len(value) <= 15 and bool(_IANA_SVC_RE.match(value))
            valid = valid and "--" not in value and bool(re.search("[a-z]", value))
            rule = "use at most 15 lower-case letters, digits and single '-', with at least one letter"
        else:
            valid = isinstance(value, str) and len(value) <= MAX_NAME and bool(DNS1123_LABEL_RE.match(value))
            rule = "use at most 63 lower-case letters, digits and '-'"
        if not valid:
            self.error(path, f"{value!r} is not a valid {what} name", rule)
        elif value in seen:
            self.error(path, f"{what} name {value!r} is used twice", f"give each {what} a distinct name")
        else:
            seen.add(value)

    def label_key(self, key: Any, path: str) -> None:
        if not isinstance(key, str) or not key:
            self.error(path, f"key {key!r} is not a string", "use a string key such as example.com/team")
            return
        prefix, _, name = key.rpartition("/")
        ok = bool(_LABEL_NAME_RE.match(name)) and len(name) <= MAX_NAME
        if prefix:
            ok = ok and len(prefix) <= 253 and bool(DNS1123_SUBDOMAIN_RE.match(prefix))
        if not ok:
            self.error(
                path,
                f"key {key!r} is not a valid label/annotation key",
                "use an optional DNS prefix and '/', then at most 63 letters, digits, '-', '_' or '.' "
                "(e.g. example.com/team)",
            )

    def quantity(self, value: Any, path: str) -> Decimal | None:
        parsed = parse_quantity(value)
        if parsed is None:
            self.error(path, f"{value!r} is not a Kubernetes quantity", _QUANTITY_FIX)
            return None
        if parsed < 0:
            self.error(path, f"{value!r} is negative", "use a positive quantity")
            return None
        return parsed
