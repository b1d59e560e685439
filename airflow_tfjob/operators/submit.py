"""Create a task's TFJob exactly once, even when the API loses the reply to the create call.

A create can fail after the server acted on it: the reply is lost, the connection resets, a proxy
answers 5xx or 504. Sending it again would meet a 409, and giving up would leave a training job that
nobody follows or cleans. So every submission carries a submission id (an annotation chosen before
the first attempt), and after an ambiguous failure or a 409 the job is read back by its
deterministic name: carrying our submission id, it is adopted; carrying another, it belongs to
someone else and the task fails naming it; absent, the create is sent again.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from airflow.sdk.exceptions import AirflowException

from airflow_tfjob.constants import ANNOTATION_PREFIX

if TYPE_CHECKING:
    from airflow_tfjob.hooks.tfjob import TFJobHook

#: Annotation holding the id of the submission that created the job (one per create call sequence).
ANNOTATION_SUBMISSION = ANNOTATION_PREFIX + "submission-id"


def new_submission_id() -> str:
    return uuid.uuid4().hex


def submission_id(job: Mapping[str, Any]) -> str | None:
    value = ((job.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_SUBMISSION)
    return str(value) if value else None


def with_submission_id(body: Mapping[str, Any], sid: str) -> dict[str, Any]:
    out = dict(body)
    metadata = dict(out.get("metadata") or {})
    metadata["annotations"] = {**(metadata.get("annotations") or {}), ANNOTATION_SUBMISSION: sid}
    out["metadata"] = metadata
    return out


def create_or_adopt(
    hook: TFJobHook,
    body: Mapping[str, Any],
    *,
    log: Callable[..., None],
    timeout: float,
) -> dict[str, Any]:
    """Create `body` (which carries a submission id) or adopt the job an earlier attempt created.

    Bounded by `timeout` seconds (the hook's api_retry_timeout): a server that keeps answering
    ambiguously is given as long as any other call.
    """
    from airflow_tfjob.hooks.retry import AmbiguousCreate, api_status_code

    meta = body["metadata"]
    name, namespace, sid = meta["name"], meta["namespace"], submission_id(body)
    deadline = time.monotonic() + timeout
    while True:
        try:
            return hook.create_tfjob(dict(body), namespace)
        except AmbiguousCreate as error:
            what = str(error)
        except Exception as error:
            if api_status_code(error) != 409:
                raise
            what = "409 AlreadyExists"
        existing = hook.find_tfjob(name, namespace)
        if existing is not None and sid is not None and submission_id(existing) == sid:
            log(
                "Create of TFJob %s/%s had no clear answer (%s); it was created: adopting it",
                namespace,
                name,
                what,
            )
            return existing
        if existing is not None:
            raise AirflowException(
                f"A TFJob named {namespace}/{name} already exists and was not created by this task "
                f"instance (submission {submission_id(existing) or 'unknown'}, expected {sid}): nothing "
                f"was submitted. Choose another `name`, or delete that TFJob first "
                f"(kubectl delete tfjob -n {namespace} {name})."
            )
        if time.monotonic() >= deadline:
            raise AirflowException(
                f"Could not create TFJob {namespace}/{name}: the API kept failing ({what}) for "
                f"{timeout:.0f} s (api_retry_timeout) and the job does not exist"
            )
        log(
            "Create of TFJob %s/%s had no clear answer (%s) and it does not exist: creating again",
            namespace,
            name,
            what,
        )
        time.sleep(0.5)
