"""When the async client's exec-plugin token is fetched again, and which kubeconfigs are exec-plugin ones.

The refresh itself, against a real plugin and a server that rejects expired tokens, is in
tests/integration/test_chaos.py; here only the rule of when, on kubernetes_asyncio's real loader.
"""

from __future__ import annotations

import asyncio
import datetime
import time
from typing import Any

import pytest
from kubernetes_asyncio.config.kube_config import KubeConfigLoader

from airflow_tfjob.hooks.exec_auth import LOADER_MARGIN, ExecTokenRefresher, uses_exec

EXEC_USER = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "true"}}


def kubeconfig(user: dict[str, Any], current: str = "c") -> dict[str, Any]:
    return {
        "current-context": current,
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
        "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:6443"}}],
        "users": [{"name": "u", "user": user}],
    }


def refresher_for(lifetime: float, obtained: float) -> ExecTokenRefresher:
    """A refresher on a real loader whose token was obtained at `obtained` and lives `lifetime` s."""
    loader = KubeConfigLoader(config_dict=kubeconfig(EXEC_USER))
    loader.exec_plugin_expiry = datetime.datetime.fromtimestamp(obtained + lifetime, datetime.UTC)
    refresher = ExecTokenRefresher(loader)
    refresher._obtained = obtained
    return refresher


@pytest.mark.parametrize(
    ("lifetime", "due_after"),
    [
        (5.0, 4.0),  # a short test token: 80% of its life
        (15 * 60.0, 12 * 60.0),  # EKS: 80% (3 minutes left, inside the loader's 5)
        (60 * 60.0, 55 * 60.0),  # GKE, AKS: the loader keeps its token until 5 minutes before expiry
    ],
)
def test_a_refresh_is_due_at_80_percent_or_at_the_loaders_margin(lifetime: float, due_after: float) -> None:
    start = float(int(time.time()))  # whole seconds: the expiry is a datetime, to the microsecond
    refresher = refresher_for(lifetime, start)
    assert not refresher._due(now=start + due_after - 1)
    assert refresher._due(now=start + due_after)


def test_when_a_refresh_is_due_the_loader_agrees_to_run_the_plugin() -> None:
    """Due before the loader's margin, it would have declined and kept its token: for a GKE token the
    old rule (80%, then forcing the loader by deleting its expiry) came 7 minutes earlier."""
    from kubernetes_asyncio.config.kube_config import _is_expired

    start = time.time() - 55 * 60  # a GKE token obtained 55 minutes ago: due now
    refresher = refresher_for(60 * 60.0, start)
    assert refresher._due()
    assert _is_expired(refresher._loader.exec_plugin_expiry)
    assert LOADER_MARGIN == 300.0


def test_a_token_without_expiry_is_never_due() -> None:
    loader = KubeConfigLoader(config_dict=kubeconfig(EXEC_USER))
    assert not ExecTokenRefresher(loader)._due(now=time.time() + 10**6)
    assert asyncio.run(_call(ExecTokenRefresher(loader))) == 0


async def _call(refresher: ExecTokenRefresher) -> int:
    from kubernetes_asyncio.client import Configuration

    await refresher(Configuration())
    return refresher.refreshes


@pytest.mark.parametrize(
    ("config", "context", "expected"),
    [
        (kubeconfig(EXEC_USER), None, True),
        (kubeconfig({"token": "abc"}), None, False),
        (kubeconfig(EXEC_USER, current="missing"), None, False),  # left to the cncf hook to report
        (kubeconfig(EXEC_USER, current="missing"), "c", True),  # the connection's context wins
        (None, None, False),
        ("not a mapping", None, False),
    ],
)
def test_which_kubeconfigs_are_exec_plugin_ones(config: Any, context: str | None, expected: bool) -> None:
    assert uses_exec(config, context) is expected
