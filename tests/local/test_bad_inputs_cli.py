"""The bad-input suite over the command-line tools: `tfjob-runtimes`, `tfjob-local serve`, `tfjob-preflight`.

A refusal is what kubectl gives: the expected exit status (2 for usage, 1 for a failure, 3 for preflight's
"could not ask the cluster"), exactly one line on stderr that names the option (or the missing part) and
the fix, no traceback. A server that starts instead (prints its ready line) is an accepted case.

Each case calls the tool's ``main(argv)`` in-process (``run_in_process``), as a new interpreter would run
it: stdout and stderr captured, the exit status from its return or SystemExit, an exception escaping it
counted as the traceback a process would print, no logging handler (a logged warning reaches stderr
through logging's last resort, as in a fresh process), every warning Python shows by default written to
stderr, and ``tfjob-local serve``'s server replaced by one that prints its ready line and returns (a case
that gets that far is accepted; nothing starts). A process costs a second of imports per case, which is
what this table spent its time on (about 50 subprocesses). A sample of cases, one of each tool and path,
also runs the installed way, as a subprocess, for the exit status a shell sees and no traceback, and must
give the same line as in-process (``test_the_installed_way``).

The cluster a tool reaches is a loopback server: the suite's RequestCounter where no request should happen,
and a server answering one fixed status (403, 404, 401, 500) where the point is how the tool reports it.
"""

from __future__ import annotations

import importlib
import json
import logging
import re
import socket
import subprocess
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol

import pytest
from badinput_support import Case, FigureLine, Judgement, RequestCounter, judge
from cli_support import run_main

from airflow_tfjob.local.node.ports import host_ports

SECRET = "hunter2-Secret-5d1c7e"  # planted in files the tools read: it must never reach stderr
TOOLS = {
    "tfjob-runtimes": "airflow_tfjob.jobs.trainjob.runtimes",
    "tfjob-local": "airflow_tfjob.local.cli",
    "tfjob-preflight": "airflow_tfjob.preflight.cli",
}


class CliRefusal(Exception):
    """The tool refused as kubectl does: the expected status, one stderr line, no traceback."""


class CliOutcome(Exception):
    """The tool failed some other way (a traceback, several lines, the wrong status): unclear."""


def run_tool(
    tool: str, *args: str, status: int, env: dict[str, str] | None = None, cwd: Path | None = None
) -> None:
    """Run ``tool ARGS``; raise CliRefusal (a proper refusal), CliOutcome (any other failure) or return
    (it succeeded, or a server came up: accepted)."""
    import os

    environ = {**os.environ, **(env or {})}
    proc = subprocess.Popen(
        [sys.executable, "-m", TOOLS[tool], *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environ,
        cwd=cwd,
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()  # a server prints its ready line; anything else runs to its end
    if first.startswith("ready "):
        proc.terminate()
        proc.communicate(timeout=30)
        return
    _, err = proc.communicate(timeout=120)
    # Airflow's notice that the suite runs it in unit-test mode (tests/conftest.py) is not the tool's.
    lines = [
        line for line in err.splitlines() if line.strip() and "Unit test configuration loaded" not in line
    ]
    if proc.returncode == 0:
        return
    text = "\n".join(lines)
    if proc.returncode != status or len(lines) != 1 or "Traceback" in err:
        raise CliOutcome(f"exit {proc.returncode}, {len(lines)} stderr line(s): {text[-600:]}")
    raise CliRefusal(text)


class Runner(Protocol):
    def __call__(self, tool: str, *args: str, status: int, env: dict[str, str] | None = None) -> None: ...


def _main_of(tool: str) -> Callable[[list[str]], int | None]:
    return importlib.import_module(TOOLS[tool]).main  # type: ignore[no-any-return]


async def _not_served(runtime: Any) -> int:
    """Stands in for ``tfjob-local serve``'s server: says ready (the case got past every check) and stops."""
    sys.stdout.write("ready (not started: the bad-input suite) -\n")
    return 0


def call_main(
    main: Callable[[list[str]], int | None],
    args: list[str],
    *,
    status: int,
    env: dict[str, str] | None = None,
) -> None:
    """``main(args)`` judged as ``run_tool`` judges the process: raise CliRefusal, CliOutcome or return;
    ``tfjob-local serve``'s server replaced (``_not_served``)."""
    done = run_main(main, args, env, patches={"airflow_tfjob.local.cli.serve": _not_served})
    returncode, out, err = done.returncode, done.stdout, done.stderr
    if out.startswith("ready "):
        return
    lines = [
        line
        for line in err.splitlines()
        if line.strip() and "Unit test configuration loaded" not in line
    ]
    if returncode == 0:
        return
    text = "\n".join(lines)
    if returncode != status or len(lines) != 1 or "Traceback" in err:
        raise CliOutcome(f"exit {returncode}, {len(lines)} stderr line(s): {text[-600:]}")
    raise CliRefusal(text)


def run_in_process(tool: str, *args: str, status: int, env: dict[str, str] | None = None) -> None:
    """``tool ARGS`` as ``run_tool`` runs it, through the tool's main in this process."""
    call_main(_main_of(tool), list(args), status=status, env=env)


# --------------------------------------------------------------------------- clusters to reach


class _Fixed(BaseHTTPRequestHandler):
    def _answer(self) -> None:
        code, reason = self.server.code, self.server.reason  # type: ignore[attr-defined]
        body = json.dumps(
            {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "reason": reason,
                "code": code,
                "message": f"answered {code} by the bad-input suite",
            }
        ).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


def kubeconfig(path: Path, server: str, token: str = "not-a-secret") -> Path:
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "here",
        "clusters": [{"name": "here", "cluster": {"server": server}}],
        "users": [{"name": "here", "user": {"token": token}}],
        "contexts": [{"name": "here", "context": {"cluster": "here", "user": "here", "namespace": "default"}}],
    }))  # fmt: skip
    return path


