"""The training-operator v1.9.4 validating webhooks, one rule list for the five kubeflow.org/v1 kinds.

Read from `pkg/webhooks/<kind>/*_webhook.go` and `pkg/common/util/webhooks.go` (ground truth:
docs/reference/kubeflow-v1-kinds.md §1.5, §2.4, §3.4, §4.4 and the TFJob reference §1.3). Every kind
runs the same skeleton (name, runPolicy.managedBy, replica specs, containers); what differs is read
from the kind's row in `airflow_tfjob.jobs.kinds` and from the few quirks below, which are the operator's
own (bugs included) and so live here rather than in the provider's kind table.

Messages are Go's `field.Error` renderings (`<path>: <type>: <detail>`). Go walks the replica-spec map
in random order; this walks it in the manifest's order, so that several errors come out the same way
every time.
"""

from __future__ import annotations

import re
from typing import Any

from airflow_tfjob.jobs.kinds import PADDLEJOB, PYTORCHJOB, TFJOB, JobKind
from airflow_tfjob.local.model.resources import JsonDict

MANAGED_BY_VALUES = ("kubeflow.org/training-operator", "kueue.x-k8s.io/multikueue")
_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS1035_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
    "character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for "
    "validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)

# ValidateUpdate of PyTorchJob passes the new object as the old one, so managedBy's immutability is
# never enforced for it; JAXJob's webhook never looks at runPolicy at all (kinds.checks_managed_by).
_IMMUTABLE_MANAGED_BY_UNCHECKED = (PYTORCHJOB.kind,)
# PaddleJob formats the default container's name with %q, the others with %s.
_QUOTED_CONTAINER = (PADDLEJOB.kind,)


def webhook_name(kind: JobKind) -> str:
    return f"validator.{kind.singular}.training-operator.kubeflow.org"


def _quoted(values: tuple[str, ...]) -> str:
    return ", ".join(f'"{v}"' for v in values)


def _go_value(value: Any) -> str:
    """A value as `field.Invalid` prints it (%#v of the Go value)."""
    if isinstance(value, str):
        return f'"{value}"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (dict, list)):
        return "map[string]interface {}" if isinstance(value, dict) else "[]interface {}"
    return str(value)


def _name_errors(obj: JsonDict) -> list[str]:
    name = (obj.get("metadata") or {}).get("name", "")
    reasons = []
    if len(name) > 63:
        reasons.append("must be no more than 63 characters")
    if not _DNS1035.match(name):
        reasons.append(_DNS1035_MSG)
    return [f'metadata.name: Invalid value: "{name}": should match: {",".join(reasons)}'] if reasons else []


def _managed_by(obj: JsonDict | None) -> Any:
    return (((obj or {}).get("spec") or {}).get("runPolicy") or {}).get("managedBy")


def _run_policy_errors(kind: JobKind, obj: JsonDict, old: JsonDict | None) -> list[str]:
    """ValidateRunPolicyUpdate (on update), then ValidateRunPolicy, in the webhooks' order."""
    if not kind.checks_managed_by:
        return []
    errors: list[str] = []
    new = _managed_by(obj)
    if old is not None and kind.kind not in _IMMUTABLE_MANAGED_BY_UNCHECKED and _managed_by(old) != new:
        errors.append(f"spec.runPolicy.managedBy: Invalid value: {_go_value(new)}: field is immutable")
    if new is not None and new not in MANAGED_BY_VALUES:
        errors.append(f'spec.runPolicy.managedBy: Unsupported value: "{new}": supported values: '
                      f"{_quoted(MANAGED_BY_VALUES)}")
    return errors


def _pytorch_elastic(spec: JsonDict, warnings: list[str]) -> list[str]:
    """PyTorchJob's validateSpec: elasticPolicy needs a Worker; the deprecated nProcPerNode warns."""
    elastic = spec.get("elasticPolicy")
    if elastic is None:
        return []
    errors = []
    if "Worker" not in (spec.get(PYTORCHJOB.spec_key) or {}):
        errors.append(f"spec.{PYTORCHJOB.spec_key}[Worker]: Required value: must be configured if elastic "
                      "policy is used")
    if isinstance(elastic, dict) and elastic.get("nProcPerNode") is not None:
        warnings.append("spec.elasticPolicy.nProcPerNode is deprecated, use spec.nprocPerNode instead")
        if spec.get("nprocPerNode") is not None:
            errors.append("spec.elasticPolicy.nProcPerNode: Forbidden: must not be used with spec.nprocPerNode")
    return errors


def _replica_errors(kind: JobKind, rtype: str, rspec: Any) -> list[str]:
    """The checks the webhook's loop makes on one replica spec, in its order."""
    base = f"spec.{kind.spec_key}"
    role = f"{base}[{rtype}]"
    containers_path = f"{role}.template.spec.containers"
    errors: list[str] = []
    if kind.exact_case_keys and rtype not in kind.replica_types:
        errors.append(f'{role}: Unsupported value: "{rtype}": supported values: {_quoted(kind.replica_types)}')
    rspec = rspec if isinstance(rspec, dict) else {}
    containers = ((rspec.get("template") or {}).get("spec") or {}).get("containers") or []
    if not containers:
        errors.append(f"{containers_path}: Required value: must be specified")
    for index, container in enumerate(containers):
        if not (container or {}).get("image"):
            errors.append(f"{containers_path}[{index}].image: Required value: must be required")
    if not any((c or {}).get("name") == kind.container for c in containers):
        name = f'"{kind.container}"' if kind.kind in _QUOTED_CONTAINER else kind.container
        errors.append(f"{containers_path}: Required value: must have at least one container with name {name}")
    replicas = rspec.get("replicas")
    if rtype in kind.single_replica_types:
        if replicas != 1:
            errors.append(f"{role}.replicas: Forbidden: must be 1")
    elif kind is PYTORCHJOB and replicas is not None and replicas < 1:
        errors.append(f"{role}.replicas: Forbidden: must be at least 1")
    return errors


def webhook_errors(kind: JobKind, obj: JsonDict, old: JsonDict | None) -> tuple[list[str], list[str]]:
    """(field errors, warnings) of the kind's validating webhook for a create (old None) or an update."""
    warnings: list[str] = []
    errors = _name_errors(obj) + _run_policy_errors(kind, obj, old)
    spec = obj.get("spec") or {}
    if kind is PYTORCHJOB:
        errors += _pytorch_elastic(spec, warnings)
    replica_specs = spec.get(kind.spec_key)
    if replica_specs is None:
        errors.append(f"spec.{kind.spec_key}: Required value: must be required")
    for rtype, rspec in (replica_specs or {}).items():
        errors += _replica_errors(kind, rtype, rspec)
    present = set(replica_specs or {})
    if kind is TFJOB and len(present & {"Chief", "Master"}) > 1:
        errors.append(f"spec.{kind.spec_key}: Forbidden: must not have more than 1 Chief or Master role")
    for required in kind.required_types:
        if required not in present:
            errors.append(f"spec.{kind.spec_key}[{required}]: Required value: must be present")
    return errors, warnings


def aggregate(messages: list[str]) -> str:
    """Go's utilerrors aggregate: one message as is, several de-duplicated in brackets."""
    unique = list(dict.fromkeys(messages))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"

