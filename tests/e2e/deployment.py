"""An Airflow deployment as users run it, on this machine: the local cluster (`tfjob-local serve`), then
`airflow api-server`, `scheduler` (LocalExecutor), `dag-processor` and `triggerer`, each its own process
group on 127.0.0.1, sharing a temporary AIRFLOW_HOME and its SQLite database.

SQLite rather than PostgreSQL: Airflow 3 lets the LocalExecutor run on SQLite (it is what `airflow
standalone` uses), so the deployment needs nothing outside the virtualenv and starts in seconds; a
PostgreSQL server from Debian would add its install and start-up to every CI run for no behaviour this
test looks at (the components talk to each other over the execution API either way).

Auth: the simple auth manager with ``[core] simple_auth_manager_all_admins``: ``GET /auth/token`` hands
out an admin JWT without credentials (the REST client sends it as a bearer token), and the UI's
``/auth/token/login`` sets the same token as the browser's cookie. All components share one JWT secret.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx
from airflow_database import migrate

from airflow_tfjob.local.node.ports import host_ports

VENV_BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[2]
COMPONENTS = ("api-server", "scheduler", "dag-processor", "triggerer")
T = TypeVar("T")


class StepTimeout(AssertionError):
    """A step of the deployment test did not happen in time; the message carries the components' logs."""


def free_port() -> int:
    """A port outside the ephemeral range, reserved host-wide for this process's life (node/ports.py):
    an outgoing connection or another test cannot take it before the server binds it."""
    return host_ports().reserve()