class FixedServer:
    """A loopback server answering every request with one status, and a kubeconfig for it."""

    def __init__(self, directory: Path, code: int, reason: str) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Fixed)
        self._server.code, self._server.reason = code, reason  # type: ignore[attr-defined]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        port = self._server.server_address[1]
        self.kubeconfig = kubeconfig(directory / f"kubeconfig-{code}", f"http://127.0.0.1:{port}", SECRET)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def closed_port() -> int:
    """A loopback port nobody listens on: reserved host-wide and never bound (node/ports.py). A port
    bound and released again could be handed to a server that binds port 0 meanwhile."""
    return host_ports().reserve()


# --------------------------------------------------------------------------- the cases


def _write(directory: Path, name: str, text: str) -> str:
    path = directory / name
    path.write_text(text)
    return str(path)


ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 10)}]\n" for i in range(6)
)
CLUSTER_QUEUE = (
    "apiVersion: kueue.x-k8s.io/v1beta2\nkind: ClusterQueue\nmetadata: {{name: cq{extra_meta}}}\n"
    "spec:\n  namespaceSelector: {{}}\n  resourceGroups: {groups}\n"
)
GROUPS = '[{coveredResources: [cpu], flavors: [{name: default-flavor, resources: [{name: cpu, nominalQuota: "4"}]}]}]'
ROLE = (
    "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {meta}\n"
    "rules:\n- apiGroups: [kubeflow.org]\n  resources: [tfjobs]\n  {verbs}\n"
)


