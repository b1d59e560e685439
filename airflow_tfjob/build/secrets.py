"""Secret values of a job (any kind): which env vars hold them, hiding them in what the task shows, masking them.

``secret_env`` values are literal env values the user marked secret. Their *names* travel in the
job's annotation :data:`~airflow_tfjob.constants.ANNOTATION_SECRET_ENV` as a JSON list (any
character Kubernetes allows in an env name, commas included, survives; the comma-separated form
written by earlier versions is still read). Their *values* are:

- replaced by ``***`` in every manifest the task prints or returns (:func:`redact`), wherever in
  the manifest they appear (an arg that repeats a token is hidden too);
- registered with Airflow's secrets masker (:func:`mask_values`) in the worker before anything is
  built or sent, and in the triggerer from the job's own manifest (:func:`secret_values`), so a
  replica that prints one, a traceback or an API error that echoes one shows ``***``.

Values from Secrets the job references (``env_from_secrets``, ``env_from``) never pass through the
provider: it does not read Secrets, and the manifest holds only their names.
"""

from __future__ import annotations

import copy
import inspect
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from airflow.sdk.log import mask_secret

from airflow_tfjob.build.checker import JobValidationError, Problem
from airflow_tfjob.constants import ANNOTATION_SECRET_ENV
from airflow_tfjob.jobs.adapter import adapter_for
from airflow_tfjob.jobs.kinds import ALL_KINDS
from airflow_tfjob.version_compat import AIRFLOW_V_3_1_PLUS

# Airflow's ``redact`` of the masker a task's process registers secrets with (the one its task runner
# serializes rendered fields with from 3.1).
if AIRFLOW_V_3_1_PLUS:
    from airflow.sdk.log import redact as masker_redact
else:  # 3.0 keeps it beside the masker itself
    from airflow.sdk.execution_time.secrets_masker import redact as masker_redact  # type: ignore[no-redef]

REDACTED = "***"
# The masker ignores very short values too (they would mask common words); a value this short is
# still hidden in manifests by name.
MIN_MASKED_LENGTH = 3


def encode_names(names: Iterable[str]) -> str:
    return json.dumps(list(dict.fromkeys(names)), separators=(",", ":"))


def decode_names(text: Any) -> list[str]:
    """The names an annotation value lists: a JSON list, or the older comma-separated form."""
    if not isinstance(text, str) or not text:
        return []
    if text.startswith("["):
        try:
            names = json.loads(text)
        except ValueError:
            return []
        return [str(n) for n in names if isinstance(n, (str, int, float))] if isinstance(names, list) else []
    return [n for n in text.split(",") if n]


def secret_env_names(manifest: Mapping[str, Any]) -> list[str]:
    annotations = (manifest.get("metadata") or {}).get("annotations") or {}
    return (
        decode_names(annotations.get(ANNOTATION_SECRET_ENV, "")) if isinstance(annotations, Mapping) else []
    )


def with_secret_names(annotations: Mapping[str, Any], names: Iterable[str]) -> dict[str, Any]:
    """``annotations`` with ``names`` added to the secret-env annotation."""
    out = dict(annotations)
    merged = decode_names(out.get(ANNOTATION_SECRET_ENV, "")) + [str(n) for n in names]
    if merged:
        out[ANNOTATION_SECRET_ENV] = encode_names(merged)
    return out


def _env_entries(manifest: Mapping[str, Any]) -> Iterable[dict[str, Any]]:
    """Every env entry of every container the manifest describes, wherever its API holds them.

    Every kind's adapter is asked, not only the manifest's kind's, so a manifest whose kind is wrong
    or unknown still has its secrets hidden.
    """
    for kind in ALL_KINDS:
        yield from adapter_for(kind).env_entries(manifest)


def secret_values(manifest: Mapping[str, Any], extra_names: Iterable[str] = ()) -> list[str]:
    """The literal values of the manifest's secret env vars (the annotation's names and ``extra_names``)."""
    names = set(secret_env_names(manifest)) | set(extra_names)
    values = [
        entry["value"]
        for entry in _env_entries(manifest)
        if entry.get("name") in names and isinstance(entry.get("value"), str)
    ]
    return list(dict.fromkeys(v for v in values if v))


