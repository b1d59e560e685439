"""``[core] hostname_callable`` of the production-shaped deployment test: each triggerer names itself
(TFJOB_E2E_HOSTNAME, a name that resolves to this machine), so that the test knows which triggerer job
in the database is which process; every other component keeps the machine's name."""

from __future__ import annotations

import os
import socket


def hostname() -> str:
    return os.environ.get("TFJOB_E2E_HOSTNAME") or socket.getfqdn()