def cases(
    d: Path, counter: RequestCounter, servers: dict[int, FixedServer], run: Runner = run_in_process
) -> list[Case]:
    """Every bad input of the three tools; ``d`` holds their files; ``run`` runs a tool (in-process, or
    ``run_tool``: a subprocess)."""
    out: list[Case] = []

    def add(id: str, field: str, fix: str, call: Any, secret: str | None = None) -> None:
        out.append(Case(id, call, field, fix, secret))

    def rt(*args: str, status: int = 1, env: dict[str, str] | None = None) -> Any:
        return lambda: run("tfjob-runtimes", *args, status=status, env=env)

    def serve(*args: str, status: int = 2) -> Any:
        return lambda: run("tfjob-local", "serve", "--workdir", str(d / "work"), *args, status=status)

    def pre(*args: str, status: int = 3) -> Any:
        return lambda: run("tfjob-preflight", "--kind", "TFJob", *args, status=status)

    counted = str(counter.kubeconfig)
    down = str(kubeconfig(d / "kubeconfig-down", f"http://127.0.0.1:{closed_port()}", SECRET))
    no_home = d / "home"
    no_home.mkdir(exist_ok=True)  # the installed-way cases build the table again
    # ---------------------------------------------------------------- tfjob-runtimes
    add(
        "runtimes-missing-kubeconfig",
        "--kubeconfig",
        "give --kubeconfig FILE",
        rt("install", "--kubeconfig", str(d / "nowhere.yaml")),
    )
    add(
        "runtimes-missing-env-kubeconfig",
        "$KUBECONFIG",
        "--kubeconfig FILE",
        rt("install", env={"KUBECONFIG": str(d / "nowhere.yaml")}),
    )
    add(
        "runtimes-missing-default-kubeconfig",
        ".kube/config",
        "--kubeconfig FILE",
        rt("install", env={"HOME": str(no_home), "KUBECONFIG": ""}),
    )
    add(
        "runtimes-kubeconfig-is-a-directory",
        "--kubeconfig",
        "--kubeconfig FILE",
        rt("install", "--kubeconfig", str(d)),
    )
    add(
        "runtimes-bad-context",
        "--context",
        "use one of here",
        rt("install", "--kubeconfig", down, "--context", "elsewhere"),
    )
    add(
        "runtimes-malformed-kubeconfig",
        "--kubeconfig",
        "fix the kubeconfig",
        rt(
            "install",
            "--kubeconfig",
            _write(d, "broken-kc.yaml", f"users:\n- name: x\n  user: {{token: {SECRET}\n"),
        ),
        secret=SECRET,
    )
    add(
        "runtimes-kubeconfig-no-context",
        "--context",
        "--context NAME",
        rt(
            "install",
            "--kubeconfig",
            _write(d, "empty-kc.yaml", "apiVersion: v1\nkind: Config\nclusters: []\n"),
        ),
    )
    add(
        "runtimes-server-down",
        "API server",
        "is the cluster running",
        rt("install", "--kubeconfig", down),
        secret=SECRET,
    )
    add(
        "runtimes-403",
        "403",
        "clustertrainingruntimes",
        rt("install", "--kubeconfig", str(servers[403].kubeconfig)),
        secret=SECRET,
    )
    add(
        "runtimes-401",
        "401",
        "credentials",
        rt("install", "--kubeconfig", str(servers[401].kubeconfig)),
        secret=SECRET,
    )
    add(
        "runtimes-404",
        "404",
        "install Kubeflow Trainer",
        rt("install", "--kubeconfig", str(servers[404].kubeconfig)),
        secret=SECRET,
    )
    add(
        "runtimes-500",
        "500",
        "try again",
        rt("install", "--kubeconfig", str(servers[500].kubeconfig)),
        secret=SECRET,
    )
    add("runtimes-no-command", "install", "show", rt(status=2))
    add("runtimes-unknown-option", "--kubconfig", "--help", rt("install", "--kubconfig", counted, status=2))
    add(
        "runtimes-image-with-space",
        "--image",
        "no whitespace",
        rt("show", "--image", "tensorflow/tensorflow 2.21", status=2),
    )
    add("runtimes-image-empty", "--image", "e.g. tensorflow/tensorflow", rt("show", "--image", "", status=2))
    add(
        "runtimes-image-invisible",
        "--image",
        "no whitespace",
        rt("install", "--kubeconfig", counted, "--image", "tensorflow/tensorflow\u200b:2.21", status=2),
    )
    # ---------------------------------------------------------------- tfjob-preflight
    add(
        "preflight-missing-kubeconfig",
        "--kubeconfig",
        "give --kubeconfig FILE",
        pre("--kubeconfig", str(d / "nowhere.yaml")),
    )
    add(
        "preflight-server-down",
        "API server",
        "is the cluster running",
        pre("--kubeconfig", down, "--timeout", "2"),
        secret=SECRET,
    )
    add(
        "preflight-403",
        "403",
        "credentials",
        pre("--kubeconfig", str(servers[403].kubeconfig)),
        secret=SECRET,
    )
    add(
        "preflight-404",
        "404",
        "Kubernetes API server",
        pre("--kubeconfig", str(servers[404].kubeconfig)),
        secret=SECRET,
    )
    # ---------------------------------------------------------------- tfjob-local serve: options
    for value in ("70000", "-1", "http"):
        add(f"serve-port-{value}", "--port", "0 (any free port) to 65535", serve("--port", value))
    for value in ("LOUD", "5", ""):
        add(
            f"serve-log-level-{value or 'empty'}",
            "--log-level",
            "DEBUG, INFO, WARNING, ERROR",
            serve("--log-level", value),
        )
    for value in ("nan", "inf", "-1", "0", "soon"):
        add(
            f"serve-token-ttl-{value}",
            "--token-ttl",
            "a positive number of seconds",
            serve("--auth", "token", "--token-ttl", value),
        )
    for value in ("nan", "inf", "-5", "0"):
        add(
            f"serve-pods-ready-timeout-{value}",
            "--kueue-pods-ready-timeout",
            "a positive number of seconds",
            serve("--kueue-pods-ready-timeout", value),
        )
    faults = {
        "latency=inf": "latency=0.01",
        "latency=nan": "latency=0.01",
        "latency=-1": "latency=0.01",
        "rate=nan": "rate=0.05",
        "rate=2": "rate=0.05",
        "retry_after=inf": "retry_after=1",
        "stream_cut_after=nan+1": "stream_cut_after=0.5+2",
        "stream_cut_after=1": "stream_cut_after=0.5+2",
        "stream_cut_after=2+1": "stream_cut_after=0.5+2",
        "stream_cut_after=0.5+inf": "stream_cut_after=0.5+2",
        "seed=x": "seed=7",
        "seed=1.5": "seed=7",
        "kinds=bogus": "choose among",
        "kinds=": "choose among",
        "verbs=FETCH": "choose among",
        "colour=red": "known:",
        "rate": "key=value",
    }
    for spec, fix in faults.items():
        add(f"serve-faults-{spec}", "--faults", fix, serve("--faults", spec))
    add(
        "serve-host-not-here",
        "--host",
        "an address of this machine",
        serve("--auth", "token", "--host", "203.0.113.7"),
    )
    add(
        "serve-host-unresolvable",
        "--host",
        "an address of this machine",
        serve("--auth", "token", "--host", "no-such-host.invalid"),
    )
    add("serve-host-open-without-auth", "--host", "--auth token", serve("--host", "0.0.0.0"))
    add(
        "serve-kubeconfig-dir-missing",
        "--kubeconfig",
        "existing directory",
        serve("--kubeconfig", str(d / "no" / "kc.yaml")),
    )
    add(
        "serve-workdir-is-a-file",
        "--workdir",
        "a directory",
        lambda: run("tfjob-local", "serve", "--workdir", _write(d, "a-file", "x"), status=2),
    )
    add(
        "serve-kueue-integrations-unknown",
        "--kueue-integrations",
        "supported values",
        serve("--kueue-integrations", "tfjob"),
    )
    add("serve-apis-unknown", "--apis", "v1, trainjob", serve("--apis", "tfjob"))
    add(
        "serve-feature-gate-unknown",
        "--feature-gates",
        "TrainJobStatus=true",
        serve("--feature-gates", "Fast=true"),
    )
    add("serve-gpus-blank-id", "--gpus", "e.g. 0,1", serve("--gpus", "0,,a b"))
    add("serve-profile-unknown-version", "--profile", "kueue is one of 0.19, 0.20", serve("--profile", "kueue=0.21"))
    add("serve-profile-unknown-project", "--profile", "kueue=0.19|0.20", serve("--profile", "jobset=0.12"))

    # ---------------------------------------------------------------- --role files
    def role(name: str, text: str, *more: str) -> Any:
        return serve("--auth", "token", "--role", f"airflow={_write(d, name, text)}", *more)

    add(
        "role-verb-singular",
        "verb",
        "verbs:",
        role("role-verb.yaml", ROLE.format(meta="{name: r}", verbs="verb: [get]")),
    )
    add(
        "role-no-verbs",
        "verbs",
        "verbs:",
        role("role-noverbs.yaml", ROLE.format(meta="{name: r}", verbs="verbs: []")),
    )
    add(
        "role-verbs-string",
        "verbs",
        "list of strings",
        role("role-verbstr.yaml", ROLE.format(meta="{name: r}", verbs="verbs: get")),
    )
    add(
        "role-metadata-list",
        "metadata",
        "a mapping",
        role("role-metalist.yaml", ROLE.format(meta="[r]", verbs="verbs: [get]")),
    )
    add(
        "role-missing-file",
        "--role",
        "no such file",
        serve("--auth", "token", "--role", f"airflow={d / 'none.yaml'}"),
    )
    add(
        "role-malformed-with-secret",
        "--role",
        "fix the YAML",
        role(
            "role-secret.yaml",
            f"kind: Role\nmetadata: {{name: r}}\nrules: [{{verbs: [get], token: {SECRET}\n",
        ),
        secret=SECRET,
    )
    add(
        "role-without-auth",
        "--role",
        "--auth token",
        serve(
            "--role",
            f"airflow={_write(d, 'role-ok.yaml', ROLE.format(meta='{name: r}', verbs='verbs: [get]'))}",
        ),
    )
    add("role-alias-bomb", "--role", "without anchors and aliases", role("role-bomb.yaml", ALIAS_BOMB))

    # ---------------------------------------------------------------- --kueue-objects files
    def kq(name: str, text: str) -> Any:
        return serve("--kueue-objects", _write(d, name, text))

    add(
        "kueue-malformed-with-secret",
        "--kueue-objects",
        "fix the YAML",
        kq("kq-secret.yaml", f"kind: ClusterQueue\nmetadata: {{name: cq, password: {SECRET}\nspec: {{}}\n"),
        secret=SECRET,
    )
    add(
        "kueue-secret-file-not-yaml",
        "--kueue-objects",
        "fix the YAML",
        kq("kq-shadow", f"root:$6${SECRET}:19000:0:99999:7:::\ndaemon:*: [x\n"),
        secret=SECRET,
    )
    add("kueue-alias-bomb", "--kueue-objects", "without anchors and aliases", kq("kq-bomb.yaml", ALIAS_BOMB))
    add(
        "kueue-file-too-big",
        "--kueue-objects",
        "MiB",
        kq(
            "kq-big.yaml",
            CLUSTER_QUEUE.format(extra_meta=", annotations: {a: " + "x" * (8 << 20) + "}", groups=GROUPS),
        ),
    )
    add(
        "kueue-annotation-too-big",
        "metadata.annotations",
        "256 KiB",
        kq(
            "kq-annot.yaml",
            CLUSTER_QUEUE.format(extra_meta=", annotations: {a: " + "x" * (300 << 10) + "}", groups=GROUPS),
        ),
    )
    add(
        "kueue-unknown-kind",
        "kind",
        "ResourceFlavor, ClusterQueue, LocalQueue",
        kq("kq-kind.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n"),
    )
    add(
        "kueue-no-kind",
        "kind",
        "ResourceFlavor, ClusterQueue, LocalQueue",
        kq("kq-nokind.yaml", "metadata: {name: d}\n"),
    )
    add(
        "kueue-string-resource-groups",
        "spec.resourceGroups",
        "a list",
        kq("kq-rg.yaml", CLUSTER_QUEUE.format(extra_meta="", groups="cpu=4")),
    )
    add(
        "kueue-metadata-list",
        "metadata",
        "a mapping",
        kq("kq-metalist.yaml", "kind: ResourceFlavor\nmetadata: [rf]\n"),
    )
    add(
        "kueue-no-name",
        "metadata.name",
        "give the object a name",
        kq("kq-noname.yaml", "kind: ResourceFlavor\nmetadata: {}\n"),
    )
    add("kueue-scalar-document", "document 1", "a Kueue object", kq("kq-scalar.yaml", "just a string\n"))
    add(
        "kueue-duplicate-key",
        "--kueue-objects",
        "fix the YAML",
        kq("kq-dup.yaml", "kind: ResourceFlavor\nkind: ClusterQueue\nmetadata: {name: rf}\n"),
    )
    add(
        "kueue-wrong-api-version",
        "apiVersion",
        "kueue.x-k8s.io/v1beta2",
        kq("kq-apiv.yaml", "apiVersion: v1\nkind: ResourceFlavor\nmetadata: {name: rf}\n"),
    )
    add(
        "kueue-missing-file",
        "--kueue-objects",
        "no such file",
        serve("--kueue-objects", str(d / "none.yaml")),
    )
    # A bare YAML list is refused as kubectl refuses it; a List's bad item is named by its place.
    add(
        "kueue-bare-list",
        "document 1",
        "kind: List",
        kq("kq-barelist.yaml", "- kind: ResourceFlavor\n  metadata: {name: rf}\n- 7\n"),
    )
    add(
        "kueue-list-with-bad-item",
        "document 1 item 2",
        "a Kueue object",
        kq("kq-listbad.yaml", "kind: List\napiVersion: v1\nitems:\n- kind: ResourceFlavor\n  metadata: {name: rf}\n- 7\n"),
    )
    add(
        "kueue-priority-value-word",
        "document 2 (WorkloadPriorityClass high): value",
        "write value as a whole number",
        kq(
            "kq-wpc.yaml",
            "kind: ResourceFlavor\nmetadata: {name: rf}\n---\n"
            "apiVersion: kueue.x-k8s.io/v1beta2\nkind: WorkloadPriorityClass\nmetadata: {name: high}\nvalue: high\n",
        ),
    )
    return out


