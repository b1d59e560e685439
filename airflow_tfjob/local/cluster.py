"""Assembly of the local cluster: store + API server + one job controller per kind + process runner.

`ClusterRuntime` is the async assembly (used by `tfjob-local serve`); `LocalCluster` runs it on a thread
with its own event loop so that synchronous code (tests, scripts, `airflow dags test`) can use it as a
context manager. The controller and the runner are optional (`controller=False`, `runner=False`): API-level
tests run the store and the API server alone.
"""

from __future__ import annotations

import asyncio
import base64
import concurrent.futures
import logging
import secrets
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

import yaml

from airflow_tfjob.local.admission.trainjobs import TrainAdmission
from airflow_tfjob.local.admission.v1jobs import JobAdmission
from airflow_tfjob.local.apiserver.auth import TokenAuthenticator
from airflow_tfjob.local.apiserver.rbac import Authorizer, RoleSource
from airflow_tfjob.local.apiserver.server import ApiServer
from airflow_tfjob.local.controllers.batch import BatchJobController
from airflow_tfjob.local.controllers.jobset import JobSetController
from airflow_tfjob.local.controllers.reconciler import Reconciler
from airflow_tfjob.local.controllers.trainjob.controller import TrainJobController
from airflow_tfjob.local.controllers.trainjob.runtimes import (
    SHIPPED_RUNTIMES,
    install_runtime,
    install_trainer,
)
from airflow_tfjob.local.controllers.trainjob.status import GATE, StatusServer
from airflow_tfjob.local.controllers.v1.registry import CONTROLLERS
from airflow_tfjob.local.credential import TokenAuthority, exec_command, write_private
from airflow_tfjob.local.faults import FaultInjector, FaultPlan
from airflow_tfjob.local.kueue.options import KueueOptions
from airflow_tfjob.local.kueue.reasons import Reasons
from airflow_tfjob.local.model.profiles import UNADMITTED_OBSERVABILITY, Profile, TrainerRules
from airflow_tfjob.local.model.resources import DEFAULT_APIS, JsonDict, served_groups
from airflow_tfjob.local.multikueue import check_workers, manager_objects, worker_names, worker_options
from airflow_tfjob.local.node.podlogs import PodLogs
from airflow_tfjob.local.node.ports import host_ports
from airflow_tfjob.local.node.runner import Runner
from airflow_tfjob.local.options import CREDENTIALS, check_options
from airflow_tfjob.local.store.core import Admission, Store
from airflow_tfjob.local.tls import ServerTls, make_server_tls

if TYPE_CHECKING:
    from airflow_tfjob.local.kueue.controller import KueueController

log = logging.getLogger(__name__)
T = TypeVar("T")
CONTEXT_NAME = "tfjob-local"
ADMIN = "admin"


class Admissions:
    """The admission chain of the store: the v1 job kinds' (admission/v1jobs.py), then Trainer v2's and
    JobSet's."""

    def __init__(self, rules: TrainerRules | None = None) -> None:
        self.train = TrainAdmission(rules)
        self.chain = (JobAdmission(), self.train)

    def admit(self, rtype: str, operation: str, obj: JsonDict, old: JsonDict | None) -> None:
        for admission in self.chain:
            admission.admit(rtype, operation, obj, old)


def write_kubeconfig(path: Path, url: str, user: dict[str, Any], ca_pem: bytes | None = None) -> None:
    """Write a kubeconfig (mode 0600: it holds a credential) whose user entry is `user`, e.g.
    ``{"token": ...}`` or ``{"exec": ...}``, trusting `ca_pem` for an HTTPS server."""
    cluster: dict[str, Any] = {"server": url}
    if ca_pem is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": CONTEXT_NAME, "cluster": cluster}],
        "users": [{"name": CONTEXT_NAME, "user": user}],
        "contexts": [{"name": CONTEXT_NAME, "context": {"cluster": CONTEXT_NAME, "user": CONTEXT_NAME,
                                                        "namespace": "default"}}],
        "current-context": CONTEXT_NAME,
        "preferences": {},
    }
    write_private(path, yaml.safe_dump(config, sort_keys=False))


