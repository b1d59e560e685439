"""Bearer tokens of the local cluster, and the exec credential plugin that hands them out.

A token is ``tfl1.<payload>.<signature>``: the payload carries the user and the expiry, the signature is
an HMAC-SHA256 with a secret kept in the cluster's workdir (mode 0600). Whoever can read that file can
mint tokens, as whoever holds a cloud login can get a cluster token: the exec plugin is exactly that,
like `aws eks get-token` or `gke-gcloud-auth-plugin`. Rotating the secret (`expire_tokens`) makes every
token issued so far invalid at once, so tests can expire credentials without waiting.

This module is stdlib-only (with the provider's import-free constants) because kubectl and the Kubernetes clients run it as a process for every
new token: ``python -m airflow_tfjob.local.credential --secret-file F --user U --ttl S`` prints an
ExecCredential (client.authentication.k8s.io/v1) with ``status.token`` and ``status.expirationTimestamp``.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import hmac
import json
import os
import secrets
import sys
import time
from pathlib import Path

# The provider's import-free leaf: the plugin stays stdlib-only.
from airflow_tfjob.constants import MAX_CLI_SECONDS, NumberOption

EXEC_API_VERSION = "client.authentication.k8s.io/v1"
_PREFIX = "tfl1."


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def write_private(path: Path, text: str) -> None:
    """Write `text` to `path` with mode 0600, atomically (readers see the old or the new content)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        os.fchmod(f.fileno(), 0o600)  # the file may have existed with other permissions
        f.write(text)
    tmp.replace(path)


def _sign(secret: bytes, payload: str) -> str:
    return _b64(hmac.new(secret, (_PREFIX + payload).encode(), hashlib.sha256).digest())


def mint(secret: bytes, user: str, ttl: float, now: float | None = None) -> tuple[str, float]:
    """(token, expiry as epoch seconds) for `user`, valid for `ttl` seconds."""
    expiry = (time.time() if now is None else now) + ttl
    payload = _b64(json.dumps({"u": user, "exp": expiry}, separators=(",", ":")).encode())
    return f"{_PREFIX}{payload}.{_sign(secret, payload)}", expiry


def verify(secret: bytes, token: str, now: float | None = None) -> str | None:
    """The token's user if it is signed with `secret` and not expired, else None."""
    if not token.startswith(_PREFIX):
        return None
    payload, _, signature = token[len(_PREFIX):].partition(".")
    if not hmac.compare_digest(signature, _sign(secret, payload)):
        return None
    try:
        claims = json.loads(_unb64(payload))
        user, expiry = str(claims["u"]), float(claims["exp"])
    except (ValueError, KeyError, TypeError):
        return None
    return user if (time.time() if now is None else now) < expiry else None


class TokenAuthority:
    """The server's side: owns the secret file, issues and verifies tokens, expires them all at once."""

    def __init__(self, secret_file: Path) -> None:
        self.secret_file = secret_file
        self._secret = b""
        self.rotate()

    def rotate(self) -> None:
        secret = secrets.token_hex(32)
        write_private(self.secret_file, secret)
        self._secret = secret.encode()

    def issue(self, user: str, ttl: float) -> str:
        return mint(self._secret, user, ttl)[0]

    def verify(self, token: str) -> str | None:
        return verify(self._secret, token)


def exec_credential(secret_file: Path, user: str, ttl: float) -> dict[str, object]:
    token, expiry = mint(secret_file.read_text().strip().encode(), user, ttl)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(expiry)))  # RFC 3339, whole seconds
    return {"apiVersion": EXEC_API_VERSION, "kind": "ExecCredential",
            "status": {"token": token, "expirationTimestamp": stamp}}


def exec_command(secret_file: Path, user: str, ttl: float) -> dict[str, object]:
    """The kubeconfig's `users[].user.exec` entry that runs this module."""
    return {
        "apiVersion": EXEC_API_VERSION,
        "command": sys.executable,
        "args": ["-m", "airflow_tfjob.local.credential", "--secret-file", str(secret_file), "--user", user,
                 "--ttl", f"{ttl:g}"],
        "interactiveMode": "Never",
        "provideClusterInfo": False,
    }


#: Token lifetimes the plugin hands out: positive, at most a year (an expiry past what RFC 3339 stamps and
#: time.gmtime hold would end the plugin in a traceback, and kubectl with it).
TTL = NumberOption("--ttl", minimum=0, above_minimum=True, maximum=MAX_CLI_SECONDS, unit="seconds", example="900")


def build_parser(add_help: bool = True) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tfjob-local credential", add_help=add_help,
                                     description="Print an ExecCredential with a fresh local-cluster token.")
    parser.add_argument("--secret-file", type=Path, required=True, help="the cluster's token secret file")
    parser.add_argument("--user", required=True, help="the user the token authenticates")
    parser.add_argument("--ttl", type=TTL, default=900.0, help="token lifetime in seconds (default 900)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        credential = exec_credential(args.secret_file, args.user, args.ttl)
    except OSError as exc:
        sys.stderr.write(f"tfjob-local credential: cannot read --secret-file {args.secret_file}: {exc.strerror}; "
                         "is the cluster running with token authentication?\n")
        return 1
    sys.stdout.write(json.dumps(credential) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