@pytest.fixture(scope="module")
def places(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Path, RequestCounter, dict[int, FixedServer]]]:
    """The cases' folder, the request counter and the fixed-status servers, for the whole module."""
    d = tmp_path_factory.mktemp("cli")
    (d / "work").mkdir()
    servers = {
        code: FixedServer(d, code, reason)
        for code, reason in (
            (401, "Unauthorized"),
            (403, "Forbidden"),
            (404, "NotFound"),
            (500, "InternalError"),
        )
    }
    try:
        with RequestCounter(d) as counter:
            yield d, counter, servers
    finally:
        for server in servers.values():
            server.close()


@pytest.fixture(scope="module")
def judgements(places: tuple[Path, RequestCounter, dict[int, FixedServer]]) -> dict[str, Judgement]:
    d, counter, servers = places
    line = FigureLine("command-line")
    for case in cases(d, counter, servers):
        line.add(judge(case, refusals=(CliRefusal,), counter=counter))
    line.write()
    print(line.line())
    return {j.case.id: j for j in line.judgements}


def test_figure_line(judgements: dict[str, Judgement]) -> None:
    line = FigureLine("command-line", list(judgements.values()))
    assert len(judgements) >= 50
    assert line.failures() == [], "\n".join(str(f) for f in line.failures())