def _hide(value: Any, secrets: list[str]) -> Any:
    if isinstance(value, str):
        for secret in secrets:
            if secret in value:
                value = value.replace(secret, REDACTED)
        return value
    if isinstance(value, dict):
        return {k: _hide(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [_hide(v, secrets) for v in value]
    if isinstance(value, tuple):
        return tuple(_hide(v, secrets) for v in value)
    return value


def redact(manifest: Mapping[str, Any], extra_names: Iterable[str] = ()) -> dict[str, Any]:
    """A copy safe to render, log or push to XCom: secret env values replaced by ``***``.

    Secret env vars are those ``secret_env`` set (listed in the annotation) plus ``extra_names``;
    their values are hidden in their entries and anywhere else they occur in the manifest.
    References (secretKeyRef, envFrom) are only names and stay visible.
    """
    extra = list(extra_names)
    names = set(secret_env_names(manifest)) | set(extra)
    values = sorted(secret_values(manifest, extra), key=len, reverse=True)
    out = copy.deepcopy(dict(manifest))
    if not names:
        return out
    for entry in _env_entries(out):
        if entry.get("name") in names and "value" in entry:
            entry["value"] = REDACTED
    return _hide(out, [v for v in values if len(v) >= MIN_MASKED_LENGTH]) if values else out


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, (list, tuple, set, frozenset)):
        for item in value:
            yield from _strings(item)


# A check quoting a long value cuts it short and marks the cut: the start of a secret is still its start.
_CUT = "..."
_MIN_CUT_SHOWN = 6


def _quoted(text: str, secret: str) -> bool:
    return secret in text or any(
        secret[:n] + _CUT in text for n in range(min(len(secret), _MIN_CUT_SHOWN), len(secret))
    )


def _unquoted(text: str, secrets: list[str]) -> str:
    """``text`` without the secrets, whole or cut short."""
    text = _hide(text, secrets)
    for secret in secrets:
        for n in range(len(secret) - 1, min(len(secret), _MIN_CUT_SHOWN) - 1, -1):
            if secret[:n] + _CUT in text:
                text = text.replace(secret[:n] + _CUT, REDACTED + _CUT)
    return text


@contextmanager
def unquoted_in_errors(secret_env: Any) -> Iterator[None]:
    """Refusals raised inside name secret entries but never quote their values.

    A refusal's text reaches callbacks and notifiers unmasked, and a check quoting a wrongly typed
    value (a secret given as text, a list, or repeated in another parameter) would carry it there.
    Every string ``secret_env`` holds, however it is shaped, is replaced by ``***`` in the field, the
    problem and the fix of each problem.
    """
    try:
        yield
    except JobValidationError as error:
        values = sorted(
            {v for v in _strings(secret_env) if len(v) >= MIN_MASKED_LENGTH}, key=len, reverse=True
        )
        if not values or not any(_quoted(str(error), v) for v in values):
            raise
        problems = [
            Problem(_unquoted(p.field, values), _unquoted(p.problem, values), _unquoted(p.fix, values))
            for p in error.problems
        ]
        raise JobValidationError(problems, kind=error.kind) from None


def mask_values(values: Iterable[Any]) -> None:
    """Register each value with Airflow's secrets masker (task logs, triggerer logs, rendered fields)."""
    for value in values:
        if value is None:
            continue
        text = value if isinstance(value, str) else json.dumps(value)
        if len(text) >= MIN_MASKED_LENGTH:
            mask_secret(text)


def masked(text: str) -> str:
    """``text`` with every value registered with the masker replaced by ``***``.

    Replica lines are masked here, before they are logged: Airflow's log pipeline masks too when a
    supervisor configured it, but not every process that runs a task does (``airflow dags test``).
    """
    return str(masker_redact(text))


def hidden(value: Any, secrets: Iterable[Any] = ()) -> Any:
    """``value`` as a task's rendered fields may show it: every value registered with Airflow's masker,
    and every string of ``secrets``, replaced by ``***`` wherever it sits; ``value`` itself (the same
    object) when none occurs.

    Why the provider walks the field itself: Airflow masks a rendered field only down to a nesting depth
    of 5 (``SecretsMasker.MAX_RECURSION_DEPTH``; 3.0 masks it in the API server, whose masker never saw
    the worker's registrations, so not at all), never in dict keys, and never inside an object it turns
    into a structure or text while serializing. So the walk reaches every depth; it masks keys as
    values; and an object that is not a plain container (a kubernetes model, one with ``serialize()``,
    one whose text shows a secret) is replaced by what Airflow would show of it, masked. Unchanged parts
    keep their identity, so a field without a secret is not copied.
    """
    extra = sorted({v for v in _strings(list(secrets)) if len(v) >= MIN_MASKED_LENGTH}, key=len, reverse=True)

    def text(item: str) -> str:
        return str(masker_redact(_hide(item, extra) if extra else item))

    return _shown(value, text, set())


def _shown(value: Any, text: Callable[[str], str], path: set[int]) -> Any:
    if isinstance(value, str):
        out = text(value)
        return value if out == value else out
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if id(value) in path:  # a cycle: Airflow's own walk meets it as it would without us
        return value
    path.add(id(value))
    try:
        if isinstance(value, Mapping):
            pairs = [(_shown(k, text, path), _shown(v, text, path)) for k, v in value.items()]
            if all(k2 is k and v2 is v for (k, v), (k2, v2) in zip(value.items(), pairs, strict=True)):
                return value
            return dict(pairs)
        if isinstance(value, (list, tuple, set, frozenset)):
            items = list(value)
            shown = [_shown(v, text, path) for v in items]
            if all(a is b for a, b in zip(items, shown, strict=True)):
                return value
            return type(value)(shown) if type(value) in (list, tuple, set, frozenset) else shown
        return _shown_object(value, text, path)
    finally:
        path.discard(id(value))


def _shown_object(value: Any, text: Callable[[str], str], path: set[int]) -> Any:
    """An object inside a rendered field as Airflow would serialize it, masked; the object itself
    when what Airflow would show of it holds no secret."""
    try:
        if type(value).__module__.startswith(("kubernetes.", "kubernetes_asyncio.")) and callable(
            inspect.getattr_static(value, "to_dict", None)
        ):
            as_data = value.to_dict()
        elif callable(inspect.getattr_static(value, "serialize", None)):
            as_data = value.serialize()
        elif callable(value):
            return value  # shown by its qualified name
        else:
            shown_text = str(value)
            if text(shown_text) != shown_text or text(repr(value)) != repr(value):
                return text(shown_text)
            return value
    except Exception:  # what Airflow cannot turn into text it cannot show either
        return value
    shown = _shown(as_data, text, path)
    return value if shown is as_data else shown


__all__ = [
    "REDACTED",
    "decode_names",
    "encode_names",
    "hidden",
    "mask_values",
    "masked",
    "redact",
    "secret_env_names",
    "secret_values",
    "unquoted_in_errors",
    "with_secret_names",
]
