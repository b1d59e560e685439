"""Fixtures shared by the integration tests: hooks on the local cluster, a test-side API client, and a
cuttable TCP proxy in front of the API server (with a kubeconfig and a hook that go through it)."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
from watch_support import Api, TcpProxy, kubeconfig_via

from airflow_tfjob.hooks.kubeflow_job import AsyncKubeflowJobHook, KubeflowJobHook


@pytest.fixture
def hook(k8s_conn: str) -> KubeflowJobHook:
    """The synchronous hook (modules that test the async side override `hook` with an AsyncKubeflowJobHook)."""
    return KubeflowJobHook(conn_id=k8s_conn)


@pytest.fixture
def venv_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    # The local cluster runs host processes (`tensorboard`, a replica's `python`) through the host's PATH:
    # they must be this virtualenv's.
    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")


@pytest.fixture
async def api(local_cluster: Any) -> AsyncIterator[Api]:
    async with Api(Path(local_cluster.kubeconfig_path)) as client:
        yield client


@pytest.fixture
async def proxy(local_cluster: Any) -> AsyncIterator[TcpProxy]:
    url = urlparse(local_cluster.url)
    p = TcpProxy(url.hostname or "127.0.0.1", url.port or 80)
    await p.start()
    yield p
    await p.stop()


@pytest.fixture
def proxied_kubeconfig(local_cluster: Any, proxy: TcpProxy, tmp_path: Path) -> Path:
    return kubeconfig_via(
        Path(local_cluster.kubeconfig_path), f"http://127.0.0.1:{proxy.port}", tmp_path / "kubeconfig"
    )


@pytest.fixture
def proxied_hook(proxied_kubeconfig: Path, k8s_conn: str) -> AsyncKubeflowJobHook:
    return AsyncKubeflowJobHook(conn_id=k8s_conn, config_file=str(proxied_kubeconfig))
