"""Helpers for the watch and trigger tests: TFJobs whose status the test writes, and a TCP proxy that
cuts or refuses connections to the local API server (a real transport fault, not a mock)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from pathlib import Path
from typing import Any

import yaml

from airflow_tfjob.constants import API_VERSION, GROUP, KIND, PLURAL, VERSION

#: A managedBy value the training-operator (and the local controller) leaves alone: the test owns status.
EXTERNAL_MANAGER = "kueue.x-k8s.io/multikueue"


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def tfjob_manifest(
    name: str, *, external: bool = True, command: list[str] | None = None, env: dict[str, str] | None = None
) -> dict[str, Any]:
    """A one-worker TFJob; with ``external`` the controller skips it and the test writes its status."""
    run_policy: dict[str, Any] = {"cleanPodPolicy": "None"}
    if external:
        run_policy["managedBy"] = EXTERNAL_MANAGER
    extra = {"env": [{"name": k, "value": v} for k, v in env.items()]} if env else {}
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": name},
        "spec": {
            "runPolicy": run_policy,
            "tfReplicaSpecs": {
                "Worker": {
                    "replicas": 1,
                    "restartPolicy": "Never",
                    "template": {
                        "spec": {
                            "containers": [
                                {
                                    "name": "tensorflow",
                                    "image": "python:3.11",
                                    "command": command or ["python", "-c", "print('hello')"],
                                    **extra,
                                }
                            ]
                        }
                    },
                }
            },
        },
    }


def condition(type_: str, reason: str, message: str, status: str = "True") -> dict[str, Any]:
    now = "2025-01-01T00:00:00Z"
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastUpdateTime": now,
        "lastTransitionTime": now,
    }


def succeeded_status(name: str, ns: str) -> dict[str, Any]:
    return {
        "conditions": [
            condition("Created", "TFJobCreated", f"TFJob {name} is created."),
            condition("Running", "TFJobRunning", f"TFJob {ns}/{name} is running.", status="False"),
            condition("Succeeded", "TFJobSucceeded", f"TFJob {ns}/{name} successfully completed."),
        ],
        "replicaStatuses": {"Worker": {"succeeded": 1}},
        "startTime": "2025-01-01T00:00:00Z",
        "completionTime": "2025-01-01T00:01:00Z",
    }


def failed_status(name: str, ns: str) -> dict[str, Any]:
    return {
        "conditions": [
            condition("Created", "TFJobCreated", f"TFJob {name} is created."),
            condition("Running", "TFJobRunning", f"TFJob {ns}/{name} is running.", status="False"),
            condition(
                "Failed", "TFJobFailed", f"TFJob {ns}/{name} has failed because 1 Worker replica(s) failed."
            ),
        ],
        "replicaStatuses": {"Worker": {"failed": 1}},
        "startTime": "2025-01-01T00:00:00Z",
    }


def running_status(name: str, ns: str, message: str | None = None) -> dict[str, Any]:
    return {
        "conditions": [
            condition("Created", "TFJobCreated", f"TFJob {name} is created."),
            condition("Running", "TFJobRunning", message or f"TFJob {ns}/{name} is running."),
        ],
        "replicaStatuses": {"Worker": {"active": 1}},
        "startTime": "2025-01-01T00:00:00Z",
    }


class Api:
    """Test-side writes through kubernetes_asyncio (its own client, so the code under test shares nothing)."""

    def __init__(self, kubeconfig: Path) -> None:
        self.kubeconfig = kubeconfig
        self.client: Any = None

    async def __aenter__(self) -> Api:
        from kubernetes_asyncio import client, config

        conf = client.Configuration()
        await config.load_kube_config(config_file=str(self.kubeconfig), client_configuration=conf)
        self.client = client.ApiClient(configuration=conf)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.client.close()

    @property
    def custom(self) -> Any:
        from kubernetes_asyncio import client

        return client.CustomObjectsApi(self.client)

    async def namespace(self, ns: str) -> str:
        from kubernetes_asyncio import client
        from kubernetes_asyncio.client.exceptions import ApiException

        with contextlib.suppress(ApiException):
            await client.CoreV1Api(self.client).create_namespace(
                client.V1Namespace(metadata=client.V1ObjectMeta(name=ns))
            )
        return ns

    async def create(self, ns: str, body: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = await self.custom.create_namespaced_custom_object(
            GROUP, VERSION, ns, PLURAL, body
        )
        return result

    async def set_status(self, ns: str, name: str, status: dict[str, Any]) -> dict[str, Any]:
        result: dict[str, Any] = await self.custom.patch_namespaced_custom_object_status(
            GROUP,
            VERSION,
            ns,
            PLURAL,
            name,
            {"status": status},
            _content_type="application/merge-patch+json",
        )
        return result

    async def get(self, ns: str, name: str) -> dict[str, Any] | None:
        from kubernetes_asyncio.client.exceptions import ApiException

        try:
            result: dict[str, Any] = await self.custom.get_namespaced_custom_object(
                GROUP, VERSION, ns, PLURAL, name
            )
            return result
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    async def saved_positions(self, ns: str) -> dict[str, dict[str, Any]]:
        """The deferred follows' saved log positions in ``ns`` (triggers/positions.py), by entry."""
        from kubernetes_asyncio import client
        from kubernetes_asyncio.client.exceptions import ApiException

        from airflow_tfjob.triggers.positions import CONFIG_MAP

        try:
            config_map = await client.CoreV1Api(self.client).read_namespaced_config_map(CONFIG_MAP, ns)
        except ApiException as exc:
            if exc.status == 404:
                return {}
            raise
        return {key: json.loads(value) for key, value in (config_map.data or {}).items()}

    async def delete(self, ns: str, name: str) -> None:
        await self.custom.delete_namespaced_custom_object(
            GROUP, VERSION, ns, PLURAL, name, body={"propagationPolicy": "Foreground"}
        )

    async def pods(self, ns: str, job: str) -> list[dict[str, Any]]:
        from kubernetes_asyncio import client

        result = await client.CoreV1Api(self.client).list_namespaced_pod(
            ns, label_selector=f"training.kubeflow.org/job-name={job}", _preload_content=False
        )
        import json

        data = json.loads(await result.read())  # type: ignore[attr-defined]  # raw response (no preload)
        items: list[dict[str, Any]] = data.get("items", [])
        return items