def _case_ids() -> list[str]:
    d = Path("/nonexistent")

    class _NoCounter:
        kubeconfig = d / "kubeconfig"

    ids: list[str] = []
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        for case in cases(Path(tmp), _NoCounter(), {c: _IdsOnly(Path(tmp), c) for c in (401, 403, 404, 500)}):  # type: ignore[arg-type]
            ids.append(case.id)
    return ids


class _IdsOnly:
    def __init__(self, directory: Path, code: int) -> None:
        self.kubeconfig = directory / f"kubeconfig-{code}"


@pytest.mark.parametrize("case_id", _case_ids())
def test_case(judgements: dict[str, Judgement], case_id: str) -> None:
    judgement = judgements[case_id]
    assert judgement.outcome == "refused" and not judgement.leaked, str(judgement)


# One case of each tool and of each way to refuse: argparse's usage error, a failure after a client's
# retries (whose warnings must not reach stderr), a file's error raised before the start (with a secret in
# the file), and preflight's Airflow import.
INSTALLED_WAY = (
    "runtimes-unknown-option",
    "runtimes-server-down",
    "preflight-server-down",
    "serve-port-70000",
    "role-malformed-with-secret",
)


def _same(text: str) -> str:
    """A refusal's line without what differs from one run to another: numbers (the closed server's port,
    which each building of the table picks; how many attempts preflight's retries made in their 2 s) and
    an object's address."""
    return re.sub(r"\d+", "N", re.sub(r"0x[0-9a-f]+", "0x-", text))


