"""Token authentication of the local cluster: 401s, expiring tokens, the exec credential plugin (with
both official clients and kubectl), static-token kubeconfigs, kubeconfig permissions, exposure safety."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
import yaml
from kubernetes import client, config
from kubernetes.client.rest import ApiException
from process_support import start_serve, stop_serve

from airflow_tfjob.local import LocalCluster
from airflow_tfjob.local.credential import EXEC_API_VERSION, mint, verify

NAMESPACES = "/api/v1/namespaces"


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    with LocalCluster(controller=False, runner=False, auth=True, token_ttl=600) as c:
        yield c


def get(cluster: LocalCluster, path: str, token: str | None = None) -> requests.Response:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    return requests.get(cluster.url + path, headers=headers, timeout=10, verify=str(cluster.ca_path))


def names(api: client.ApiClient) -> set[str]:
    return {n.metadata.name for n in client.CoreV1Api(api).list_namespace().items}


def test_requests_without_a_valid_token_get_401(cluster: LocalCluster) -> None:
    for token in (None, "", "not-a-token", cluster.issue_token() + "x", cluster.issue_token(ttl=0)):
        response = get(cluster, NAMESPACES, token)
        assert response.status_code == 401, token
        assert response.json() == {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                                   "message": "Unauthorized", "reason": "Unauthorized", "code": 401}
    assert get(cluster, "/metrics").status_code == 401


def test_a_valid_token_and_the_public_endpoints_get_200(cluster: LocalCluster) -> None:
    assert get(cluster, NAMESPACES, cluster.issue_token()).status_code == 200
    for path in ("/healthz", "/readyz", "/livez", "/version"):
        assert get(cluster, path).status_code == 200, path


def test_tokens_expire_after_their_ttl() -> None:
    token, expiry = mint(b"secret", "alice", ttl=900, now=1000.0)
    assert expiry == 1900.0
    assert verify(b"secret", token, now=1899.0) == "alice"
    assert verify(b"secret", token, now=1900.0) is None
    assert verify(b"other", token, now=1000.0) is None


def test_kubeconfigs_are_private(cluster: LocalCluster, tmp_path: Path) -> None:
    with LocalCluster(controller=False, runner=False, workdir=tmp_path / "plain") as plain:
        paths = [plain.kubeconfig_path, cluster.kubeconfig_path, cluster.kubeconfig_for("bob", credential="static")]
    for path in paths:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    secret = cluster.runtime.authority.secret_file if cluster.runtime.authority else None
    assert secret is not None and stat.S_IMODE(secret.stat().st_mode) == 0o600


def test_exec_plugin_prints_an_exec_credential(cluster: LocalCluster) -> None:
    exec_config = yaml.safe_load(cluster.kubeconfig_path.read_text())["users"][0]["user"]["exec"]
    assert exec_config["apiVersion"] == EXEC_API_VERSION and exec_config["interactiveMode"] == "Never"
    out = subprocess.run([exec_config["command"], *exec_config["args"]], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    credential = json.loads(out)
    assert (credential["apiVersion"], credential["kind"]) == (EXEC_API_VERSION, "ExecCredential")
    expiry = dt.datetime.fromisoformat(credential["status"]["expirationTimestamp"].replace("Z", "+00:00"))
    assert expiry > dt.datetime.now(dt.timezone.utc)
    assert get(cluster, NAMESPACES, credential["status"]["token"]).status_code == 200


def test_entry_point_runs_the_credential_plugin(cluster: LocalCluster) -> None:
    assert cluster.runtime.authority is not None
    script = Path(sys.executable).with_name("tfjob-local")
    out = subprocess.run([str(script), "credential", "--secret-file", str(cluster.runtime.authority.secret_file),
                          "--user", "carol", "--ttl", "60"], capture_output=True, text=True, timeout=60, check=True)
    assert get(cluster, NAMESPACES, json.loads(out.stdout)["status"]["token"]).status_code == 200


def test_sync_client_exec_kubeconfig_and_expiry(cluster: LocalCluster) -> None:
    api = config.new_client_from_config(str(cluster.kubeconfig_path))
    assert "default" in names(api)
    cluster.expire_tokens()
    with pytest.raises(ApiException) as err:
        names(api)  # the client keeps its token until the expirationTimestamp the plugin gave
    assert err.value.status == 401
    fresh = config.new_client_from_config(str(cluster.kubeconfig_path))  # runs the plugin again
    assert "default" in names(fresh)
    api.close()
    fresh.close()


def test_async_client_exec_kubeconfig_and_expiry(cluster: LocalCluster) -> None:
    from kubernetes_asyncio import client as aclient
    from kubernetes_asyncio import config as aconfig

    async def connect() -> aclient.ApiClient:
        cfg = aclient.Configuration()
        await aconfig.load_kube_config(str(cluster.kubeconfig_path), client_configuration=cfg)
        return aclient.ApiClient(cfg)

    async def list_names(api: aclient.ApiClient) -> set[str]:
        return {n.metadata.name for n in (await aclient.CoreV1Api(api).list_namespace()).items}

    async def scenario() -> int:
        async with await connect() as api:
            assert "default" in await list_names(api)
            cluster.expire_tokens()
            with pytest.raises(aclient.ApiException) as err:
                await list_names(api)
        async with await connect() as fresh:  # runs the plugin again
            assert "default" in await list_names(fresh)
        return int(err.value.status)

    assert asyncio.run(scenario()) == 401


def test_static_token_kubeconfig_stops_working_when_tokens_expire(cluster: LocalCluster) -> None:
    path = cluster.kubeconfig_for("dave", credential="static")
    assert "token" in yaml.safe_load(path.read_text())["users"][0]["user"]
    api = config.new_client_from_config(str(path))
    assert "default" in names(api)
    cluster.expire_tokens()
    with pytest.raises(ApiException) as err:
        names(config.new_client_from_config(str(path)))
    assert err.value.status == 401
    api.close()


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed on this machine")
def test_kubectl_with_the_exec_kubeconfig(cluster: LocalCluster) -> None:
    env = {**os.environ, "KUBECONFIG": str(cluster.kubeconfig_path)}
    kubectl = str(shutil.which("kubectl"))
    result = subprocess.run([kubectl, "get", "tfjobs"], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "No resources found" in result.stderr, result.stderr
    cluster.expire_tokens()  # kubectl runs the plugin again in each process: a new token
    result = subprocess.run([kubectl, "get", "namespaces", "-o", "name"], env=env, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0 and "namespace/default" in result.stdout, result.stderr


def test_serve_refuses_a_non_loopback_host_without_auth() -> None:
    result = subprocess.run([sys.executable, "-m", "airflow_tfjob.local.cli", "serve", "--host", "0.0.0.0"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and result.stdout == ""
    assert "host '0.0.0.0' is not a loopback address" in result.stderr and "--auth token" in result.stderr
    with pytest.raises(ValueError, match="not a loopback address"):
        LocalCluster(host="10.1.2.3")


def test_serve_on_all_addresses_with_auth(tmp_path: Path) -> None:
    proc, url, kubeconfig = start_serve("--host", "0.0.0.0", "--auth", "token", "--token-ttl", "120",
                                        "--workdir", str(tmp_path))
    try:
        assert url.startswith("https://0.0.0.0:")
        ca = str(tmp_path / "tls" / "ca.crt")
        assert requests.get(url + NAMESPACES, timeout=10, verify=ca).status_code == 401
        api = config.new_client_from_config(str(kubeconfig))
        assert "default" in names(api)
        api.close()
    finally:
        code, _ = stop_serve(proc, signal.SIGTERM)
    assert code == 0
