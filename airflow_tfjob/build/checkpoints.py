"""Where a task's checkpoints live (``checkpoint=``: a claim or an object-storage prefix, one directory
per task instance), and what every replica is told about them (pure).

``checkpoint=`` names a store: a PersistentVolumeClaim (``pvc://<claim>/<path>``) or an object-storage
URI prefix (``s3://bucket/prefix``, ``gs://...``, ``file:///shared/dir``; a dict ``{"uri": ...,
"conn_id": ...}`` adds the Airflow connection the worker lists it with). From it and the task
instance the provider derives one directory per task instance::

    <store>/<dag_id>/<task_id>/<run_id>/<map-N | unmapped>

The same for every try of the task instance and for every Kueue preemption and resumption of its job
(the pods are recreated from the same template), distinct per mapped index. The run is part of it: a
new DAG run for the same logical date is a new run id and trains from scratch, while a cleared task
instance keeps its run id and resumes. The directory reaches every replica as ``CHECKPOINT_DIR``, and
the newest checkpoint known when the job is created as ``RESUME_FROM`` (empty when none).

A claim is mounted at :data:`MOUNT_ROOT`/<claim> in every replica (each job API's adapter says how:
``with_volume``); an object-storage directory is handed over as its URI, which the
training code writes to with its own credentials.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_tfjob.build.checker import JobValidationError

#: Where a checkpoint claim is mounted in every replica (under it, the claim's name).
MOUNT_ROOT = "/mnt/tfjob-checkpoints"
#: The env variables every replica gets.
ENV_DIR = "CHECKPOINT_DIR"
ENV_RESUME = "RESUME_FROM"
ENV_NAMES = (ENV_DIR, ENV_RESUME)
#: The pod volume of a checkpoint claim.
VOLUME_NAME = "tfjob-checkpoints"

_SCHEME = re.compile(r"^([a-z][a-z0-9+.-]*)://(.*)$")
# A claim name is a DNS-1123 subdomain; a path segment of the location keeps to portable characters.
_CLAIM = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_FIX = (
    "use checkpoint='pvc://<claim>/<path>' (a PersistentVolumeClaim every replica mounts), an "
    "object-storage prefix such as 's3://<bucket>/<prefix>', 'gs://<bucket>/<prefix>' or "
    "'file:///<shared directory>', or {'uri': ..., 'conn_id': ...}"
)


@dataclass(frozen=True)
class CheckpointStore:
    """The store ``checkpoint=`` names (checked), before the task instance is known."""

    uri: str  # as given, without trailing "/"
    claim: str | None = None  # pvc:// : the claim
    path: str = ""  # pvc:// : the path inside the claim ("" for its root)
    conn_id: str | None = None  # object storage: the Airflow connection the worker lists it with

    @property
    def is_pvc(self) -> bool:
        return self.claim is not None

    @property
    def mount_path(self) -> str | None:
        """Where every replica mounts the claim (None: object storage, nothing mounted)."""
        return f"{MOUNT_ROOT}/{self.claim}" if self.claim is not None else None

    @property
    def root(self) -> str:
        """The store as the replicas address it: the mounted path, or the URI prefix."""
        if self.mount_path is not None:
            return f"{self.mount_path}/{self.path}".rstrip("/")
        return self.uri

    def claim_volume(self) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """The pod volume of the claim and the training container's mount of it (None: object storage)."""
        if self.claim is None:
            return None
        return (
            {"name": VOLUME_NAME, "persistentVolumeClaim": {"claimName": self.claim}},
            {"name": VOLUME_NAME, "mountPath": self.mount_path},
        )


def _refuse(field: str, problem: str) -> JobValidationError:
    return JobValidationError(field, problem, _FIX)


