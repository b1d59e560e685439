"""Kubeconfigs whose user is an exec credential plugin (EKS, GKE, AKS): loaded once, refreshed in place.

kubernetes_asyncio runs the plugin when a kubeconfig is loaded and never again, and the loader it
returns is the only object that knows how to run it again. The cncf.kubernetes hook's loading
discards that loader, so such a kubeconfig is loaded here instead of there: the plugin runs once per
client build (an ``aws eks get-token`` costs a second or more), and the loader stays with the client as
its refresh hook, :class:`ExecTokenRefresher`. Every other configuration (in-cluster, static tokens,
certificates, conflicting options the cncf hook reports) is left to the cncf hook.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import yaml
from kubernetes_asyncio import client as async_client
from kubernetes_asyncio import config as async_config

#: Share of a token's lifetime after which it is fetched again (the rest is the margin for slow plugins).
REFRESH_AT = 0.8
#: Seconds before expiry from which the loader runs the plugin again when asked (before that it keeps
#: its token): kubernetes_asyncio's EXPIRY_SKEW_PREVENTION_DELAY.
LOADER_MARGIN = async_config.kube_config.EXPIRY_SKEW_PREVENTION_DELAY.total_seconds()


class ExecTokenRefresher:
    """Refresh hook of a client configuration whose token comes from an exec credential plugin.

    It reads the loader's ``token`` and ``exec_plugin_expiry`` (set from the ExecCredential's
    ``status.expirationTimestamp``) and calls its public ``load_from_exec_plugin``, which runs the
    plugin only within :data:`LOADER_MARGIN` of the expiry: a refresh is due after :data:`REFRESH_AT`
    of the token's lifetime, or once the loader's margin is reached if that comes later (a token of
    more than 25 minutes). The locked kubernetes_asyncio release is the one
    tests/integration/test_chaos.py runs this against.
    """

    def __init__(self, loader: Any) -> None:
        self._loader = loader
        self._lock = asyncio.Lock()
        self._obtained = time.time()
        self.refreshes = 0

    def _due(self, now: float | None = None) -> bool:
        expiry = getattr(self._loader, "exec_plugin_expiry", None)
        if expiry is None:  # a token without expiry: only a 401 replaces it
            return False
        ends = expiry.timestamp()
        lifetime = max(0.0, ends - self._obtained)
        now = time.time() if now is None else now
        return now >= max(self._obtained + REFRESH_AT * lifetime, ends - LOADER_MARGIN)

    async def __call__(self, configuration: async_client.Configuration) -> None:
        if not self._due():
            return
        async with self._lock:
            if not self._due():  # another request refreshed it while this one waited
                return
            await self._loader.load_from_exec_plugin()
            self._obtained = time.time()
            self.refreshes += 1
            configuration.api_key["BearerToken"] = self._loader.token


def uses_exec(kubeconfig: Any, context: str | None) -> bool:
    """Whether the user of `context` (default: the current context) is an exec plugin."""
    if not isinstance(kubeconfig, dict):
        return False
    name = context or kubeconfig.get("current-context")
    contexts = {
        c.get("name"): c.get("context") or {} for c in kubeconfig.get("contexts") or [] if isinstance(c, dict)
    }
    user_name = contexts.get(name, {}).get("user")
    for user in kubeconfig.get("users") or []:
        if isinstance(user, dict) and user.get("name") == user_name:
            return isinstance(user.get("user"), dict) and "exec" in user["user"]
    return False


def _read_file(path: str) -> Any:
    """The kubeconfig at `path`; None when it is a list of files (KUBECONFIG=a:b) or unreadable,
    which the cncf hook then loads (and reports) as before."""
    if os.pathsep in path:
        return None
    try:
        with open(os.path.expanduser(path)) as f:
            return yaml.safe_load(f)
    except (OSError, yaml.YAMLError):
        return None


def _parse_inline(text: Any) -> Any:
    if isinstance(text, dict):
        return text
    try:
        return yaml.safe_load(text) if isinstance(text, str) else None
    except yaml.YAMLError:
        return None


async def load_exec_config(
    configuration: async_client.Configuration,
    *,
    in_cluster: Any,
    context: str | None,
    config_dict: dict[str, Any] | None,
    kube_config_path: str | None,
    kube_config: Any,
) -> Any | None:
    """Load an exec-plugin kubeconfig into `configuration` (the plugin runs once) and return its loader;
    None, with nothing loaded, for any other configuration.

    The sources are the cncf hook's, in its order: ``config_dict``, the connection's
    ``kube_config_path``, its inline ``kube_config``, the default kubeconfig (``KUBECONFIG`` or
    ``~/.kube/config``). More than one of them, or ``in_cluster``, is the cncf hook's to refuse or load.
    """
    chosen = [source for source in (in_cluster, kube_config, kube_config_path, config_dict) if source]
    if len(chosen) > 1 or in_cluster:
        return None
    if config_dict:
        data = config_dict
    elif kube_config:
        data = _parse_inline(kube_config)
    else:
        path = kube_config_path or async_config.kube_config.KUBE_CONFIG_DEFAULT_LOCATION
        data = _read_file(path)
        if uses_exec(data, context):
            return await async_config.load_kube_config(
                config_file=path, context=context, client_configuration=configuration, persist_config=False
            )
        return None
    if not uses_exec(data, context):
        return None
    # Loaded as a dict: the inline form needs no temporary file (a JSON string parses as YAML too).
    return await async_config.load_kube_config_from_dict(data, context=context, client_configuration=configuration)
