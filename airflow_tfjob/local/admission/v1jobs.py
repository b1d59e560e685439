"""What a real cluster checks before it stores a kubeflow.org/v1 job (TFJob, PyTorchJob, XGBoostJob,
JAXJob, PaddleJob).

Two separate stages, in the order the real API server runs them:
1. the CRD's OpenAPI schema (jobschema.py: types, `required: [<specKey>]`, the immutable
   `schedulingPolicy.queue`, and the schema's defaults such as `protocol: TCP` on container ports and
   `runPolicy.suspend: false`): failures are HTTP 422 Invalid from the API server itself;
2. the training-operator's validating webhook for the kind (webhooks.py): failures are HTTP 403
   Forbidden with `admission webhook "validator.<singular>.training-operator.kubeflow.org" denied the
   request: ...`; its warnings go back as HTTP Warning headers (warnings.py).

The stored job is otherwise exactly what the client sent: the operator's own defaults (replicas,
restartPolicy, cleanPodPolicy, port) are applied in memory by the controller, never persisted.
"""

from __future__ import annotations

from airflow_tfjob.jobs.kinds import GROUP, KINDS, VERSION, JobKind
from airflow_tfjob.local.admission import warnings
from airflow_tfjob.local.admission.schemacheck import check
from airflow_tfjob.local.admission.webhooks import aggregate, webhook_errors, webhook_name
from airflow_tfjob.local.model.jobschema import QUEUE_IMMUTABLE, job_schema
from airflow_tfjob.local.model.resources import ApiError, JsonDict, ResourceType, invalid

_BY_PLURAL = {k.plural: k for k in KINDS}


def _resource(kind: JobKind) -> ResourceType:
    """The kind as the 422's message names it (`PyTorchJob.kubeflow.org "x" is invalid: ...`)."""
    return ResourceType(kind.plural, kind.singular, kind.kind, GROUP, VERSION, True, True)


def _queue(obj: JsonDict | None) -> object:
    policy = (((obj or {}).get("spec") or {}).get("runPolicy") or {}).get("schedulingPolicy")
    return policy.get("queue") if isinstance(policy, dict) else None


def schema_errors(kind: JobKind, obj: JsonDict, old: JsonDict | None) -> list[tuple[str, str, str]]:
    """(field, reason, detail) for every CRD-schema violation, in document order."""
    # The API server writes the schema's defaults while decoding, before it validates.
    errors = check(obj, job_schema(kind), types_from=("spec",), defaults=True).invalid
    # The CEL transition rule `self == oldSelf` runs only when both versions have the field.
    if old is not None and _queue(old) is not None and _queue(obj) is not None and _queue(old) != _queue(obj):
        path = "spec.runPolicy.schedulingPolicy.queue"
        errors.append((path, "FieldValueInvalid", f'Invalid value: "string": {QUEUE_IMMUTABLE}'))
    return errors


class JobAdmission:
    """Admission chain for the store: per job kind, CRD schema and its defaults (422), webhook (403)."""

    def admit(self, rtype: str, operation: str, obj: JsonDict, old: JsonDict | None) -> None:
        kind = _BY_PLURAL.get(rtype)
        if kind is None:
            return
        name = obj.get("metadata", {}).get("name", "")
        errors = schema_errors(kind, obj, old)
        if errors:
            raise invalid(_resource(kind), name, errors)
        denied, warned = webhook_errors(kind, obj, old)
        if denied:
            raise ApiError(403, "Forbidden",
                           f'admission webhook "{webhook_name(kind)}" denied the request: {aggregate(denied)}')
        warnings.add(*warned)


# The name the store and the tests used when TFJob was the only kind.
TFJobAdmission = JobAdmission
