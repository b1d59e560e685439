"""`tfjob-local serve`: run the local cluster in the foreground until SIGINT or SIGTERM.

Prints exactly one line, `ready <url> <kubeconfig-path>`, once the API server accepts requests, so that
scripts and tests can wait for it; everything else goes to the log (stderr). Options are checked before
anything starts, and a bad one exits with status 2 and a message naming it.

`tfjob-local credential` is the exec credential plugin that the kubeconfig of a cluster with token
authentication runs (see credential.py).
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import logging
import os
import signal
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from airflow_tfjob.constants import MAX_CLI_SECONDS, NumberOption
from airflow_tfjob.local import credential
from airflow_tfjob.local.kueue.options import parse_integrations, parse_namespace_selector
from airflow_tfjob.local.model.profiles import RELEASES, Profile
from airflow_tfjob.local.model.resources import DEFAULT_APIS, served_groups
from airflow_tfjob.local.multikueue import MAX_WORKERS
from airflow_tfjob.local.options import CREDENTIALS, FEATURE_GATES

# The cluster, its API server and the fault injector (aiohttp and all) load only once the options are
# read: a command line refused, or `credential`, costs a fifth of a second instead of a second.
if TYPE_CHECKING:
    from airflow_tfjob.local.cluster import ClusterRuntime
    from airflow_tfjob.local.faults import FaultPlan


class Parser(argparse.ArgumentParser):
    """argparse with kubectl's manners: a usage error is one line (the option, the problem, the fix) and
    exit status 2, not the usage block."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())} (see {self.prog} --help)\n")


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
#: Every numeric option of `serve`, each bounded (constants.NumberOption: nan, inf and out-of-range
#: values are usage errors naming the option, never a traceback at start).
PORT = NumberOption("--port", minimum=0, maximum=65535, whole=True, minimum_means="any free port", example="8080")
TOKEN_TTL = NumberOption("--token-ttl", minimum=0, above_minimum=True, maximum=MAX_CLI_SECONDS, unit="seconds",
                         example="900")
PODS_READY_TIMEOUT = NumberOption("--kueue-pods-ready-timeout", minimum=0, above_minimum=True,
                                  maximum=MAX_CLI_SECONDS, unit="seconds", example="1800")
MULTIKUEUE_WORKERS = NumberOption("--multikueue-workers", minimum=0, maximum=MAX_WORKERS, whole=True,
                                  minimum_means="none", example="2")


#: `--profile`'s choices for its help: "kueue 0.19|0.20; trainer 2.3|2.4; training-operator 1.9.4".
PROFILE_CHOICES = "; ".join(f"{project} {'|'.join(versions)}" for project, versions in RELEASES.items())


def _log_level(value: str) -> str:
    if value.upper() not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(f"{value!r} is not a level: give one of {', '.join(LOG_LEVELS)}")
    return value.upper()


def _parse_gpus(value: str) -> list[str]:
    gpus = [g.strip() for g in value.split(",") if g.strip()]
    bad = [g for g in gpus if not all(c.isalnum() or c in "-_:" for c in g)]
    if bad:
        raise argparse.ArgumentTypeError(f"--gpus: {bad[0]!r} is not a device id; give comma-separated ids, "
                                         "e.g. 0,1")
    return gpus


