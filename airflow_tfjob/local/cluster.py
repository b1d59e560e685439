"""Assembly of the local cluster: store + API server + TFJob controller + process runner.

`ClusterRuntime` is the async assembly (used by `tfjob-local serve`); `LocalCluster` runs it on a thread
with its own event loop so that synchronous code (tests, scripts, `airflow dags test`) can use it as a
context manager. The controller and runner are imported lazily: the API server works without them, so
API-level tests do not depend on those modules.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import secrets
import socket
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import yaml

from airflow_tfjob.local.admission import TFJobAdmission
from airflow_tfjob.local.apiserver import ApiServer
from airflow_tfjob.local.controller import Controller
from airflow_tfjob.local.podlogs import PodLogs
from airflow_tfjob.local.runner import Runner
from airflow_tfjob.local.store import Store

log = logging.getLogger(__name__)
T = TypeVar("T")
CONTEXT_NAME = "tfjob-local"


class PortAllocator:
    """Hands out a 127.0.0.1 TCP port that nothing listens on right now, for TF_CONFIG addresses.

    It keeps no state: the controller's `PortMap` is the bookkeeping. It holds the ports of every live
    TFJob (so two replicas never share one, even before their servers bind), re-learns them from the
    `local.tfjob.dev/host-port` annotations, and releases a job's ports when the TFJob is deleted. A port
    still bound by a terminating replica is not handed out again, because the kernel does not offer it.
    """

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host

    def allocate(self) -> int:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((self.host, 0))
            return int(sock.getsockname()[1])

    def __call__(self) -> int:
        return self.allocate()


def write_kubeconfig(path: Path, url: str, token: str) -> None:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CONTEXT_NAME, "cluster": {"server": url}}],
        "users": [{"name": CONTEXT_NAME, "user": {"token": token}}],
        "contexts": [{"name": CONTEXT_NAME, "context": {"cluster": CONTEXT_NAME, "user": CONTEXT_NAME,
                                                        "namespace": "default"}}],
        "current-context": CONTEXT_NAME,
        "preferences": {},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(yaml.safe_dump(config, sort_keys=False))
    tmp.replace(path)


class ClusterRuntime:
    """The running parts of one local cluster, on the current event loop."""

    def __init__(
        self,
        *,
        gpus: list[str] | None = None,
        workdir: Path | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        kubeconfig_path: Path | None = None,
        history_limit: int = 1000,
        bookmark_interval: float = 60.0,
        controller: bool = True,
        runner: bool = True,
    ) -> None:
        self.workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="tfjob-local-"))
        self.kubeconfig_path = Path(kubeconfig_path) if kubeconfig_path else self.workdir / "kubeconfig"
        self.gpus = list(gpus or [])
        self.token = secrets.token_hex(16)
        self.store = Store(history_limit=history_limit, admission=TFJobAdmission())
        self.podlogs = PodLogs()
        self.ports = PortAllocator()
        self.apiserver = ApiServer(self.store, self.podlogs, host=host, port=port,
                                   bookmark_interval=bookmark_interval)
        self._want_controller = controller
        self._want_runner = runner
        self.controller: Controller | None = None
        self.runner: Runner | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self.url = ""

    async def start(self) -> str:
        self.url = await self.apiserver.start()
        write_kubeconfig(self.kubeconfig_path, self.url, self.token)
        if self._want_controller:
            self.controller = Controller(self.store, port_allocator=self.ports)
            self._tasks.append(asyncio.create_task(self._supervise("controller", self.controller.run())))
        if self._want_runner:
            self.runner = Runner(self.store, self.podlogs, node_name="local", gpus=self.gpus,
                                 workdir=self.workdir)
            self._tasks.append(asyncio.create_task(self._supervise("runner", self.runner.run())))
        return self.url

    @staticmethod
    async def _supervise(name: str, coro: Any) -> None:
        try:
            await coro
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("local cluster %s stopped with an error", name)

    async def stop(self) -> None:
        # The runner first: it must kill every process it started, whatever else fails.
        if self.runner is not None:
            try:
                await self.runner.shutdown()
            except Exception:
                log.exception("runner shutdown failed")
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        self._tasks.clear()
        await self.apiserver.stop()


class LocalCluster:
    """A local cluster on a background thread: `with LocalCluster() as c: ... c.url, c.kubeconfig_path`."""

    def __init__(
        self,
        gpus: list[str] | None = None,
        workdir: Path | None = None,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        history_limit: int = 1000,
        bookmark_interval: float = 60.0,
        controller: bool = True,
        runner: bool = True,
    ) -> None:
        self.runtime = ClusterRuntime(
            gpus=gpus, workdir=workdir, host=host, port=port, history_limit=history_limit,
            bookmark_interval=bookmark_interval, controller=controller, runner=runner,
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stopped: asyncio.Event | None = None

    @property
    def url(self) -> str:
        return self.runtime.url

    @property
    def kubeconfig_path(self) -> Path:
        return self.runtime.kubeconfig_path

    @property
    def store(self) -> Store:
        return self.runtime.store

    @property
    def podlogs(self) -> PodLogs:
        return self.runtime.podlogs

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        assert self._loop is not None, "cluster not started"
        return self._loop

    def request_count(
        self, verb: str | None = None, resource: str | None = None, subresource: str | None = None
    ) -> int:
        """API requests received so far, e.g. `request_count("WATCH", "tfjobs")` (see requestmetrics.py:
        verbs GET, LIST, WATCH, POST, PUT, PATCH, DELETE, DELETECOLLECTION; None matches any)."""
        metrics = self.runtime.apiserver.metrics
        return self.call(lambda: metrics.request_count(verb, resource, subresource))

    def watch_count(self, resource: str | None = None) -> int:
        """Watch streams open on the API server now."""
        metrics = self.runtime.apiserver.metrics
        return self.call(lambda: metrics.watch_count(resource))

    def start(self) -> LocalCluster:
        started: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._thread = threading.Thread(target=self._main, args=(started,), name="tfjob-local", daemon=True)
        self._thread.start()
        started.result()  # re-raises a start-up failure in the caller
        return self

    def _main(self, started: concurrent.futures.Future[None]) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        try:
            self._stopped = asyncio.Event()
            loop.run_until_complete(self.runtime.start())
        except BaseException as exc:
            started.set_exception(exc)
            loop.close()
            return
        started.set_result(None)
        try:
            loop.run_until_complete(self._stopped.wait())
            loop.run_until_complete(self.runtime.stop())
        finally:
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    def call(self, fn: Callable[[], T], timeout: float = 30.0) -> T:
        """Run `fn` on the cluster's loop thread (the store is not thread-safe) and return its result."""

        async def run() -> T:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout)

    def stop(self) -> None:
        if self._thread is None or self._loop is None or self._stopped is None:
            return
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stopped.set)
            self._thread.join(timeout=60)
        self._thread = None

    def __enter__(self) -> LocalCluster:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
