"""The progress status of Kubeflow Trainer v2.3.0 behind its alpha `TrainJobStatus` feature gate
(docs/reference/trainjob-behaviour.md §4.7, §7), off by default as upstream: `LocalCluster(feature_gates=
{"TrainJobStatus": True})`, `tfjob-local serve --feature-gates TrainJobStatus=true`.

When on, every container of a TrainJob's trainer pods gets KUBEFLOW_TRAINER_SERVER_URL,
KUBEFLOW_TRAINER_SERVER_CA_CERT and KUBEFLOW_TRAINER_SERVER_TOKEN, and a POST of
`{"trainerStatus": {...}}` with `Authorization: Bearer <token>` to that URL writes `status.trainerStatus`
(the whole object replaced; the controllers carry it through). What the SDK's
`kubeflow.trainer.update_trainjob_status(...)` sends works unchanged. Local differences: the endpoint is
the local API server itself (the same host and port; upstream a status server on port 10443 of the
controller), over plain HTTP unless token authentication is on (then the cluster's CA is the CA file);
the token is a random one per TrainJob in a file of the cluster's work directory, not a projected
service-account token verified by OIDC, and it is only accepted on a cluster without token
authentication (the authentication middleware wants a cluster token).
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from pathlib import Path

from aiohttp import web

from airflow_tfjob.local.resources import TRAINER_GROUP, TRAINER_VERSION, ApiError, JsonDict, clone
from airflow_tfjob.local.store import Store

GATE = "TrainJobStatus"
MAX_BODY = 64 * 1024
URL_ENV, CA_ENV, TOKEN_ENV = ("KUBEFLOW_TRAINER_SERVER_URL", "KUBEFLOW_TRAINER_SERVER_CA_CERT",
                              "KUBEFLOW_TRAINER_SERVER_TOKEN")


def _status(code: int, reason: str, message: str) -> web.Response:
    body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}
    return web.json_response(body, status=code)


def payload_errors(status: JsonDict) -> list[str]:
    """The CRD's rules on trainerStatus (§7)."""
    errors = []
    if not status.get("lastUpdatedTime"):
        errors.append("status.trainerStatus: Invalid value: \"object\": lastUpdatedTime is required when "
                      "trainerStatus is present")
    pct = status.get("progressPercentage")
    if pct is not None and not (isinstance(pct, int) and 0 <= pct <= 100):
        errors.append(f"status.trainerStatus.progressPercentage: Invalid value: {pct}: must be between 0 and 100")
    eta = status.get("estimatedRemainingSeconds")
    if eta is not None and not (isinstance(eta, int) and eta >= 0):
        errors.append(f"status.trainerStatus.estimatedRemainingSeconds: Invalid value: {eta}: must be >= 0")
    metrics = status.get("metrics") or []
    if not isinstance(metrics, list) or len(metrics) > 256:
        errors.append("status.trainerStatus.metrics: Too many: must have at most 256 items")
    else:
        for i, metric in enumerate(metrics):
            for key in ("name", "value"):
                value = metric.get(key) if isinstance(metric, dict) else None
                if not isinstance(value, str) or not 1 <= len(value) <= 64:
                    errors.append(f"status.trainerStatus.metrics[{i}].{key}: Invalid value: must be 1-64 characters")
    return errors


class StatusServer:
    """Hands out the env and tokens, and serves the POSTs."""

    def __init__(self, store: Store, workdir: Path, url: Callable[[], str], ca_path: Path | None) -> None:
        self.store = store
        self.root = workdir / "trainer-status"
        self.url = url
        self.ca_path = ca_path
        self._tokens: dict[tuple[str, str], str] = {}

    def env(self, trainjob: JsonDict) -> list[JsonDict]:
        ns, name = trainjob["metadata"]["namespace"], trainjob["metadata"]["name"]
        token_file = self.root / ns / name / "token"
        if (ns, name) not in self._tokens or not token_file.exists():
            self._tokens[(ns, name)] = secrets.token_hex(16)
            token_file.parent.mkdir(parents=True, exist_ok=True)
            token_file.write_text(self._tokens[(ns, name)])
            token_file.chmod(0o600)
        return [
            {"name": URL_ENV, "value": f"{self.url()}/apis/{TRAINER_GROUP}/{TRAINER_VERSION}/namespaces/{ns}"
                                       f"/trainjobs/{name}/status"},
            {"name": CA_ENV, "value": str(self.ca_path or self.root / "ca.crt")},
            {"name": TOKEN_ENV, "value": str(token_file)},
        ]

    async def post(self, request: web.Request, namespace: str, name: str) -> web.Response:
        expected = self._tokens.get((namespace, name))
        given = request.headers.get("Authorization", "")
        if expected is None or given != f"Bearer {expected}":
            return _status(403, "Forbidden", "Forbidden")
        raw = await request.content.read(MAX_BODY + 1)
        if len(raw) > MAX_BODY:
            return _status(413, "RequestEntityTooLarge", "Payload too large")
        try:
            body = json.loads(raw)
        except ValueError:
            return _status(422, "Invalid", "Invalid payload")
        if not isinstance(body, dict):
            return _status(422, "Invalid", "Invalid payload")
        try:
            current = self.store.get("trainjobs", namespace, name)
        except ApiError:
            return _status(404, "NotFound", "Train job not found")
        trainer_status = body.get("trainerStatus")
        if trainer_status is None:
            return web.json_response(body)
        errors = payload_errors(trainer_status) if isinstance(trainer_status, dict) else ["status.trainerStatus: "
                                                                                         "Invalid value"]
        if errors:
            return _status(422, "Invalid", f'TrainJob.{TRAINER_GROUP} "{name}" is invalid: ' + ", ".join(errors))
        status = clone(current.get("status") or {})
        status["trainerStatus"] = clone(trainer_status)
        self.store.update_status("trainjobs", namespace, name, status)
        return web.json_response(body)
