"""MultiKueue's connection side on the manager (Kueue v0.19.2 pkg/controller/admissionchecks/multikueue/
multikueuecluster.go and admissioncheck.go): each MultiKueueCluster's kubeconfig loaded and its cluster
reached, the outcome in its `Active` condition, and each MultiKueue AdmissionCheck `Active` while at
least one of its config's clusters is.

Why here, and over HTTP: the dispatch (mkworkloads.py) reaches a worker only through the kubeconfig its Secret
holds, as Kueue's remote client does, so a worker is reachable for the manager exactly when its API
server answers (a stopped worker, a wrong Secret, a wrong server address all read as upstream's
conditions say). The reach is one GET of the worker's `/version` with the kubeconfig's bearer token and CA;
it runs as a task on the cluster's loop and writes its outcome when it answers, so no reconcile waits on
the network. A failed attempt is retried after Kueue's backoff (5 s doubling, at most 320 s).

The conditions and their reasons and messages are upstream's: `Active`/`Connected`,
`BadKubeConfig` and `InsecureKubeConfig`/`load client config failed: ...`, `ClientConnectionFailed`, and for the check `Active`
`The admission check is active`, `BadConfig` `Cannot load the AdmissionChecks parameters: ...`,
`NoUsableClusters`, `SomeActiveClusters` with `Missing clusters: [...]`, `Inactive clusters: [...]`.
A ClusterProfile source is refused as with the MultiKueueClusterProfile gate off (its v0.19.2 default:
reason `MultiKueueClusterProfileFeatureDisabled`). Not modelled: the kubeconfig path prefix check (its
gate off), and the garbage collector. A connected worker's Workloads and copies of the managed job kinds
are watched as the remote client watches them (each change goes to the dispatch); the end of a watch (a
lost worker) marks the worker lost from then on (`lost_since`, what the worker-lost timeout counts from)
and brings a new reach, whose failure sets the cluster inactive. A kubeconfig that changes (its Secret
edited) stops the watches and drops the client of the old one, as upstream's
updateConfigAndRefreshWatchers does: the worker is lost until a reach with the new one succeeds.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import aiohttp
import yaml

from airflow_tfjob.local.controllers.reconciler import Key
from airflow_tfjob.local.kueue.mkremote import UNREACHABLE, Endpoint, Remote
from airflow_tfjob.local.kueue.options import MANAGER_NAMESPACE, MULTIKUEUE_CONTROLLER, MULTIKUEUE_SECRET_KEY
from airflow_tfjob.local.model.conditions import find_condition, set_condition
from airflow_tfjob.local.model.resources import KUEUE_GROUP, ApiError, JsonDict
from airflow_tfjob.local.store.core import Store

log = logging.getLogger(__name__)
CONTROLLER_NAME = MULTIKUEUE_CONTROLLER
SECRET_KEY = MULTIKUEUE_SECRET_KEY
ACTIVE = "Active"
CLUSTER = "MultiKueueCluster"
CHECK = "AdmissionCheck"
_RETRY_INCREMENT = 5.0
_RETRY_MAX_STEPS = 7
_PROBE_TIMEOUT = 5.0


def retry_after(failed_attempts: int) -> float:
    """multikueuecluster.go retryAfter: 5 s, 10 s, ... 320 s after the 1st ... 7th and later failures."""
    return float(1 << (min(max(failed_attempts, 1), _RETRY_MAX_STEPS) - 1)) * _RETRY_INCREMENT


class BadKubeConfig(Exception):
    """A kubeconfig that cannot be read (reason `BadKubeConfig`): no Secret, no key, no file. `location`
    is the Secret's name when the Secret itself is missing (its creation will bring the reconcile)."""

    def __init__(self, message: str, location: str | None = None) -> None:
        super().__init__(message)
        self.location = location


class InsecureKubeConfig(Exception):
    """A kubeconfig that Kueue's validateKubeconfig refuses (reason `InsecureKubeConfig`)."""