class Deployment:
    """The running components, their logs (one file per component) and a REST API v2 client."""

    def __init__(self, home: Path, logs: Path) -> None:
        self.home = home
        self.logs = logs
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.processes: dict[str, subprocess.Popen[bytes]] = {}
        self.kubeconfig: Path | None = None
        self.cluster_url = ""
        self.env: dict[str, str] = {}
        self._api: httpx.Client | None = None

    # ------------------------------------------------------------------ processes

    #: Components started at a lower CPU priority (`nice`), by name; their children inherit it.
    NICE: dict[str, int] = {}

    def _start(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        # Appended to: a component restarted by stopped() goes on in the same file.
        out = (self.logs / f"{name}.log").open("ab")
        if self.NICE.get(name):
            argv = ["nice", "-n", str(self.NICE[name]), *argv]  # nice execs it: the same process
        # A session of its own: stop() signals the whole group, so the task processes the
        # LocalExecutor forks and the replicas the cluster starts go with their parent.
        proc = subprocess.Popen(argv, env={**self.env, **(env or {})} or None, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True, cwd=self.home)
        out.close()
        self.processes[name] = proc
        return proc

    def start_cluster(self) -> None:
        proc = self._start("tfjob-local", [str(VENV_BIN / "tfjob-local"), "serve",
                                           "--workdir", str(self.home / "cluster"),
                                           "--kubeconfig", str(self.home / "kubeconfig"),
                                           "--log-level", "INFO"])
        ready = self.logs / "tfjob-local.log"
        line = self.wait("tfjob-local's ready line", lambda: next(
            (x for x in ready.read_text().splitlines() if x.startswith("ready ")), None), 60, proc)
        self.cluster_url, self.kubeconfig = line.split()[1], Path(line.split()[2])

    def api_server_env(self) -> dict[str, str]:
        """The API server's settings, on this deployment's port, with fresh secrets (every deployment
        shape serves its UI and the task SDK's execution API this way)."""
        return {
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.url}/execution/",
            "AIRFLOW__API__BASE_URL": self.url,
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(self.port),
            "AIRFLOW__API__WORKERS": "1",
            "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(64),
            "AIRFLOW__API__SECRET_KEY": secrets.token_urlsafe(32),
        }

    def start_airflow(self, dags_folder: Path, extra_env: dict[str, str]) -> None:
        extra = {"kube_config_path": str(self.kubeconfig), "namespace": "default",
                 # The replicas' "Logs" links: the local cluster serves pod logs as Kubernetes does.
                 "logs_url_template": self.cluster_url + "/api/v1/namespaces/{namespace}/pods/{pod}/log"}
        self.env = {
            **os.environ,
            "AIRFLOW_HOME": str(self.home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            # Five processes write to one SQLite file: with sqlite3's default 5 s busy timeout a
            # PATCH of the API server once failed with a database error under load here.
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{self.home / 'airflow.db'}?timeout=30",
            "AIRFLOW__CORE__PARALLELISM": "4",
            **self.api_server_env(),
            # A new DAG run is picked up, and the DAG folder parsed, in seconds rather than minutes.
            "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "1",
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "30",
            "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "1",
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
            # Not the fixed default ports: another deployment on this machine must not collide.
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
            "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
            "AIRFLOW_CONN_KUBERNETES_DEFAULT": json.dumps({"conn_type": "kubernetes", "extra": extra}),
            "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            **extra_env,
        }
        migrate(self.env)
        for name in COMPONENTS:
            self._start_component(name)
        self.wait("the API server", self._api_ready, 90, self.processes["api-server"])

    @contextmanager
    def stopped(self, name: str) -> Iterator[None]:
        """The component ``name`` (its whole process group) ended with SIGTERM, started again after.

        Ended rather than frozen with SIGSTOP: a component frozen inside a transaction holds the
        SQLite database locked, and every other component's write then waits out the busy timeout
        (a user's PATCH once timed out so).
        """
        proc = self.processes[name]
        _signal_group(proc, signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            _signal_group(proc, signal.SIGKILL)
            proc.wait()
        try:
            yield
        finally:
            self._start_component(name)

    def _start_component(self, name: str) -> None:
        """One of COMPONENTS, as `airflow <name>` (at the start, and again after stopped())."""
        self._start(name, [str(VENV_BIN / "airflow"), name])

    def stop(self) -> None:
        """SIGTERM to every group, then SIGKILL to what is left: nothing outlives the test."""
        for proc in reversed(list(self.processes.values())):
            _signal_group(proc, signal.SIGTERM)
        deadline = time.monotonic() + 15
        for proc in self.processes.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
            _signal_group(proc, signal.SIGKILL)
            proc.wait()
        # A LocalExecutor worker puts itself in a process group of its own (and overwrites its
        # environment with its title), so the groups above can miss it: it is known by its working
        # directory, which is this deployment's home.
        _kill_processes_in(self.home)
        if self._api is not None:
            self._api.close()

    # ------------------------------------------------------------------ waiting, loudly

    def wait(self, what: str, probe: Callable[[], T | None], timeout: float,
             watched: subprocess.Popen[bytes] | None = None, interval: float = 0.2) -> T:
        """The first truthy result of probe() (tried every ``interval`` seconds); on timeout (or a watched
        component dying), fail with the components' logs."""
        deadline = time.monotonic() + timeout
        while True:
            value = probe()
            if value:
                return value
            if watched is not None and watched.poll() is not None:
                raise StepTimeout(f"{what}: the component exited ({watched.returncode})\n{self.log_tails()}")
            if time.monotonic() > deadline:
                raise StepTimeout(f"{what}: not within {timeout:.0f} s\n{self.log_tails()}")
            time.sleep(interval)

    def log_tails(self, lines: int = 60) -> str:
        parts = []
        for path in sorted(self.logs.glob("*.log")):
            tail = path.read_text(errors="replace").splitlines()[-lines:]
            parts.append(f"===== {path.name} (last {len(tail)} lines)\n" + "\n".join(tail))
        for path in sorted((self.home / "logs").rglob("*.log")) if (self.home / "logs").exists() else []:
            if "dag_id=" in str(path):
                tail = path.read_text(errors="replace").splitlines()[-lines:]
                parts.append(f"===== task log {path.relative_to(self.home)}\n" + "\n".join(tail))
        return "\n".join(parts)

    # ------------------------------------------------------------------ REST API v2

    def _api_ready(self) -> bool:
        try:
            return httpx.get(f"{self.url}/api/v2/monitor/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    @property
    def api(self) -> httpx.Client:
        if self._api is None:
            token = httpx.get(f"{self.url}/auth/token", timeout=10).json()["access_token"]
            self._api = httpx.Client(base_url=f"{self.url}/api/v2", timeout=30,
                                     headers={"Authorization": f"Bearer {token}"})
        return self._api

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            response = self.api.request(method, path, **kwargs)
        except httpx.TimeoutException as error:  # say where each component was, not only the client's error
            raise StepTimeout(f"{method} {path}: no answer within {self.api.timeout.read} s ({error!r})\n"
                              f"{self.log_tails()}") from error
        assert response.status_code < 300, f"{method} {path}: {response.status_code} {response.text}"
        return response.json() if response.content else None


def _kill_processes_in(home: Path) -> None:
    root = str(home.resolve())
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue  # gone, or not ours to read
        if cwd == root or cwd.startswith(root + os.sep):
            try:
                os.kill(int(entry.name), signal.SIGKILL)
            except ProcessLookupError:
                pass


def _signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


@contextmanager
def deployment(home: Path, logs: Path, dags_folder: Path, extra_env: dict[str, str]) -> Iterator[Deployment]:
    logs.mkdir(parents=True, exist_ok=True)
    running = Deployment(home, logs)
    try:
        running.start_cluster()
        running.start_airflow(dags_folder, extra_env)
        yield running
    finally:
        running.stop()
