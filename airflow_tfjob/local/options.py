"""The local cluster's start options that can be wrong on their own, checked before anything is created.

`ClusterRuntime` (and so `LocalCluster` and `tfjob-local serve`) calls :func:`check_options` first: a bad
combination raises ValueError naming the option and the fix, and no port, file or process exists yet.
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Mapping
from typing import Any

from airflow_tfjob.constants import MAX_CLI_SECONDS

# The gate's name from the model, not the status server's module: the command line checks options
# without loading the server (aiohttp).
from airflow_tfjob.local.model.resources import TRAINER_STATUS_GATE

#: How a kubeconfig's user authenticates: an exec plugin minting fresh tokens, or one static token.
CREDENTIALS = ("exec", "static")
#: Feature gates the cluster knows: Kubeflow Trainer's, off by default as upstream.
FEATURE_GATES = (TRAINER_STATUS_GATE,)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_options(
    *,
    host: str,
    auth: bool,
    credential: str,
    token_ttl: Any,
    roles: Mapping[str, Any] | None,
    feature_gates: Mapping[str, bool],
) -> None:
    unknown_gates = set(feature_gates) - set(FEATURE_GATES)
    if unknown_gates:
        raise ValueError(f"feature_gates: unknown gate(s) {', '.join(sorted(unknown_gates))}; known: "
                         f"{', '.join(FEATURE_GATES)} (e.g. {{'TrainJobStatus': True}})")
    if not auth and not is_loopback(host):
        raise ValueError(
            f"host {host!r} is not a loopback address (--host): without authentication anyone who can reach it "
            "could run processes on this machine; turn token authentication on (tfjob-local serve "
            "--auth token, LocalCluster(auth=True)) or listen on 127.0.0.1"
        )
    if credential not in CREDENTIALS:
        raise ValueError(f"credential must be one of {', '.join(CREDENTIALS)}, got {credential!r}")
    if (isinstance(token_ttl, bool) or not isinstance(token_ttl, (int, float)) or not math.isfinite(token_ttl)
            or token_ttl <= 0 or token_ttl > MAX_CLI_SECONDS):
        # Bounded as the credential plugin's --ttl is: the exec kubeconfig hands this value to it.
        raise ValueError(f"token_ttl must be a positive number of seconds, at most {MAX_CLI_SECONDS} "
                         f"(e.g. 900), got {token_ttl!r}")
    if roles and not auth:
        raise ValueError("roles (--role) need token authentication to know who asks: pass auth=True (--auth token)")
