"""A task's job (TFJob or another kubeflow.org/v1 kind): found again (reattach or report an earlier try's job) or created exactly once.

Finding again: the job a try created is recorded in the task_state_store (durable identity) and
carries identity labels; :func:`find_or_create` collects the task instance's earlier jobs both ways
and acts on :func:`airflow_tfjob.operators.identity.decide` (pure): reattach, report, or create.

Creating exactly once, even when the API loses the reply to the create call:

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

from airflow_tfjob.build import naming
from airflow_tfjob.build.limits import shown_json
from airflow_tfjob.build.secrets import redact
from airflow_tfjob.build.submission import submission_manifest
from airflow_tfjob.constants import ANNOTATION_PREFIX, JOB_STATE_KEY, LABEL_HANDLED, LABEL_MANAGED
from airflow_tfjob.follow.failure import TrainingJobFailed, refused_spec, user
from airflow_tfjob.follow.summary import job_summary
from airflow_tfjob.hooks.common import api_status, status_of
from airflow_tfjob.hooks.retry import AmbiguousCreate, api_status_code
from airflow_tfjob.jobs.kinds import JobKind
from airflow_tfjob.jobs.status import interpret, job_kind, summarise
from airflow_tfjob.operators import identity
from airflow_tfjob.version_compat import AirflowException

if TYPE_CHECKING:
    from airflow.sdk import Context

    from airflow_tfjob.hooks.sync import KubeflowJobHook

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
    hook: KubeflowJobHook,
    body: Mapping[str, Any],
    *,
    log: Callable[..., None],
    timeout: float,
) -> dict[str, Any]:
    """Create `body` (which carries a submission id) or adopt the job an earlier attempt created.

    Bounded by `timeout` seconds (the hook's api_retry_timeout): a server that keeps answering
    ambiguously is given as long as any other call.
    """
    meta = body["metadata"]
    name, namespace, sid = meta["name"], meta["namespace"], submission_id(body)
    kind = job_kind(body)
    deadline = time.monotonic() + timeout
    while True:
        try:
            return hook.create_job(kind, dict(body), namespace)
        except AmbiguousCreate as error:
            what = str(error)
        except Exception as error:
            if api_status_code(error) != 409:
                raise
            what = "409 AlreadyExists"
        existing = hook.find_job(kind, name, namespace)
        if existing is not None and sid is not None and submission_id(existing) == sid:
            log(
                "Create of %s %s/%s had no clear answer (%s); it was created: adopting it",
                kind.kind,
                namespace,
                name,
                what,
            )
            return existing
        if existing is not None:
            raise AirflowException(
                f"A {kind.kind} named {namespace}/{name} already exists and was not created by this task "
                f"instance (submission {submission_id(existing) or 'unknown'}, expected {sid}): nothing "
                f"was submitted. Choose another `name`, or delete that {kind.kind} first "
                f"(kubectl delete {kind.singular} -n {namespace} {name})."
            )
        if time.monotonic() >= deadline:
            raise AirflowException(
                f"Could not create {kind.kind} {namespace}/{name}: the API kept failing ({what}) for "
                f"{timeout:.0f} s (api_retry_timeout) and the job does not exist"
            )
        log(
            "Create of %s %s/%s had no clear answer (%s) and it does not exist: creating again",
            kind.kind,
            namespace,
            name,
            what,
        )
        time.sleep(0.5)


# ---------------------------------------------------------------- the task instance's identity and record


def task_identity(context: Context) -> tuple[str, str, str, int, int]:
    """(dag_id, task_id, run_id, map_index, try_number) of the running task instance."""
    ti = context["ti"]
    map_index = getattr(ti, "map_index", -1)
    return (
        ti.dag_id,
        ti.task_id,
        ti.run_id,
        -1 if map_index is None else int(map_index),
        int(getattr(ti, "try_number", 1) or 1),
    )


def stamp_identity(
    tfjob: dict[str, Any], context: Context, *, name: str | None, max_length: int | None = None
) -> None:
    """Name the job (``name``, the manifest's, or one derived from the task instance, of at most
    ``max_length`` characters when given) and label it with the task instance's identity, by which a
    later try finds it again."""
    dag_id, task_id, run_id, map_index, try_number = task_identity(context)
    metadata = tfjob.setdefault("metadata", {})
    if name:
        metadata["name"] = name
    elif not metadata.get("name"):
        replicas = (tfjob.get("spec") or {}).get(job_kind(tfjob).spec_key) or {}
        metadata["name"] = naming.job_name(
            dag_id, task_id, run_id, map_index, try_number,
            max_length=max_length or naming.max_name_length(replicas),
        )  # fmt: skip
    metadata.setdefault("labels", {}).update(
        naming.identity_labels(dag_id, task_id, run_id, map_index, try_number)
    )
    metadata.setdefault("annotations", {}).update(
        naming.identity_annotations(dag_id, task_id, run_id, map_index, try_number)
    )


def state_set(context: Context, value: dict[str, Any]) -> None:
    store = context.get("task_state_store")
    if store is not None:
        store.set(JOB_STATE_KEY, value)


def state_get(context: Context) -> dict[str, Any] | None:
    store = context.get("task_state_store")
    if store is None:
        return None
    value = store.get(JOB_STATE_KEY)
    return value if isinstance(value, dict) and value.get("name") and value.get("namespace") else None


def remember(context: Context, job: Mapping[str, Any]) -> None:
    meta = job["metadata"]
    state_set(context, {"name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"]})


# ---------------------------------------------------------------- find again or create


def find_or_create(
    hook: KubeflowJobHook,
    tfjob: dict[str, Any],
    context: Context,
    *,
    log: Any,
    on_submit: Callable[[str, str], None],
) -> dict[str, Any]:
    """The task instance's TFJob: an earlier try's job to reattach to or report, or a new one.

    Never a second job for one outcome, never a 409: the earlier tries' jobs are found through the
    task_state_store (durable identity), then through the identity labels. ``on_submit(name,
    namespace)`` is called just before a create, so that a kill during the call finds the job.
    """
    try_number = task_identity(context)[4]
    namespace = tfjob["metadata"]["namespace"]
    kind = job_kind(tfjob)
    found = earlier_jobs(hook, namespace, context, kind)
    decision = identity.decide(found, try_number)
    if found:
        log.info("Earlier %ss of this task instance: %s", kind.kind, decision.reason)
    for old_name in decision.mark_handled:
        log.info("Marking the earlier %s %s/%s as handled", kind.kind, namespace, old_name)
        hook.patch_job(kind, old_name, namespace, {"metadata": {"labels": {LABEL_HANDLED: "true"}}})
    for old_name in decision.delete:
        # Never two live jobs for one task instance: an abandoned one still running is stopped.
        log.info("Deleting the abandoned %s %s/%s", kind.kind, namespace, old_name)
        hook.delete_job(kind, old_name, namespace, propagation="Foreground")
    if decision.action in ("reattach", "report") and decision.job is not None:
        job = dict(decision.job)
        log.info(
            "%s %s %s/%s (%s)",
            "Reattaching to" if decision.action == "reattach" else "Reporting the result of",
            kind.kind,
            namespace,
            job["metadata"]["name"],
            summarise(interpret(job)),
        )
    else:
        job = create(hook, tfjob, context, log=log, on_submit=on_submit)
    remember(context, job)
    return job


def earlier_jobs(hook: KubeflowJobHook, namespace: str, context: Context, kind: JobKind) -> list[dict[str, Any]]:
    """The unhandled jobs (of `kind`) of this task instance: the recorded one, then those its labels find."""
    dag_id, task_id, run_id, map_index, _ = task_identity(context)
    jobs: dict[str, dict[str, Any]] = {}
    recorded = state_get(context)
    if recorded:
        job = hook.find_job(kind, recorded["name"], recorded["namespace"])
        # A uid, or (the worker died before the create call answered) the submission id.
        if job is not None and (
            job["metadata"].get("uid") == recorded.get("uid")
            or (recorded.get("submission") and submission_id(job) == recorded.get("submission"))
        ):
            if LABEL_HANDLED not in (job["metadata"].get("labels") or {}):
                jobs[job["metadata"]["uid"]] = job
    selector = naming.identity_selector(dag_id, task_id, run_id, map_index)
    for job in hook.list_jobs(kind, namespace, selector):
        if naming.matches_identity(job, dag_id, task_id, run_id, map_index):
            jobs.setdefault(job["metadata"]["uid"], job)
    return list(jobs.values())


def running_job_of_this_try(
    hook: KubeflowJobHook, context: Context, namespace: str, kind: JobKind
) -> tuple[str, str] | None:
    """The recorded job, else an unfinished one the identity labels find (for a failed trigger)."""
    recorded = state_get(context)
    if recorded:
        return recorded["name"], recorded["namespace"]
    dag_id, task_id, run_id, map_index, _ = task_identity(context)
    selector = naming.identity_selector(dag_id, task_id, run_id, map_index)
    for job in hook.list_jobs(kind, namespace, selector):
        if not interpret(job).finished:
            return job["metadata"]["name"], job["metadata"]["namespace"]
    return None


def create(
    hook: KubeflowJobHook,
    tfjob: dict[str, Any],
    context: Context,
    *,
    log: Any,
    on_submit: Callable[[str, str], None],
) -> dict[str, Any]:
    """Submit the task's manifest (cleanup intent in annotations, a submission id) exactly once."""
    dag_id, task_id, run_id, map_index, _ = task_identity(context)
    name, namespace = tfjob["metadata"]["name"], tfjob["metadata"]["namespace"]
    kind = job_kind(tfjob)
    existing = hook.find_job(kind, name, namespace)
    if existing is not None:
        labels = existing["metadata"].get("labels") or {}
        ours = labels.get(LABEL_MANAGED) == "true" and naming.matches_identity(
            existing, dag_id, task_id, run_id, map_index
        )
        if not ours or LABEL_HANDLED not in labels:
            raise AirflowException(
                f"A {kind.kind} named {namespace}/{name} already exists and was not created by this task "
                f"instance (or is still in use): nothing was submitted. Choose another `name`, or "
                f"delete that {kind.kind} first (kubectl delete {kind.singular} -n {namespace} {name})."
            )
        # A fixed `name` reused by a later try: the earlier, handled job makes way for the new one.
        log.info("Deleting the handled %s %s/%s to reuse its name", kind.kind, namespace, name)
        hook.delete_job(kind, name, namespace, propagation="Foreground")
        if not hook.wait_for_job_deletion(kind, name, namespace, timeout=120):
            raise AirflowException(f"{kind.kind} {namespace}/{name} was not deleted within 120 s")
    body, intent = submission_manifest(tfjob)
    sid = new_submission_id()
    body = with_submission_id(body, sid)
    # Recorded before the call: a kill, or a crash, between the create and its answer still finds
    # the job (by name for on_kill, by submission id for the next try).
    on_submit(name, namespace)
    state_set(context, {"name": name, "namespace": namespace, "uid": None, "submission": sid})
    # One line at INFO (what a person reads while the job starts); the manifest itself at DEBUG.
    log.info(
        "Creating %s (cleanPodPolicy %s and TTL %s applied by this task once logs are read; "
        "the manifest is logged at DEBUG)",
        job_summary(body),
        intent.clean_pod_policy,
        intent.ttl_seconds_after_finished,
    )
    log.debug("%s %s/%s manifest:\n%s", kind.kind, namespace, name, shown_json(redact(body)))
    return create_or_adopt(hook, body, log=log.warning, timeout=hook.retry_policy.timeout)


# ---------------------------------------------------------------- a refused submission


def refusal(error: BaseException, explained: str | None, doing: str) -> AirflowException | None:
    """The failure a refused submission raises, with its cause for the retry policy: the job itself
    refused (422 Invalid, 400, an admission webhook's denial) or a part the cluster lacks
    (``explained`` by the preflight's checks); None for any other error (raised as it is)."""
    status = api_status(error)
    said = str(status_of(error).get("message") or getattr(error, "reason", "") or error).strip()
    if explained is not None:
        denied = "denied the request" in said and "Missing:" not in explained
        cause = refused_spec(status, said) if denied else user("ClusterRefused", explained.splitlines()[0])
        return TrainingJobFailed(explained, cause)
    if status in (400, 422):
        return TrainingJobFailed(f"The cluster refused {doing} ({status}): {said}", refused_spec(status, said))
    return None