def load_endpoint(text: bytes) -> Endpoint:
    """The current context's cluster and user of a kubeconfig, refused as Kueue's validateKubeconfig and
    validateRestConfig refuse it: a token file, skipped TLS verification, a CA file path, no server,
    basic auth, exec plugins and auth providers."""
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise InsecureKubeConfig(f"failed to parse kubeconfig(apiconfig): {exc}") from None
    if not isinstance(config, dict):
        raise InsecureKubeConfig("failed to parse kubeconfig(apiconfig): not a kubeconfig")
    users = {u.get("name"): u.get("user") or {} for u in config.get("users") or [] if isinstance(u, dict)}
    clusters = {c.get("name"): c.get("cluster") or {} for c in config.get("clusters") or [] if isinstance(c, dict)}
    for user in users.values():
        if user.get("tokenFile"):
            raise InsecureKubeConfig("tokenFile is not allowed")
    for name, cluster in clusters.items():
        if cluster.get("insecure-skip-tls-verify"):
            raise InsecureKubeConfig(f"insecure TLS verification is not allowed for cluster {name}")
        if cluster.get("certificate-authority"):
            raise InsecureKubeConfig("certificate-authority file paths are not allowed, use certificate-authority-data "
                                f"for cluster {name}")
        if not cluster.get("server"):
            raise InsecureKubeConfig(f"server URL is required for cluster {name}")
    contexts = {c.get("name"): c.get("context") or {} for c in config.get("contexts") or [] if isinstance(c, dict)}
    context = contexts.get(config.get("current-context"))
    if context is None or context.get("cluster") not in clusters:
        raise InsecureKubeConfig("invalid configuration: no configuration has been provided")
    cluster, user = clusters[context["cluster"]], users.get(context.get("user"), {})
    if user.get("username") or user.get("password"):
        raise InsecureKubeConfig("basic auth is not allowed")
    if user.get("exec"):
        raise InsecureKubeConfig("exec plugins are not allowed")
    if user.get("auth-provider"):
        raise InsecureKubeConfig("auth providers are not allowed")
    ca = cluster.get("certificate-authority-data")
    try:
        ca_pem = base64.b64decode(ca) if ca else None
    except (binascii.Error, ValueError):
        raise InsecureKubeConfig(f"certificate-authority-data of cluster {context['cluster']} is not base64") from None
    return Endpoint(str(cluster["server"]), user.get("token"), ca_pem)


def _not_found(kind: str, name: str) -> str:
    """controller-runtime's NotFound text: `Secret "x" not found`, `MultiKueueConfig.kueue.x-k8s.io "x" ...`."""
    return f'{kind if kind == "Secret" else f"{kind}.{KUEUE_GROUP}"} "{name}" not found'