@pytest.mark.parametrize("case_id", INSTALLED_WAY)
def test_the_installed_way(
    places: tuple[Path, RequestCounter, dict[int, FixedServer]],
    judgements: dict[str, Judgement],
    case_id: str,
) -> None:
    """The case as a user's shell runs it (a new process): refused with the expected exit status, one line,
    no traceback, no request, no secret, and the same line as in-process."""
    d, counter, servers = places
    (case,) = [c for c in cases(d, counter, servers, run=run_tool) if c.id == case_id]
    judgement = judge(case, refusals=(CliRefusal,), counter=counter)
    assert judgement.outcome == "refused" and not judgement.leaked, str(judgement)
    assert _same(judgement.detail) == _same(judgements[case_id].detail)


def _loud(argv: list[str]) -> int:
    logging.getLogger("airflow_tfjob.probe").warning("a warning logged on the way")
    print("tool: error: --opt: give a number", file=sys.stderr)
    return 2


def _warns(argv: list[str]) -> int:
    warnings.warn("a warning shown on the way", UserWarning, stacklevel=1)
    print("tool: error: --opt: give a number", file=sys.stderr)
    return 2


def _raises(argv: list[str]) -> int:
    raise ValueError("--opt: give a number")


def _exits(argv: list[str]) -> int:
    print("tool: error: --opt: give a number", file=sys.stderr)
    raise SystemExit(2)