def parse_store(value: Any, field: str = "checkpoint") -> CheckpointStore | None:
    """The store ``value`` names, or None when it names none; JobValidationError naming ``field`` otherwise."""
    if value is None or value == "":
        return None
    conn_id: str | None = None
    if isinstance(value, Mapping):
        unknown = sorted(set(value) - {"uri", "conn_id"})
        if unknown:
            raise _refuse(field, f"has unknown keys {unknown}")
        conn_id = value.get("conn_id")
        if conn_id is not None and (not isinstance(conn_id, str) or not conn_id):
            raise _refuse(f"{field}.conn_id", f"{conn_id!r} is not a connection id")
        value = value.get("uri")
        field = f"{field}.uri"
    if not isinstance(value, str):
        raise _refuse(field, f"{value!r} is not a checkpoint location")
    match = _SCHEME.match(value.strip())
    if match is None:
        raise _refuse(field, f"{value!r} has no scheme (a bare path means nothing to the replicas' pods)")
    scheme, rest = match.group(1), match.group(2).rstrip("/")
    uri = f"{scheme}://{rest}"
    if scheme == "pvc":
        claim, _, path = rest.partition("/")
        if not _CLAIM.match(claim) or len(claim) > 253:
            raise _refuse(field, f"{claim!r} in {value!r} is not a PersistentVolumeClaim name")
        if conn_id is not None:
            raise _refuse(
                f"{field.rsplit('.', 1)[0]}.conn_id", "means nothing for a claim (the worker never reads it)"
            )
        if ".." in path.split("/"):
            raise _refuse(field, f"{value!r} climbs out of the claim with '..'")
        return CheckpointStore(uri, claim=claim, path=path.strip("/"))
    if scheme == "file":
        if not rest.startswith("/") or rest == "":
            raise _refuse(field, f"{value!r} is not an absolute file:/// path")
    elif not rest or rest.startswith("/"):
        raise _refuse(field, f"{value!r} names no bucket or container")
    return CheckpointStore(uri, conn_id=conn_id)


def _segment(value: str) -> str:
    """A path segment that every store takes; a value that had to change gets a short digest, so that
    two run ids differing only in those characters never share a directory."""
    safe = _UNSAFE.sub("_", value).strip(".") or "_"
    if safe == value:
        return safe
    return f"{safe}-{hashlib.sha256(value.encode()).hexdigest()[:8]}"


def task_key(dag_id: str, task_id: str, run_id: str, map_index: int) -> str:
    """The task instance's part of the location: the same for every try, one per mapped index."""
    mapped = "unmapped" if map_index is None or int(map_index) < 0 else f"map-{int(map_index)}"
    return "/".join((_segment(dag_id), _segment(task_id), _segment(run_id), mapped))


def location(store: CheckpointStore, dag_id: str, task_id: str, run_id: str, map_index: int) -> str:
    """``CHECKPOINT_DIR`` of the task instance, as its replicas address it."""
    return f"{store.root}/{task_key(dag_id, task_id, run_id, map_index)}"


def replica_env(directory: str, resume_from: str | None) -> dict[str, str]:
    """The variables every replica gets (``RESUME_FROM`` empty when there is nothing to resume)."""
    return {ENV_DIR: directory, ENV_RESUME: resume_from or ""}


def with_checkpoint_env(arguments: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    """The manifest arguments with the checkpoint's variables added to ``env``, the parameter every job
    API's builder applies to every replica (the claim's mount is the adapter's ``with_volume``). A
    variable the user set under the same name is refused."""
    out = dict(arguments)
    given = out.get("env")
    if isinstance(given, Mapping):
        taken = [name for name in env if name in given]
        merged: Any = {**given, **env}
    elif given is None:
        taken, merged = [], dict(env)
    else:
        names = [item.get("name") for item in given if isinstance(item, Mapping)]
        taken = [name for name in env if name in names]
        merged = [*given, *({"name": k, "value": v} for k, v in env.items())]
    if taken:
        raise JobValidationError(
            "env",
            f"sets {', '.join(taken)}, which checkpoint= sets for every replica",
            "remove it from env: the provider exports the task's checkpoint directory and the checkpoint "
            "to resume from",
        )
    out["env"] = merged
    return out