class MultiKueueClusters:
    """The MultiKueueCluster and AdmissionCheck reconcilers of the Kueue manager (controller.py routes
    their keys here): `keys_for` maps a watched change to the keys it concerns, `reconcile` does one."""

    def __init__(self, store: Store, enqueue: Callable[[Key], None], watched: Sequence[str] = (),
                 on_remote: Callable[[str, str, JsonDict], None] | None = None,
                 on_lost: Callable[[str], None] | None = None) -> None:
        """`watched`: the job kinds (plurals) whose remote copies are watched besides the Workloads;
        `on_remote(cluster, plural, object)` hears each of their changes, `on_lost(cluster)` a connected
        worker's loss (mkworkloads.py)."""
        self.store = store
        self.enqueue = enqueue
        self.watched = ("workloads", *watched)
        self.on_remote = on_remote
        self.on_lost = on_lost
        #: The connected workers' clients (remote_client.go's connected state), and when each worker that
        #: was connected was lost (connState.lostSince, wall-clock seconds).
        self.remotes: dict[str, Remote] = {}
        self.lost_since: dict[str, float] = {}
        #: The reach in flight per worker, with the endpoint it reaches (one made with a kubeconfig
        #: replaced since is dropped).
        self._probes: dict[str, tuple[asyncio.Task[None], Endpoint]] = {}
        self._watches: dict[str, asyncio.Task[None]] = {}
        self._failures: dict[str, int] = {}
        self._retries: dict[str, asyncio.TimerHandle] = {}

    # ---- which keys a change concerns

    def keys_for(self, rtype: str, obj: JsonDict) -> list[Key]:
        meta = obj.get("metadata") or {}
        name = str(meta.get("name", ""))
        if rtype == "admissionchecks":
            return [(CHECK, "", name)]
        if rtype == "multikueueclusters":
            return [(CLUSTER, "", name), *self._check_keys()]
        if rtype == "multikueueconfigs":
            return self._check_keys()
        if rtype == "secrets" and meta.get("namespace") == MANAGER_NAMESPACE:
            return [(CLUSTER, "", str(c["metadata"]["name"])) for c in self.store.list("multikueueclusters")[0]
                    if _kubeconfig_ref(c) == ("Secret", name)]
        return []

    def _check_keys(self) -> list[Key]:
        return [(CHECK, "", str(ac["metadata"]["name"])) for ac in self.store.list("admissionchecks")[0]
                if (ac.get("spec") or {}).get("controllerName") == CONTROLLER_NAME]

    def reconcile(self, kind: str, name: str) -> float | None:
        if kind == CLUSTER:
            return self._reconcile_cluster(name)
        self._reconcile_check(name)
        return None

    # ---- MultiKueueCluster

    def _reconcile_cluster(self, name: str) -> float | None:
        """Load the kubeconfig and start a reach of the worker; when the load fails, the condition says
        why, and the reconcile comes again after Kueue's first backoff step unless a watched object
        (the Secret, the MultiKueueCluster) will bring it: a missing Secret is waited for, as upstream
        skips the retry on NotFound."""
        try:
            cluster = self.store.get("multikueueclusters", None, name)
        except ApiError:
            cluster = None
        if cluster is None or cluster["metadata"].get("deletionTimestamp"):
            self._forget(name)
            return None
        source = (cluster.get("spec") or {}).get("clusterSource") or {}
        if isinstance(source, dict) and source.get("clusterProfileRef") is not None:
            # The MultiKueueClusterProfile gate is alpha and off in v0.19.2: loadClientConfig's refusal.
            self._forget(name)
            self._write_cluster(cluster, False, "MultiKueueClusterProfileFeatureDisabled",
                                "load client config failed: MultiKueueClusterProfile feature gate is disabled")
            return None
        try:
            endpoint = load_endpoint(self._kubeconfig(cluster))
        except (BadKubeConfig, InsecureKubeConfig) as exc:
            self._forget(name)
            reason = "BadKubeConfig" if isinstance(exc, BadKubeConfig) else "InsecureKubeConfig"
            self._write_cluster(cluster, False, reason, f"load client config failed: {exc}")
            secret_missing = isinstance(exc, BadKubeConfig) and _kubeconfig_ref(cluster) == ("Secret", exc.location)
            return None if secret_missing else _RETRY_INCREMENT
        current = self.remotes.get(name)
        if current is not None and not current.endpoint.same(endpoint):
            # updateConfigAndRefreshWatchers: a changed kubeconfig stops the watchers and drops the client
            # made with the old one; until the new one connects, the worker is unavailable (lost from now).
            watch = self._watches.pop(name, None)
            if watch is not None:
                watch.cancel()
            self._lost(name)
        in_flight = self._probes.get(name)
        if in_flight is not None and not in_flight[1].same(endpoint):
            # A reach of the kubeconfig before this one (a connection broken and put back within one
            # probe): its failure must not stand for the new one's, nor its backoff hold the reconnect.
            in_flight[0].cancel()
            del self._probes[name]
        if name not in self._probes:
            self._probes[name] = (asyncio.get_running_loop().create_task(self._probe(name, endpoint)), endpoint)
        return None

    def _kubeconfig(self, cluster: JsonDict) -> bytes:
        ref = _kubeconfig_ref(cluster)
        if ref is None:
            raise BadKubeConfig("kubeconfig reference is nil")
        location_type, location = ref
        if location_type == "Path":
            try:
                return Path(location).read_bytes()
            except OSError as exc:  # Go's os.ReadFile words: "open PATH: no such file or directory"
                said = (exc.strerror or type(exc).__name__)
                raise BadKubeConfig(f"open {location}: {said[:1].lower()}{said[1:]}") from None
        try:
            secret = self.store.get("secrets", MANAGER_NAMESPACE, location)
        except ApiError:
            raise BadKubeConfig(_not_found("Secret", location), location) from None
        data = (secret.get("data") or {}).get(SECRET_KEY)
        if data is None:
            raise BadKubeConfig(f'key "{SECRET_KEY}" not found in secret "{location}"')
        return base64.b64decode(data)

    async def _probe(self, name: str, endpoint: Endpoint) -> None:
        """One attempt to reach the worker; its outcome written on the MultiKueueCluster (still there)."""
        try:
            timeout = aiohttp.ClientTimeout(total=_PROBE_TIMEOUT)
            async with aiohttp.ClientSession(timeout=timeout) as session, session.get(
                    f"{endpoint.server}/version", headers=endpoint.headers(), ssl=endpoint.ssl_context()) as reply:
                if reply.status != 200:
                    raise ConnectionError(f"the server answered {reply.status} {reply.reason}")
            connected, reason, message = True, ACTIVE, "Connected"
        except UNREACHABLE as exc:
            connected, reason, message = False, "ClientConnectionFailed", str(exc) or type(exc).__name__
        finally:
            if self._probes.get(name, (None,))[0] is asyncio.current_task():
                del self._probes[name]
        try:
            cluster = self.store.get("multikueueclusters", None, name)
        except ApiError:
            return
        self._write_cluster(cluster, connected, reason, message)
        if connected:
            self._failures.pop(name, None)
            if name not in self.remotes:
                self.remotes[name] = Remote(name, endpoint)
            self.lost_since.pop(name, None)
            if name not in self._watches:
                self._watches[name] = asyncio.get_running_loop().create_task(self._watch(name, endpoint))
            return
        self._failures[name] = self._failures.get(name, 0) + 1
        delay = retry_after(self._failures[name])
        previous = self._retries.pop(name, None)
        if previous is not None:
            previous.cancel()
        self._retries[name] = asyncio.get_running_loop().call_later(delay, self.enqueue, (CLUSTER, "", name))

    async def _watch(self, name: str, endpoint: Endpoint) -> None:
        """Watches of the worker's Workloads and of its copies of the watched job kinds, held while it is
        connected, as Kueue's remote client holds them; each change goes to `on_remote`. When a stream
        ends (the worker's API server stopped, or ended the watch), the worker counts as lost from then
        on and the cluster is reconciled again, whose reach says whether it is still there (a lost
        worker: `ClientConnectionFailed`)."""
        remote = self.remotes.get(name) or Remote(name, endpoint)

        async def follow(plural: str) -> None:
            async for _etype, obj in remote.watch(plural):
                if self.on_remote is not None:
                    self.on_remote(name, plural, obj)

        streams = [asyncio.ensure_future(follow(p)) for p in self.watched]
        try:
            done, _ = await asyncio.wait(streams, return_when=asyncio.FIRST_COMPLETED)
            for stream in done:
                if not stream.cancelled() and stream.exception() is not None:
                    log.debug("multikueue: the watch of %s ended: %s", name, stream.exception())
        finally:
            for stream in streams:
                stream.cancel()
            if self._watches.get(name) is asyncio.current_task():
                del self._watches[name]
        self._lost(name)
        self.enqueue((CLUSTER, "", name))

    def _lost(self, name: str) -> None:
        remote = self.remotes.pop(name, None)
        if remote is None:
            return
        with contextlib.suppress(RuntimeError):  # no loop left at shutdown: nothing to close it on
            asyncio.get_running_loop().create_task(remote.close())
        self.lost_since.setdefault(name, time.time())
        if self.on_lost is not None:
            self.on_lost(name)

    def _forget(self, name: str) -> None:
        probe = self._probes.pop(name, None)
        if probe is not None:
            probe[0].cancel()
        watch = self._watches.pop(name, None)
        if watch is not None:
            watch.cancel()
        retry = self._retries.pop(name, None)
        if retry is not None:
            retry.cancel()
        self._failures.pop(name, None)
        self._lost(name)

    def _write_cluster(self, cluster: JsonDict, active: bool, reason: str, message: str) -> None:
        if _write_active(self.store, "multikueueclusters", cluster, active, reason, message):
            for key in self._check_keys():
                self.enqueue(key)

    def cancel(self) -> None:
        for name in {*self._probes, *self._retries, *self._watches}:
            self._forget(name)

    # ---- AdmissionCheck

    def _reconcile_check(self, name: str) -> None:
        try:
            check = self.store.get("admissionchecks", None, name)
        except ApiError:
            return
        if (check.get("spec") or {}).get("controllerName") != CONTROLLER_NAME:
            return
        active, reason, message = self._check_state(check)
        _write_active(self.store, "admissionchecks", check, active, reason, message)

    def _check_state(self, check: JsonDict) -> tuple[bool, str, str]:
        """admissioncheck.go's Reconcile: the config its parameters name, then its clusters' `Active`."""
        params = (check.get("spec") or {}).get("parameters")
        try:
            config = self.store.get("multikueueconfigs", None, _config_name(params))
        except (ApiError, ValueError) as exc:
            detail = exc.message if isinstance(exc, ApiError) else str(exc)
            if isinstance(exc, ApiError) and exc.code == 404:
                detail = _not_found("MultiKueueConfig", _config_name(params))
            return False, "BadConfig", f"Cannot load the AdmissionChecks parameters: {detail}"
        names = [str(n) for n in (config.get("spec") or {}).get("clusters") or []]
        missing, inactive = [], []
        for cluster_name in names:
            try:
                cluster = self.store.get("multikueueclusters", None, cluster_name)
            except ApiError:
                missing.append(cluster_name)
                continue
            cond = find_condition(cluster.get("status") or {}, ACTIVE)
            if cond is None or cond.get("status") != "True":
                inactive.append(cluster_name)
        if not missing and not inactive:
            return True, ACTIVE, "The admission check is active"
        parts = ([f"Missing clusters: [{' '.join(missing)}]"] if missing else []) + (
            [f"Inactive clusters: [{' '.join(inactive)}]"] if inactive else [])
        usable = len(missing) + len(inactive) < len(names)
        return usable, "SomeActiveClusters" if usable else "NoUsableClusters", ", ".join(parts)