def _deprecated(argv: list[str]) -> int:
    warnings.warn("a deprecation Python hides by default", DeprecationWarning, stacklevel=1)
    print("tool: error: --opt: give a number", file=sys.stderr)
    return 2


@pytest.mark.parametrize(
    ("main", "refused"),
    [(_loud, False), (_warns, False), (_raises, False), (_exits, True), (_deprecated, True)],
)
def test_the_in_process_runner_sees_what_a_process_shows(
    main: Callable[[list[str]], int], refused: bool
) -> None:
    """A logged warning, a shown warning or an exception is a second stderr line or a traceback in a new
    process: in-process too. A SystemExit's status counts; a DeprecationWarning is hidden, as by default."""
    expected: type[Exception] = CliRefusal if refused else CliOutcome
    with pytest.raises(expected, match="--opt"):
        call_main(main, [], status=2)
    assert logging.root.manager.disable == logging.NOTSET


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    """--debug is how a user asks for the traceback a refusal leaves out."""
    down = kubeconfig(tmp_path / "kc", f"http://127.0.0.1:{closed_port()}")
    done = subprocess.run(
        [sys.executable, "-m", TOOLS["tfjob-runtimes"], "install", "--kubeconfig", str(down), "--debug"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0 and "Traceback" in done.stderr and "is the cluster running" in done.stderr


def test_kueue_objects_list_document_is_loaded(tmp_path: Path) -> None:
    """A List of objects (as `kubectl get -o yaml` writes them) is loaded, not silently dropped; a bare
    YAML list is refused, as kubectl refuses it, rather than read in part."""
    from airflow_tfjob.local.kueue.startobjects import load_objects

    items = (
        "- apiVersion: kueue.x-k8s.io/v1beta2\n  kind: ResourceFlavor\n  metadata: {name: rf}\n"
        "- apiVersion: kueue.x-k8s.io/v1beta2\n  kind: LocalQueue\n"
        "  metadata: {name: q, namespace: default}\n  spec: {clusterQueue: cq}\n"
    )
    path = tmp_path / "objects.yaml"
    path.write_text("apiVersion: v1\nkind: List\nitems:\n" + items)
    assert [o["kind"] for o in load_objects([path])] == ["ResourceFlavor", "LocalQueue"]
    path.write_text(items)
    with pytest.raises(ValueError, match=r"document 1 is a YAML list .* which kubectl refuses too"):
        load_objects([path])


def test_serve_failing_at_start_is_one_line(tmp_path: Path) -> None:
    """A failure only the start can see (the port is taken) is exit 1 and one line, not a traceback."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        with pytest.raises(CliRefusal, match=f"--port {port} on 127.0.0.1 is taken.*give another --port"):
            run_tool("tfjob-local", "serve", "--port", port, "--workdir", str(tmp_path), status=1)
