"""The progress status of Kubeflow Trainer v2.3.0 behind its alpha `TrainJobStatus` feature gate
(docs/reference/trainjob-behaviour.md §4.7, §7), off by default as upstream: `LocalCluster(feature_gates=
{"TrainJobStatus": True})`, `tfjob-local serve --feature-gates TrainJobStatus=true`.

When on, a status server runs beside the API server, as Trainer's runs in its controller: HTTPS on a port
of its own (upstream 10443; here a free loopback port), with a certificate signed by a CA made at start-up.
Every container of a TrainJob's trainer pods gets KUBEFLOW_TRAINER_SERVER_URL (that server's
`.../trainjobs/<tj>/status`), KUBEFLOW_TRAINER_SERVER_CA_CERT (the CA file) and
KUBEFLOW_TRAINER_SERVER_TOKEN (a token file), and a POST of `{"trainerStatus": {...}}` with
`Authorization: Bearer <token>` writes `status.trainerStatus` (the whole object replaced; the controllers
carry it through). A program written for a real cluster (an HTTPS POST that verifies the server against the
CA file, the SDK's `kubeflow.trainer.update_trainjob_status(...)`) works unchanged. Local differences: the
files are in the cluster's work directory (upstream a volume at /var/run/secrets/kubeflow/trainer; replicas
are local processes and mount nothing), so the two path variables name them there; the token is a random
one per TrainJob, not a projected service-account token verified by OIDC; no `<tj>-tls-config` ConfigMap.
"""

from __future__ import annotations

import json
import re
import secrets
from pathlib import Path

from aiohttp import web

from airflow_tfjob.local.model.resources import (
    TRAINER_GROUP,
    TRAINER_STATUS_GATE,
    TRAINER_VERSION,
    ApiError,
    JsonDict,
    clone,
)
from airflow_tfjob.local.store.core import Store
from airflow_tfjob.local.tls import make_server_tls

GATE = TRAINER_STATUS_GATE
MAX_BODY = 64 * 1024
URL_ENV, CA_ENV, TOKEN_ENV = ("KUBEFLOW_TRAINER_SERVER_URL", "KUBEFLOW_TRAINER_SERVER_CA_CERT",
                              "KUBEFLOW_TRAINER_SERVER_TOKEN")
_PATH = re.compile(rf"^/apis/{re.escape(TRAINER_GROUP)}/{TRAINER_VERSION}/namespaces/([^/]+)/trainjobs/([^/]+)/status$")


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
    """Trainer's status server: hands out the env and tokens, and serves the POSTs over TLS."""

    def __init__(self, store: Store, workdir: Path, host: str = "127.0.0.1") -> None:
        self.store = store
        self.root = workdir / "trainer-status"
        self.host = host
        self.tls = make_server_tls(self.root / "tls", host)
        self.url = ""
        self._runner: web.AppRunner | None = None
        self._tokens: dict[tuple[str, str], str] = {}

    async def start(self) -> str:
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, 0, ssl_context=self.tls.server_context())
        await site.start()
        server = site._server
        assert server is not None
        port = (getattr(server, "sockets", None) or [])[0].getsockname()[1]
        self.url = f"https://{self.host}:{port}"
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        match = _PATH.match(request.path)
        if request.method != "POST" or match is None:
            return _status(404, "NotFound", "Not found")
        return await self.post(request, match.group(1), match.group(2))

    def env(self, trainjob: JsonDict) -> list[JsonDict]:
        ns, name = trainjob["metadata"]["namespace"], trainjob["metadata"]["name"]
        token_file = self.root / ns / name / "token"
        if (ns, name) not in self._tokens or not token_file.exists():
            self._tokens[(ns, name)] = secrets.token_hex(16)
            token_file.parent.mkdir(parents=True, exist_ok=True)
            token_file.write_text(self._tokens[(ns, name)])
            token_file.chmod(0o600)
        return [
            {"name": URL_ENV, "value": f"{self.url}/apis/{TRAINER_GROUP}/{TRAINER_VERSION}/namespaces/{ns}"
                                       f"/trainjobs/{name}/status"},
            {"name": CA_ENV, "value": str(self.tls.ca_path)},
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
