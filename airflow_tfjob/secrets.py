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
import json
from collections.abc import Iterable, Mapping
from typing import Any

from airflow_tfjob.constants import ANNOTATION_SECRET_ENV
from airflow_tfjob.kinds import KINDS

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
    """Every env entry of every container and init container of every replica type.

    Replica specs are read under every kind's spec key, so a manifest whose kind is wrong or
    unknown still has its secrets hidden.
    """
    spec = manifest.get("spec") or {}
    spec = spec if isinstance(spec, Mapping) else {}
    replicas = []
    for kind in KINDS:
        specs = spec.get(kind.spec_key) or {}
        replicas += list(specs.values()) if isinstance(specs, Mapping) else []
    trainer = spec.get("trainer")  # a TrainJob's (Trainer v2): one env for every node
    if isinstance(trainer, Mapping) and isinstance(trainer.get("env"), list):
        yield from (entry for entry in trainer["env"] if isinstance(entry, dict))
    yield from _patched_env(spec.get("runtimePatches"))
    for replica in replicas:
        if not isinstance(replica, Mapping):
            continue
        template = replica.get("template") or {}
        pod = template.get("spec") or {} if isinstance(template, Mapping) else {}
        for key in ("containers", "initContainers"):
            containers = pod.get(key) or [] if isinstance(pod, Mapping) else []
            for container in containers if isinstance(containers, list) else []:
                env = container.get("env") or [] if isinstance(container, Mapping) else []
                for entry in env if isinstance(env, list) else []:
                    if isinstance(entry, dict):
                        yield entry


def _patched_env(patches: Any) -> Iterable[dict[str, Any]]:
    """The env a TrainJob's runtime patches give containers (a TFJob run as a TrainJob: chief and PS)."""
    for patch in patches if isinstance(patches, list) else []:
        template = _path(patch, "trainingRuntimeSpec", "template", "spec")
        for rjob in template.get("replicatedJobs") or [] if isinstance(template.get("replicatedJobs"), list) else []:
            pod = _path(rjob, "template", "spec", "template", "spec")
            for container in pod.get("containers") or [] if isinstance(pod.get("containers"), list) else []:
                env = container.get("env") if isinstance(container, Mapping) else None
                yield from (entry for entry in env or [] if isinstance(entry, dict))


def _path(value: Any, *keys: str) -> Mapping[str, Any]:
    for key in keys:
        value = value.get(key) if isinstance(value, Mapping) else None
    return value if isinstance(value, Mapping) else {}


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


def mask_values(values: Iterable[Any]) -> None:
    """Register each value with Airflow's secrets masker (task logs, triggerer logs, rendered fields)."""
    from airflow.sdk.log import mask_secret

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
    try:
        from airflow.sdk.log import redact
    except ImportError:  # pragma: no cover - a task SDK without it masks in its own pipeline
        return text
    return str(redact(text))


async def amask_job_secrets(job: Mapping[str, Any] | None) -> None:
    """Register a live job's secret env values with the masker, from async code (the triggerer).

    The trigger's kwargs are stored in the metadata database, so they never carry the values: the
    job object in the cluster does, and the triggerer reads it.
    """
    from airflow.sdk.log import amask_secret

    for value in secret_values(job or {}):
        if len(value) >= MIN_MASKED_LENGTH:
            await amask_secret(value)


__all__ = [
    "REDACTED",
    "amask_job_secrets",
    "decode_names",
    "encode_names",
    "mask_values",
    "masked",
    "redact",
    "secret_env_names",
    "secret_values",
    "with_secret_names",
]
