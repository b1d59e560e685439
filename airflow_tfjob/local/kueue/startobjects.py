"""The Kueue objects the start creates (`--kueue-objects` files, `LocalCluster(kueue={"objects": ...})`):
loaded from YAML, checked in a scratch store as the API server and Kueue's webhook check a create, and
created. It sits above the webhook (jobs.py) that it checks them with, so that the options (options.py),
which the webhook reads, stay below it; the command line loads it only when it starts a cluster.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from airflow_tfjob.local.admission.schemacheck import check, field_path
from airflow_tfjob.local.kueue.convert import to_v1beta2
from airflow_tfjob.local.kueue.jobs import KueueWebhook
from airflow_tfjob.local.kueue.options import API_VERSIONS, KUEUE_PLURALS, MANAGER_NAMESPACE, check_object
from airflow_tfjob.local.kueue.schema import kueue_schema
from airflow_tfjob.local.model.resources import INITIAL_NAMESPACES, RESOURCES, ApiError, JsonDict
from airflow_tfjob.local.store.core import Store
from airflow_tfjob.local.yamlfile import load_labelled


def load_objects(paths: Iterable[Path]) -> tuple[dict[str, Any], ...]:
    """Kueue objects from YAML files (several documents each, or a List), for `--kueue-objects`: loaded
    with the templates' limits, each checked as the emulation walks it (check_object), then every one
    checked as the API server checks a create (check_as_created). Every problem is said at once, naming
    the file, the document, the object, the field and the fix, but no content; nothing of a file with a
    problem reaches the cluster, which does not start."""
    found: list[tuple[str, Any]] = []
    problems: list[str] = []
    for path in paths:
        for label, doc in load_labelled(Path(path), "--kueue-objects"):
            where = f"--kueue-objects {path} {label}"
            try:
                check_object(doc, where)
            except ValueError as exc:
                problems.append(str(exc))
                continue
            found.append((where, doc))
    problems += check_as_created(found)
    if problems:
        more = f"; and {len(problems) - 5} more" if len(problems) > 5 else ""
        raise ValueError(f"{'; '.join(problems[:5])}{more} ({len(problems)} problem(s): no object is created "
                         "and the cluster does not start)")
    return tuple(doc for _, doc in found)


def create_object(store: Store, obj: Mapping[str, Any]) -> JsonDict:
    """One configured object created as the cluster's start creates it (assembly.py): in its v1beta2 form
    (a v1beta1 object converted as the API server converts it), through the store's create, i.e. the API
    server's decoding, name and namespace checks, then the Kueue webhook's defaults and CRD schema. Raises
    the ApiError a real API server would answer."""
    body: dict[str, Any] = to_v1beta2(dict(obj))
    body.setdefault("apiVersion", API_VERSIONS[0])
    plural = KUEUE_PLURALS[str(obj.get("kind"))]
    namespaced = RESOURCES[plural].namespaced
    namespace = (body.get("metadata") or {}).get("namespace") if namespaced else None
    return store.create(plural, namespace or ("default" if namespaced else None), body)


def check_as_created(objects: Sequence[tuple[str, Mapping[str, Any]]]) -> list[str]:
    """Every object (labelled by where it comes from) created in order in a scratch store that holds what
    the start creates first: the problems a real API server (and `kubectl apply`, which sends
    fieldValidation=Strict, so that a misspelt field is an error) would report, each naming the object,
    the field and the fix. The scratch store is thrown away: nothing reaches the cluster."""
    if not objects:
        return []
    scratch = Store(admission=KueueWebhook(None, ()))
    scratch.create("namespaces", None, {"apiVersion": "v1", "kind": "Namespace",
                                        "metadata": {"name": MANAGER_NAMESPACE}})
    problems: list[str] = []
    for where, obj in objects:
        kind = str(obj.get("kind"))
        at = f"{where} ({kind} {(obj.get('metadata') or {}).get('name')})"
        unknown = check(to_v1beta2(dict(obj)), kueue_schema(kind)).unknown
        problems += [f"{at}: {field_path(p)}: unknown field; check its spelling against Kueue's {kind} (v1beta2)"
                     for p in unknown]
        try:
            create_object(scratch, obj)
        except ApiError as exc:
            problems += [f"{at}: {said}" for said in _said(exc)]
    return problems


def _said(error: ApiError) -> list[str]:
    """An API server's refusal as `field: problem; fix` lines, one per cause; a long value it quotes is
    cut (a file's text is not shown beyond what names the problem)."""
    causes = (error.details or {}).get("causes") or []
    if not causes:
        return [f"{_cut(error.message)}; {_FIX_OF_CODE.get(error.code, 'fix the object')}"]
    said = []
    for cause in causes:
        field, reason, message = str(cause.get("field")), str(cause.get("reason")), str(cause.get("message"))
        said.append(f"{field}: {_cut(message)}; {_fix(field, reason, message)}")
    return said


def _cut(message: str) -> str:
    return re.sub(r'"([^"]{32})[^"]{8,}"', r'"\1..."', message)


_FIX_OF_CODE = {
    404: f"create it in a namespace that exists at start ({', '.join((*INITIAL_NAMESPACES, MANAGER_NAMESPACE))})",
    409: "give each object of a kind its own name",
    400: "write the object as its kind's API defines it",
}
_TYPE_WORDS = {"integer": "a whole number", "number": "a number", "string": "a string (quote it)",
               "boolean": "true or false", "object": "a mapping", "array": "a list",
               "integer,string": "a quantity such as 4, 500m or 8Gi"}


def _fix(field: str, reason: str, message: str) -> str:
    """How to mend one cause of a 422, in the user's words."""
    if reason == "FieldValueRequired":
        return f"add {field}"
    if reason == "FieldValueTypeInvalid":
        expected = message.rpartition("must be of type ")[2].partition(":")[0]
        return f"write {field} as {_TYPE_WORDS.get(expected, expected)}"
    if reason == "FieldValueNotSupported":
        return "use one of the supported values"
    if reason in ("FieldValueTooMany", "FieldValueTooLong"):
        return f"make {field} shorter"
    bounds = re.search(r"must be of type int(?:32|64) \((-?\d+) to (-?\d+)\)", message)
    if bounds:
        return f"give {field} a whole number from {bounds[1]} to {bounds[2]}"
    if "should have at least" in message:
        return f"give {field} at least one item"
    if "should match" in message:
        if field.endswith(("Quota", "Limit", "weight")):
            return "give a quantity such as 4, 500m or 8Gi"
        return "use lower-case letters, digits, '-' and '.', starting and ending with a letter or digit"
    return f"fix {field}"
