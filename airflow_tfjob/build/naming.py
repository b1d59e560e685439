"""Names that Kubernetes will accept, and the labels that tie a job (any kind) to its Airflow task instance.

Pure functions: the operator module imports this at DAG parse time.

Why names are budgeted: the training-operator names every pod and headless Service
``{job}-{type}-{index}``, and a Service name must be a DNS-1035 label of at most 63 characters.
A job name that fits on its own but not with its longest suffix is accepted by the API server and
then stays stuck forever (kubeflow/trainer#1101). So the job name length is computed from the
suffixes the manifest really needs.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from airflow_tfjob.constants import (
    ANNOTATION_DAG_ID,
    ANNOTATION_MAP_INDEX,
    ANNOTATION_RUN_ID,
    ANNOTATION_TASK_ID,
    ANNOTATION_TRY_NUMBER,
    LABEL_DAG_ID,
    LABEL_HANDLED,
    LABEL_MANAGED,
    LABEL_MAP_INDEX,
    LABEL_RUN_ID,
    LABEL_TASK_ID,
    LABEL_TRY_NUMBER,
    REPLICA_TYPES,
)

MAX_NAME = 63
# Suffix used when the replica counts are not known yet: Evaluator is the longest type name, and
# two index digits cover up to 100 replicas of it. Leaves 50 characters, the practical limit the
# reference gives for jobs with an Evaluator.
DEFAULT_MAX_REPLICA_SUFFIX = "-evaluator-99"  # default_replica_suffix() of a TFJob

DNS1035_RE = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
DNS1123_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_HASH_LEN = 10
_LABEL_HASH_LEN = 8

_CANONICAL = {t.lower(): t for t in REPLICA_TYPES}


def canonical_replica_type(key: str) -> str | None:
    """The canonical spelling of a replica type ("worker" -> "Worker"), or None if unknown.

    The training-operator itself renames keys that equal a known type case-insensitively, so the
    provider accepts any case too.
    """
    return _CANONICAL.get(key.lower()) if isinstance(key, str) else None


def is_dns1035_label(value: str) -> bool:
    return isinstance(value, str) and len(value) <= MAX_NAME and bool(DNS1035_RE.match(value))


NAME_FIX = "use at most 63 lower-case letters, digits and '-', starting with a letter and ending with a letter or digit"
NAMESPACE_FIX = (
    "use at most 63 lower-case letters, digits and '-', starting and ending with a letter or digit"
)


def job_name_problem(name: Any) -> str | None:
    """What is wrong with a TFJob name (the operator's and the sensor's wording, here so that the
    sensors' checks load no manifest validator), or None."""
    return None if isinstance(name, str) and is_dns1035_label(name) else f"{name!r} is not a DNS-1035 label"


def namespace_problem(namespace: Any) -> str | None:
    valid = isinstance(namespace, str) and len(namespace) <= MAX_NAME and DNS1123_LABEL_RE.match(namespace)
    return None if valid else f"{namespace!r} is not a valid namespace name"


def _digest(*parts: Any, length: int) -> str:
    payload = json.dumps([str(p) for p in parts], separators=(",", ":"))
    return hashlib.sha256(payload.encode()).hexdigest()[:length]


def replica_suffix(replica_type: str, replicas: int) -> str:
    """The suffix the operator appends for the highest index of one replica type."""
    return f"-{replica_type.lower()}-{max(int(replicas) - 1, 0)}"


def _replica_counts(replicas: Mapping[str, Any]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for key, value in replicas.items():
        if isinstance(value, Mapping):
            value = value.get("replicas", 1)
        if isinstance(value, bool) or not isinstance(value, int):
            value = 1  # validation reports it; here only the length matters
        counts[str(key)] = value
    return counts


def default_replica_suffix(replica_types: Sequence[str] = REPLICA_TYPES) -> str:
    """The suffix to budget for before the counts are known: a kind's longest type, 100 replicas
    (``-evaluator-99`` for a TFJob, ``-worker-99`` for a PyTorchJob: of equal lengths the last type,
    as kinds list Worker, the one with many replicas, last)."""
    return f"-{max(reversed(replica_types), key=len).lower()}-99"


def max_replica_suffix(replicas: Mapping[str, Any], replica_types: Sequence[str] = REPLICA_TYPES) -> str:
    """The longest ``-{type}-{index}`` suffix a job with these replicas will get.

    ``replicas`` maps replica type to a count, or is a kind's replica specs (``spec.tfReplicaSpecs``,
    ...); when it is empty, :func:`default_replica_suffix` of the kind's ``replica_types``.
    """
    counts = _replica_counts(replicas)
    if not counts:
        return default_replica_suffix(replica_types)
    return max((replica_suffix(t, n) for t, n in counts.items()), key=len)


def max_name_length(replicas: Mapping[str, Any], replica_types: Sequence[str] = REPLICA_TYPES) -> int:
    """The longest job name whose every pod and Service name still fits in 63 characters."""
    return MAX_NAME - len(max_replica_suffix(replicas, replica_types))


def _dns_slug(text: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    slug = re.sub(r"^[^a-z]+", "", slug)  # DNS-1035 starts with a letter
    return slug


def job_name(
    dag_id: str,
    task_id: str,
    run_id: str,
    map_index: int,
    try_number: int,
    *,
    max_replica_suffix: str = DEFAULT_MAX_REPLICA_SUFFIX,
    max_length: int | None = None,
) -> str:
    """A deterministic DNS-1035 job name, unique per (dag, task, run, map_index, try).

    The readable part comes from dag_id and task_id; a hash of all five inputs keeps names unique
    however the readable part is cut. ``max_length`` (e.g. from :func:`max_name_length`) wins over
    ``max_replica_suffix``.
    """
    budget = max_length if max_length is not None else MAX_NAME - len(max_replica_suffix)
    budget = min(budget, MAX_NAME)
    if budget < _HASH_LEN + 1:
        raise ValueError(
            f"no room for a job name: only {budget} characters are left once the replica suffix "
            f"is added; reduce the number of replicas or shorten replica types"
        )
    digest = _digest(dag_id, task_id, run_id, map_index, try_number, length=_HASH_LEN)
    # The hash starts after a dash, so it may begin with a digit; the name itself starts with a letter.
    slug = _dns_slug(f"{dag_id}-{task_id}") or "tfjob"
    room = budget - _HASH_LEN - 1
    slug = slug[:room].rstrip("-")
    if not slug:
        # Not even one letter fits before the hash: a letter then the hash, still unique.
        return ("t" + digest)[:budget]
    return f"{slug}-{digest}"


def label_value(value: Any) -> str:
    """A valid label value (<= 63 chars) for any string; changed values carry a hash of the original.

    The hash matters: sanitising alone would map e.g. ``a:b`` and ``a+b`` to the same value, and the
    provider finds a task's job again by these labels.
    """
    text = str(value)
    if len(text) <= MAX_NAME and LABEL_VALUE_RE.match(text):
        return text
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", text)
    digest = _digest(text, length=_LABEL_HASH_LEN)
    head = safe[: MAX_NAME - _LABEL_HASH_LEN - 1]
    head = re.sub(r"^[^A-Za-z0-9]+", "", head)
    head = re.sub(r"[^A-Za-z0-9]+$", "", head)
    return f"{head}-{digest}" if head else digest


def map_index_value(map_index: int) -> str:
    # "-1" is not a valid label value (it must start with an alphanumeric character).
    return str(map_index) if map_index >= 0 else "none"


def identity_labels(
    dag_id: str, task_id: str, run_id: str, map_index: int, try_number: int
) -> dict[str, str]:
    """Labels written on the TFJob so any later try of the same task instance can find it."""
    return {
        LABEL_MANAGED: "true",
        LABEL_DAG_ID: label_value(dag_id),
        LABEL_TASK_ID: label_value(task_id),
        LABEL_RUN_ID: label_value(run_id),
        LABEL_MAP_INDEX: map_index_value(map_index),
        LABEL_TRY_NUMBER: str(int(try_number)),
    }


def identity_annotations(
    dag_id: str, task_id: str, run_id: str, map_index: int, try_number: int
) -> dict[str, str]:
    """The same identity, unabridged: label values may be hashed, annotations keep the originals."""
    return {
        ANNOTATION_DAG_ID: str(dag_id),
        ANNOTATION_TASK_ID: str(task_id),
        ANNOTATION_RUN_ID: str(run_id),
        ANNOTATION_MAP_INDEX: str(map_index),
        ANNOTATION_TRY_NUMBER: str(int(try_number)),
    }


def identity_selector(
    dag_id: str, task_id: str, run_id: str, map_index: int, *, include_handled: bool = False
) -> str:
    """Label selector for the task instance's jobs, across tries (no try number).

    By default jobs already marked handled (reported, or abandoned by an earlier try) are excluded,
    as the cncf.kubernetes pod operator does for its durable pods.
    """
    labels = identity_labels(dag_id, task_id, run_id, map_index, 0)
    labels.pop(LABEL_TRY_NUMBER)
    terms = [f"{key}={value}" for key, value in labels.items()]
    if not include_handled:
        terms.append(f"!{LABEL_HANDLED}")
    return ",".join(terms)


def matches_identity(job: Mapping[str, Any], dag_id: str, task_id: str, run_id: str, map_index: int) -> bool:
    """Whether a job found by label selector really belongs to this task instance.

    Hashed label values could in principle collide; the full values in the annotations cannot.
    Jobs without our annotations (created by hand with copied labels) are accepted on labels alone.
    """
    annotations = (job.get("metadata") or {}).get("annotations") or {}
    expected = identity_annotations(dag_id, task_id, run_id, map_index, 0)
    expected.pop(ANNOTATION_TRY_NUMBER)
    return all(annotations.get(key, value) == value for key, value in expected.items())