def _kubeconfig_ref(cluster: JsonDict) -> tuple[str, str] | None:
    source = ((cluster.get("spec") or {}).get("clusterSource") or {}).get("kubeConfig")
    if not isinstance(source, dict):
        return None
    return str(source.get("locationType") or "Secret"), str(source.get("location") or "")


def _config_name(params: Any) -> str:
    """The MultiKueueConfig an AdmissionCheck's parameters name (admissioncheck.ConfigHelper.ConfigFromRef);
    a reference to anything else is a ValueError in upstream's words."""
    if not isinstance(params, dict):
        raise ValueError("missing parameters reference")
    if not params.get("name"):
        raise ValueError("empty name: bad parameters reference")
    if params.get("apiGroup") != KUEUE_GROUP:
        raise ValueError(f'wrong group "{params.get("apiGroup")}", expecting "{KUEUE_GROUP}": bad parameters '
                            "reference")
    if params.get("kind") != "MultiKueueConfig":
        raise ValueError(f'wrong kind "{params.get("kind")}", expecting "MultiKueueConfig": bad parameters '
                            "reference")
    return str(params["name"])


def _write_active(store: Store, rtype: str, obj: JsonDict, active: bool, reason: str, message: str) -> bool:
    """apimeta.SetStatusCondition of `Active` (observedGeneration stamped), written only when its status,
    reason or message changes (cmpConditionState). True when written."""
    status: JsonDict = dict(obj.get("status") or {})
    value = "True" if active else "False"
    old = find_condition(status, ACTIVE)
    if old is not None and (old.get("status"), old.get("reason"), old.get("message")) == (value, reason, message):
        return False
    set_condition(status, ACTIVE, value, reason, message, merge=True,
                  extra={"observedGeneration": int(obj["metadata"].get("generation", 1))})
    try:
        store.update_status(rtype, None, obj["metadata"]["name"], status)
    except ApiError:
        return False
    return True