def _parse_integrations(value: str) -> tuple[str, ...]:
    try:
        return parse_integrations(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _parse_namespace_selector(value: str) -> dict[str, Any]:
    try:
        return parse_namespace_selector(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _parse_faults(value: str) -> FaultPlan:
    # Only when --faults is given: the fault plan loads the API server's request helpers (aiohttp).
    from airflow_tfjob.local.faults import FaultPlan

    try:
        return FaultPlan.parse(value)
    except ValueError as exc:  # argparse shows an ArgumentTypeError's own message
        raise argparse.ArgumentTypeError(str(exc)) from None


def _parse_apis(value: str) -> list[str]:
    apis = [a.strip() for a in value.split(",") if a.strip()]
    try:
        served_groups(apis)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"--apis: {exc}") from None
    return apis


def _parse_profile(value: str) -> Profile:
    try:
        return Profile.parse(value, "--profile")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _parse_gates(value: str) -> dict[str, bool]:
    gates: dict[str, bool] = {}
    for item in filter(None, (part.strip() for part in value.split(","))):
        gate, sep, flag = item.partition("=")
        if not sep or flag.lower() not in ("true", "false") or gate not in FEATURE_GATES:
            raise argparse.ArgumentTypeError(f"--feature-gates {item!r}: expected GATE=true|false with GATE one "
                                             f"of {', '.join(FEATURE_GATES)}, e.g. TrainJobStatus=true")
        gates[gate] = flag.lower() == "true"
    return gates


def _parse_role(value: str) -> tuple[str, tuple[str, str] | str]:
    user, sep, source = value.partition("=")
    if not sep or not user or not source:
        raise argparse.ArgumentTypeError(f"--role {value!r}: expected USER=PATH[:NAMESPACE], "
                                         "e.g. airflow=airflow_tfjob/rbac/role.yaml:default")
    path, sep, namespace = source.rpartition(":")
    return user, ((path, namespace) if sep and path else source)


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="tfjob-local", description="Embedded local cluster for TFJobs.")
    sub = parser.add_subparsers(dest="command", required=True)
    # The plugin's own parser (main hands `credential ...` to it), so that walking this parser sees its options.
    plugin: list[Any] = [credential.build_parser(add_help=False)]  # a plain ArgumentParser among Parsers
    sub.add_parser("credential", add_help=False, parents=plugin,
                   help="print an ExecCredential with a fresh token (run by kubeconfigs; see --help)")
    serve = sub.add_parser("serve", help="run the API server, the job controllers and the process runner")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=PORT, default=0, help="port to listen on (default: any free port)")
    serve.add_argument("--kubeconfig", type=Path, default=None, help="where to write the kubeconfig")
    serve.add_argument("--gpus", type=_parse_gpus, default=[], help="comma-separated GPU device ids, e.g. 0,1")
    serve.add_argument("--workdir", type=Path, default=None, help="directory for the cluster's files")
    serve.add_argument(
        "--faults", type=_parse_faults, default=None, metavar="SPEC",
        help="inject API faults, e.g. 'seed=7,rate=0.05,kinds=throttle+unavailable+server_error+lost_reply"
             "+stream_cut,verbs=GET+LIST,latency=0.01,retry_after=1,stream_cut_after=0.5+2' "
             "(see docs/local-cluster.md)",
    )
    serve.add_argument("--auth", choices=("none", "token"), default="none",
                       help="'token': every request needs a bearer token (401 otherwise); required to "
                            "listen on a non-loopback --host")
    serve.add_argument("--token-ttl", type=TOKEN_TTL, default=900.0,
                       help="lifetime of the tokens handed out, in seconds (default 900)")
    serve.add_argument("--credential", choices=CREDENTIALS, default="exec",
                       help="how the kubeconfig authenticates with --auth token: 'exec' (a credential "
                            "plugin that hands out fresh tokens, as cloud kubeconfigs do) or 'static' (one "
                            "token that expires after --token-ttl)")
    serve.add_argument("--role", type=_parse_role, action="append", default=[], metavar="USER=PATH[:NS]",
                       help="bind USER to the Roles/ClusterRoles in a YAML file (in namespace NS, default "
                            "the Role's own or 'default'); repeatable; users without --role are admins")
    serve.add_argument("--kueue", action="store_true",
                       help="emulate Kueue v0.19.2: its kinds, Workloads for labelled jobs, quota admission, "
                            "preemption and the visibility API (see docs/local-cluster.md)")
    serve.add_argument("--kueue-integrations", type=_parse_integrations, default=None, metavar="NAMES",
                       help="Kueue integrations that are on, comma-separated Kueue names, e.g. "
                            "kubeflow.org/tfjob,kubeflow.org/pytorchjob (default: v0.19.2's shipped set, in "
                            "which the kubeflow.org v1 kinds are off); implies --kueue")
    serve.add_argument("--kueue-objects", type=Path, action="append", default=[], metavar="YAML",
                       help="a YAML file of Kueue objects (ResourceFlavor, ClusterQueue, LocalQueue, "
                            "WorkloadPriorityClass) created at start; repeatable; implies --kueue")
    serve.add_argument("--kueue-pods-ready-timeout", type=PODS_READY_TIMEOUT, default=None, metavar="SECONDS",
                       help="evict an admitted job whose pods are not ready after SECONDS (WaitForPodsReady; "
                            "Kueue's default is 1800; default here: off); implies --kueue")
    serve.add_argument("--kueue-manage-jobs-without-queue-name", action="store_true",
                       help="Kueue's manageJobsWithoutQueueName: a job without the queue label (of a managed "
                            "kind, in a managed namespace) is suspended and gets a Workload too; implies --kueue")
    serve.add_argument("--kueue-managed-jobs-namespace-selector", type=_parse_namespace_selector, default=None,
                       metavar="SELECTOR",
                       help="Kueue's managedJobsNamespaceSelector as a label selector over namespaces, e.g. "
                            "'kubernetes.io/metadata.name notin (kube-system,kueue-system,team-b)' (default: "
                            "all but kube-system and kueue-system); implies --kueue")
    serve.add_argument("--multikueue-workers", type=MULTIKUEUE_WORKERS, default=0, metavar="N",
                       help="MultiKueue: host N worker clusters beside this one, which becomes Kueue's manager "
                            "(each worker its own API server on 127.0.0.1, kubeconfig, store and node; the "
                            "manager gets their kubeconfig Secrets, MultiKueueClusters, a MultiKueueConfig and "
                            "the AdmissionCheck 'multikueue'); implies --kueue; default 0 (none)")
    serve.add_argument("--apis", type=_parse_apis, default=list(DEFAULT_APIS), metavar="LIST",
                       help="API families to serve, comma-separated: 'v1' (kubeflow.org/v1 TFJob, PyTorchJob, "
                            "...), 'trainjob' (Kubeflow Trainer v2 TrainJob, runtimes, JobSet); default "
                            "'v1,trainjob'; 'trainjob' alone is a cluster without TFJob")
    serve.add_argument("--feature-gates", type=_parse_gates, default={}, metavar="GATE=BOOL",
                       help="Kubeflow Trainer feature gates, e.g. 'TrainJobStatus=true' (the progress status "
                            "endpoint and env; off by default, as upstream)")
    serve.add_argument("--profile", type=_parse_profile, default=None, metavar="PROJECT=VERSION,...",
                       help="the upstream releases the cluster stands for, e.g. 'kueue=0.20,trainer=2.4' "
                            f"(choices: {PROFILE_CHOICES}; "
                            "default 'kueue=0.19,trainer=2.3'); today a profile sets the API versions "
                            "served (Kueue 0.20: no kueue.x-k8s.io/v1beta1), the reasons of a pending "
                            "Workload (Kueue 0.20: WaitingForQuota, ExceedsMaxQuota, Misconfigured, ...), "
                            "the Trainer release recorded and Trainer 2.4's runtime name limit, MPI node image "
                            "and PRTE env (see docs/local-cluster.md, 'Version profiles')")
    serve.add_argument("--log-level", type=_log_level, default="WARNING",
                       help=f"logging level for stderr: {', '.join(LOG_LEVELS)} (default WARNING)")
    serve.add_argument("--debug", action="store_true", help="show the traceback of a failure")
    return parser