def _check_object_versions(options: KueueOptions, profile: Profile) -> None:
    """A Kueue object to create at start written at a version the profile's Kueue does not serve is
    refused, as `kubectl apply` of it is refused by such a cluster ("no matches for kind")."""
    withdrawn = profile.withdrawn()
    for i, obj in enumerate(options.objects):
        version = obj.get("apiVersion")
        if version in withdrawn:
            name = (obj.get("metadata") or {}).get("name")
            current = (profile.serves(str(version).partition("/")[0]) or ("",))[0]
            raise ValueError(
                f"kueue objects[{i}] ({obj.get('kind')} {name!r}, --kueue-objects): apiVersion {version} is not "
                f"served by {profile.kueue.name} (profile {profile.name}); write it as "
                f"{str(version).partition('/')[0]}/{current}"
            )


class ClusterRuntime:
    """The running parts of one local cluster, on the current event loop. `profile` picks the upstream
    releases it stands for (model/profiles.py; default Kueue 0.19, Trainer 2.3): today their served API
    versions and the Trainer release its install records."""

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
        faults: FaultPlan | None = None,
        auth: bool = False,
        token_ttl: float = 900.0,
        credential: str = "exec",
        roles: Mapping[str, Sequence[RoleSource]] | None = None,
        kueue: bool | Mapping[str, Any] | KueueOptions | None = None,
        apis: Sequence[str] = DEFAULT_APIS,
        feature_gates: Mapping[str, bool] | None = None,
        profile: str | Mapping[str, str] | Profile | None = None,
        multikueue_workers: int = 0,
    ) -> None:
        # Every option is checked before anything is created.
        self.profile = Profile.of(profile)
        kueue_options = check_workers(multikueue_workers, KueueOptions.of(kueue))
        if kueue_options is not None:
            _check_object_versions(kueue_options, self.profile)
        self.apis = tuple(apis)
        self.served_groups = served_groups(self.apis)  # ValueError naming the choices
        self.feature_gates = dict(feature_gates or {})
        check_options(host=host, auth=auth, credential=credential, token_ttl=token_ttl, roles=roles,
                      feature_gates=self.feature_gates)
        authorizer = Authorizer(roles) if roles else None
        self.workdir = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="tfjob-local-"))
        self.kubeconfig_path = Path(kubeconfig_path) if kubeconfig_path else self.workdir / "kubeconfig"
        self.gpus = list(gpus or [])
        # MultiKueue: each worker a whole cluster of its own on 127.0.0.1 (own port, store, controllers and
        # node), reached by the manager through the kubeconfig in its Secret; the replicas run there only,
        # so the manager runs no node (multikueue.py).
        self.workers: dict[str, ClusterRuntime] = {}
        self.lost_workers: set[str] = set()  # stopped by lose_worker, not stopped again
        if multikueue_workers and kueue_options is not None:  # check_workers: Kueue is on with workers
            self.workers = {
                name: ClusterRuntime(gpus=gpus, workdir=self.workdir / "workers" / name,
                                     history_limit=history_limit, bookmark_interval=bookmark_interval,
                                     controller=controller, runner=runner, kueue=worker_options(kueue_options),
                                     apis=apis, feature_gates=feature_gates, profile=self.profile)
                for name in worker_names(multikueue_workers)}
            runner = False
        self.token = secrets.token_hex(16)
        self.token_ttl = float(token_ttl)
        self.credential = credential
        self.authority = TokenAuthority(self.workdir / "token-secret") if auth else None
        self.tls: ServerTls | None = make_server_tls(self.workdir / "tls", host) if auth else None
        self.authorizer = authorizer
        chain = Admissions(self.profile.trainer.trainer_rules)
        admission: Admission = chain
        self.kueue: KueueController | None = None
        extensions = None
        if kueue_options is not None:
            from airflow_tfjob.local.kueue.assembly import Kueue  # the emulation costs nothing when off

            assembly = Kueue(kueue_options)
            admission = assembly.webhook(admission)
        self.store = Store(history_limit=history_limit, admission=admission)
        chain.train.store = self.store
        if kueue_options is not None:
            # The profile's Kueue writes the granular QuotaReserved reasons when its gate is on (0.20).
            granular = self.profile.kueue.gates.get(UNADMITTED_OBSERVABILITY, False)
            self.kueue = assembly.controller(self.store, Reasons(granular=granular))
            assembly.create_objects(self.store)
            extensions = assembly.extensions(self.kueue)
        self.podlogs = PodLogs()
        self.ports = host_ports()
        self.faults = FaultInjector(faults)
        # Authentication, then authorisation, then faults: a real server throttles authorised requests.
        middlewares: list[Any] = []
        sources = [self.faults.render]
        self.authenticator = TokenAuthenticator(self.authority) if self.authority is not None else None
        if self.authenticator is not None:
            middlewares.append(self.authenticator.middleware)
        if authorizer is not None:
            middlewares.append(authorizer.middleware)
            sources.append(authorizer.render)
        middlewares.append(self.faults.middleware)
        self.apiserver = ApiServer(self.store, self.podlogs, host=host, port=port,
                                   bookmark_interval=bookmark_interval, middlewares=middlewares,
                                   metrics_sources=sources,
                                   ssl_context=self.tls.server_context() if self.tls else None,
                                   extensions=extensions, served_groups=self.served_groups,
                                   withdrawn_versions=self.profile.withdrawn())
        self.status_server: StatusServer | None = None
        if self.feature_gates.get(GATE) and "trainjob" in self.apis:
            self.status_server = StatusServer(self.store, self.workdir)
        self._want_controller = controller
        self._want_runner = runner
        self.controllers: dict[str, Reconciler] = {}  # by kind: TFJob, ..., Job, JobSet, TrainJob
        self.runner: Runner | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self.url = ""

    async def start(self) -> str:
        """Start MultiKueue's workers (if any), then this cluster. A worker that started is stopped again
        when a later start fails: nothing it serves outlives a start that raised."""
        started: list[ClusterRuntime] = []
        try:
            for worker in self.workers.values():
                await worker.start()
                started.append(worker)
            return await self._start_here()
        except BaseException:
            for worker in started:
                try:
                    await worker.stop()
                except Exception:
                    log.exception("stopping a worker after a failed start")
            raise

    async def _start_here(self) -> str:
        self.url = await self.apiserver.start()
        if self.status_server is not None:
            await self.status_server.start()
        self.write_kubeconfig(self.kubeconfig_path, ADMIN, self.credential)
        if "trainjob" in self.apis:
            install_trainer(self.store, self.profile.trainer.tag.removeprefix("v"))
            for runtime in SHIPPED_RUNTIMES:
                self.install_runtime(runtime)
        if self._want_controller:
            if "v1" in self.apis:
                for kind, controller_type in CONTROLLERS.items():
                    self.controllers[kind] = controller_type(self.store, port_allocator=self.ports)
            self.controllers["Job"] = BatchJobController(self.store)
            if "trainjob" in self.apis:
                self.controllers["JobSet"] = JobSetController(self.store, port_allocator=self.ports)
                self.controllers["TrainJob"] = TrainJobController(
                    self.store, status_env=self.status_server.env if self.status_server else None,
                    rules=self.profile.trainer.trainer_rules)
            for kind, controller in self.controllers.items():
                self._tasks.append(asyncio.create_task(self._supervise(f"{kind} controller", controller.run())))
        if self.workers:
            kubeconfigs = {name: worker.kubeconfig_path.read_text() for name, worker in self.workers.items()}
            for plural, obj in manager_objects(kubeconfigs):
                self.store.create(plural, obj["metadata"].get("namespace"), obj)
        if self.kueue is not None:
            self._tasks.append(asyncio.create_task(self._supervise("kueue", self.kueue.run())))
        if self._want_runner:
            self.runner = Runner(self.store, self.podlogs, node_name="local", gpus=self.gpus,
                                 workdir=self.workdir)
            self._tasks.append(asyncio.create_task(self._supervise("runner", self.runner.run())))
        return self.url

    def install_runtime(self, manifest: JsonDict) -> JsonDict:
        return install_runtime(self.store, manifest)

    def issue_token(self, user: str, ttl: float | None = None) -> str:
        if self.authority is None:
            raise RuntimeError("token authentication is off: start the cluster with auth=True")
        return self.authority.issue(user, self.token_ttl if ttl is None else ttl)

    def write_kubeconfig(self, path: Path, user: str, credential: str = "exec") -> Path:
        """A kubeconfig for `user`: an exec plugin that mints fresh tokens, or a static token that
        expires after the TTL (``credential="static"``). Without authentication: the ignored token."""
        if credential not in CREDENTIALS:
            raise ValueError(f"credential must be one of {', '.join(CREDENTIALS)}, got {credential!r}")
        entry: dict[str, Any] = {"token": self.token}
        if self.authority is not None:
            entry = ({"exec": exec_command(self.authority.secret_file, user, self.token_ttl)}
                     if credential == "exec" else {"token": self.issue_token(user)})
        write_kubeconfig(Path(path), self.url, entry, self.tls.ca_pem if self.tls else None)
        return Path(path)

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
        for controller in self.controllers.values():
            controller.stopped()
        if self.status_server is not None:
            await self.status_server.stop()
        await self.apiserver.stop()
        for name, worker in self.workers.items():
            if name in self.lost_workers:
                continue
            try:
                await worker.stop()
            except Exception:
                log.exception("worker %s: stop failed", name)

    async def lose_worker(self, name: str) -> None:
        """MultiKueue's worker `name` is lost: the whole cluster stops (its pods killed, its API server
        gone), as a worker cluster that goes away; the manager notices through its connection. Its API
        server goes first, as when the network to it goes: what the worker does after (its replicas
        killed, its job failed by them) never reaches the manager, whose copy keeps the last status."""
        if name not in self.workers:
            raise ValueError(f"no MultiKueue worker {name!r}; the workers are {', '.join(self.workers) or 'none'}")
        if name not in self.lost_workers:
            self.lost_workers.add(name)
            await self.workers[name].apiserver.stop()
            await self.workers[name].stop()


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
        faults: FaultPlan | None = None,
        auth: bool = False,
        token_ttl: float = 900.0,
        credential: str = "exec",
        roles: Mapping[str, Sequence[RoleSource]] | None = None,
        kueue: bool | Mapping[str, Any] | KueueOptions | None = None,
        apis: Sequence[str] = DEFAULT_APIS,
        feature_gates: Mapping[str, bool] | None = None,
        profile: str | Mapping[str, str] | Profile | None = None,
        multikueue_workers: int = 0,
    ) -> None:
        self.runtime = ClusterRuntime(
            gpus=gpus, workdir=workdir, host=host, port=port, history_limit=history_limit,
            bookmark_interval=bookmark_interval, controller=controller, runner=runner, faults=faults,
            auth=auth, token_ttl=token_ttl, credential=credential, roles=roles, kueue=kueue, apis=apis,
            feature_gates=feature_gates, profile=profile, multikueue_workers=multikueue_workers,
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
    def ca_path(self) -> Path | None:
        """The CA of the HTTPS server (token authentication on), e.g. for `requests`' verify=; else None."""
        return self.runtime.tls.ca_path if self.runtime.tls else None

    @property
    def store(self) -> Store:
        return self.runtime.store

    @property
    def workers(self) -> tuple[str, ...]:
        """The MultiKueue worker clusters' names (`multikueue_workers`), `worker1` ...; () without."""
        return tuple(self.runtime.workers)

    def worker_kubeconfig(self, name: str) -> Path:
        """The kubeconfig of worker `name` (its API server's; the manager's Secret holds the same)."""
        return self.runtime.workers[name].kubeconfig_path

    def worker_store(self, name: str) -> Store:
        return self.runtime.workers[name].store

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

    def followed_pods(self, namespace: str, worker: str | None = None) -> set[str]:
        """The pods of `namespace` whose current log a `follow=true` stream reads now, on this cluster or
        on MultiKueue `worker`: a test holds a replica until the follow has reached it."""
        podlogs = self.runtime.workers[worker].podlogs if worker is not None else self.podlogs

        def followed() -> set[str]:
            return {pod for (ns, pod, container) in podlogs.runs()
                    if ns == namespace and (log := podlogs.current(ns, pod, container)) and log.followers > 0}

        return self.call(followed)

    def set_faults(self, plan: FaultPlan | None) -> None:
        """Replace the fault plan (None: no more faults; a stream already doomed to be cut is spared).
        The new plan's RNG starts from its seed. Safe from any thread."""
        self.runtime.faults.set_plan(plan)

    def fault_counts(self) -> dict[str, int]:
        """Faults injected so far, by kind (also `tfjob_local_injected_faults_total` on /metrics)."""
        return self.runtime.faults.counts()

    def install_runtime(self, manifest: JsonDict) -> JsonDict:
        """Install a (Cluster)TrainingRuntime manifest (a dict, e.g. from yaml.safe_load), replacing one of
        the same name: e.g. `cluster.install_runtime(runtime_manifest("tf", "tensorflow", {"numNodes": 2},
        "tensorflow/tensorflow:2.21.0"))` (controllers/trainjob/runtimes.py). Safe from any thread."""
        return self.call(lambda: self.runtime.install_runtime(manifest))

    def issue_token(self, user: str = ADMIN, ttl: float | None = None) -> str:
        """A bearer token for `user` (valid for `ttl` seconds, default the cluster's token_ttl)."""
        return self.runtime.issue_token(user, ttl)

    def expire_tokens(self) -> None:
        """Every token issued so far (kubeconfigs, exec plugin, issue_token) is invalid from now on; the
        exec plugin hands out valid ones again. Safe from any thread."""
        if self.runtime.authority is None:
            raise RuntimeError("token authentication is off: start the cluster with auth=True")
        self.runtime.authority.rotate()

    def kubeconfig_for(self, user: str, path: Path | None = None, credential: str = "exec") -> Path:
        """Write a kubeconfig that authenticates as `user` (see ClusterRuntime.write_kubeconfig)."""
        target = Path(path) if path else self.runtime.workdir / f"kubeconfig-{user}-{credential}"
        return self.runtime.write_kubeconfig(target, user, credential)

    def rejected_requests(self) -> int:
        """Requests answered 401 Unauthorized so far (0 without authentication)."""
        authenticator = self.runtime.authenticator
        return authenticator.rejected if authenticator is not None else 0

    def denied_requests(self) -> dict[tuple[str, str, str, str], int]:
        """RBAC 403s so far by (user, verb, resource incl. subresource, namespace)."""
        authorizer = self.runtime.authorizer
        return authorizer.denied() if authorizer is not None else {}

    def allowed_requests(self) -> dict[tuple[str, str, str, str, str], int]:
        """Requests RBAC let through so far by (user, verb, API group, resource incl. subresource,
        namespace): the permissions each user actually used ({} without roles)."""
        authorizer = self.runtime.authorizer
        return authorizer.allowed_requests() if authorizer is not None else {}

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

    def lose_worker(self, name: str, timeout: float = 30.0) -> None:
        """MultiKueue's worker `name` stops for good (ClusterRuntime.lose_worker). Safe from any thread."""
        asyncio.run_coroutine_threadsafe(self.runtime.lose_worker(name), self.loop).result(timeout)

    def lose_node(self, label_selector: str | None = None, timeout: float = 30.0) -> list[str]:
        """A node is lost: the running pods `label_selector` selects (None: all) die with it and are
        removed as the node lifecycle controller, taint eviction and PodGC remove them (node/runner.py,
        `Runner.lose_node`). Returns "namespace/name" of the lost pods. Safe from any thread."""
        runner = self.runtime.runner
        assert runner is not None, "the cluster runs no node (runner=False)"
        return asyncio.run_coroutine_threadsafe(runner.lose_node(label_selector), self.loop).result(timeout)

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