async def wait_until(predicate: Any, timeout: float = 20.0, interval: float = 0.05) -> None:
    """Poll a (sync or async) predicate until true; fail with the timeout otherwise."""
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while True:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return
        if loop.time() > end:
            raise AssertionError(f"condition not met within {timeout}s")
        await asyncio.sleep(interval)


class TcpProxy:
    """Forwards a local port to the API server; can cut every open connection or refuse new ones."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.port = 0
        self._server: asyncio.AbstractServer | None = None
        self._links: set[asyncio.StreamWriter] = set()
        self.connections = 0

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self._links.update((writer, up_writer))

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (OSError, asyncio.CancelledError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pump(reader, up_writer), pump(up_reader, writer))
        self._links.discard(writer)
        self._links.discard(up_writer)

    def cut(self) -> None:
        """Abort every open connection (both sides see a reset mid-stream)."""
        for w in list(self._links):
            transport = w.transport
            transport.abort()
        self._links.clear()

    async def refuse(self) -> None:
        """Stop listening (new connections are refused) and cut the open ones."""
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()
        self._server = None
        self.cut()

    async def stop(self) -> None:
        if self._server is not None:
            await self.refuse()
        self.cut()


def kubeconfig_via(original: Path, server: str, dest: Path) -> Path:
    """A copy of the kubeconfig whose clusters point at ``server`` (e.g. a proxy)."""
    data = yaml.safe_load(original.read_text())
    for cluster in data.get("clusters", []):
        cluster["cluster"]["server"] = server
    dest.write_text(yaml.safe_dump(data))
    return dest


def cluster_role(path: Path, group: str, resource: str, verbs: list[str]) -> Path:
    """Write a ClusterRole granting only `verbs` on one resource, for the local cluster's RBAC."""
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": path.stem},
        "rules": [{"apiGroups": [group], "resources": [resource], "verbs": verbs}],
    }
    path.write_text(yaml.safe_dump(role))
    return path