def build_runtime(args: argparse.Namespace) -> ClusterRuntime:
    # What starting a cluster loads (aiohttp, the rooms), imported here: `--help` and `credential` stay light.
    from airflow_tfjob.local.apiserver.rbac import load_grants
    from airflow_tfjob.local.cluster import ClusterRuntime
    from airflow_tfjob.local.kueue.startobjects import load_objects

    roles: dict[str, list[tuple[str, str] | str]] = {}
    for user, source in args.role:
        roles.setdefault(user, []).append(source)
    for sources in roles.values():
        for source in sources:
            load_grants(source, option="--role")  # the file's errors name the option, before anything starts
    kueue: dict[str, Any] | None = None
    if (args.kueue or args.kueue_integrations is not None or args.kueue_objects or args.kueue_pods_ready_timeout
            or args.kueue_manage_jobs_without_queue_name or args.kueue_managed_jobs_namespace_selector is not None
            or args.multikueue_workers):
        kueue = {"objects": load_objects(args.kueue_objects), "pods_ready_timeout": args.kueue_pods_ready_timeout,
                 "manage_jobs_without_queue_name": args.kueue_manage_jobs_without_queue_name,
                 "managed_jobs_namespace_selector": args.kueue_managed_jobs_namespace_selector}
        if args.kueue_integrations is not None:
            kueue["integrations"] = args.kueue_integrations
    return ClusterRuntime(
        gpus=args.gpus, workdir=args.workdir, host=args.host, port=args.port, kubeconfig_path=args.kubeconfig,
        faults=args.faults, auth=args.auth == "token", token_ttl=args.token_ttl, credential=args.credential,
        roles=roles or None, kueue=kueue, apis=args.apis, feature_gates=args.feature_gates,
        profile=args.profile, multikueue_workers=args.multikueue_workers,
    )


async def serve(runtime: ClusterRuntime) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        url = await runtime.start()
        sys.stdout.write(f"ready {url} {runtime.kubeconfig_path}\n")
        for name, worker in runtime.workers.items():  # MultiKueue's workers, after the manager's line
            sys.stdout.write(f"worker {name} {worker.url} {worker.kubeconfig_path}\n")
        sys.stdout.flush()
        await stop.wait()
    finally:
        await runtime.stop()
    return 0


def _existing_ancestor(path: Path) -> Path:
    """The nearest part of `path` (itself included) that exists: where creating it would start."""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate
    return Path(".")


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def check_paths(args: argparse.Namespace) -> None:
    """What the start would trip over later, said now naming the option.

    Serve creates the --workdir (and any folder of it that is missing), and writes the kubeconfig with
    its folders; so a kubeconfig inside the workdir is fine although neither exists yet. Anywhere else
    the kubeconfig's folder must exist: a mistyped path is said now, not discovered as a missing file."""
    workdir = Path(os.path.abspath(args.workdir)) if args.workdir is not None else None
    if workdir is not None:
        if workdir.exists() and not workdir.is_dir():
            raise ValueError(f"--workdir {args.workdir} is a file; give a directory (created if missing)")
        start = _existing_ancestor(workdir)
        if not start.is_dir():
            raise ValueError(f"--workdir {args.workdir} cannot be created: {start} is a file; give a directory "
                             "(created if missing)")
        if start != workdir and not os.access(start, os.W_OK | os.X_OK):
            raise ValueError(f"--workdir {args.workdir} cannot be created: {start} is not writable; give a "
                             "directory you can write (created if missing)")
    if args.kubeconfig is not None:
        kubeconfig = Path(os.path.abspath(args.kubeconfig))
        if kubeconfig.is_dir():
            raise ValueError(f"--kubeconfig {args.kubeconfig} is a directory; give the path of the file to write, "
                             f"e.g. {args.kubeconfig / 'kubeconfig'}")
        if not kubeconfig.parent.is_dir() and not (workdir is not None and _inside(kubeconfig.parent, workdir)):
            raise ValueError(f"--kubeconfig {args.kubeconfig}: its folder does not exist; give a path in an "
                             "existing directory or inside --workdir (which serve creates)")
    try:
        infos = socket.getaddrinfo(args.host, None, type=socket.SOCK_STREAM)
        family, _, _, _, address = infos[0]
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((address[0], 0))
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ValueError(f"--host {args.host!r} cannot be listened on ({reason}); give an address of this "
                         "machine, e.g. 127.0.0.1") from None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["credential"]:
        return credential.main(argv[1:])
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=args.log_level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command != "serve":
        return 2
    try:
        check_paths(args)
        runtime = build_runtime(args)
    except ValueError as exc:
        if args.debug:
            raise
        parser.error(str(exc))
    try:
        if args.workdir is not None:
            args.workdir.mkdir(parents=True, exist_ok=True)  # what check_paths promised: serve creates it
        return asyncio.run(serve(runtime))
    except Exception as exc:  # a failure at start (a port in use...): one line, the traceback on request
        if args.debug:
            raise
        said = " ".join(str(exc).split()) or type(exc).__name__
        if isinstance(exc, OSError) and exc.errno == errno.EADDRINUSE:
            said = f"--port {args.port} on {args.host} is taken by another process; give another --port or 0 (any free port)"
        print(f"tfjob-local: cannot serve: {said} (--debug shows where)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
