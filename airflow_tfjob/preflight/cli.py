"""``tfjob-preflight``: what a cluster lacks for the jobs given on the command line or defined by a DAG
file, in one table; the exit status says whether every job can run (0), a job cannot (1), the command
was misused (2), or the cluster could not be asked (3: no kubeconfig, server down, refused)."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from kubernetes import config
from urllib3.exceptions import HTTPError

from airflow_tfjob.constants import MAX_CLI_SECONDS, NumberOption
from airflow_tfjob.hooks.common import api_status, status_of
from airflow_tfjob.hooks.sync import KubeflowJobHook
from airflow_tfjob.jobs.kinds import kind_named
from airflow_tfjob.preflight.checks import check
from airflow_tfjob.preflight.needs import Target, target_of_task
from airflow_tfjob.preflight.report import EXIT_UNREACHABLE, EXIT_USAGE, Report
from airflow_tfjob.version_compat import AIRFLOW_V_3_2_PLUS

#: How long one question may be retried when the server does not answer (the hooks' retry policy).
DEFAULT_TIMEOUT = 10.0
#: --timeout, bounded as every numeric option of the provider's tools is (constants.NumberOption).
TIMEOUT = NumberOption("--timeout", minimum=0, above_minimum=True, maximum=MAX_CLI_SECONDS, unit="seconds",
                       example="10")


class Unreachable(Exception):
    """The cluster could not be asked: one line says why."""


def build_parser() -> argparse.ArgumentParser:
    """The command line (every tool's module names its builder so; tests walk each one's options)."""
    return parser()


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="tfjob-preflight",
        description="Check that a cluster has what the provider's jobs need: the job APIs and their "
        "versions, Trainer v2's runtimes and JobSet, Kueue and its integration for each kind, the Role's "
        "verbs. Prints one table; exits 1 when a job could not run.",
    )
    p.add_argument("--kubeconfig", help="the kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)")
    p.add_argument("--context", help="the kubeconfig context (default: its current context)")
    p.add_argument("--namespace", help="where the jobs run (default: the context's namespace, else default)")
    p.add_argument(
        "--kind",
        action="append",
        default=[],
        metavar="KIND",
        help="a job kind to check (TFJob, PyTorchJob, XGBoostJob, JAXJob, PaddleJob, TrainJob); repeatable",
    )
    p.add_argument("--runtime", help="the runtime a TrainJob runs on (with --kind TrainJob)")
    p.add_argument("--queue", help="the Kueue LocalQueue the --kind jobs are submitted to")
    p.add_argument(
        "--worker-connection",
        action="append",
        default=[],
        metavar="WORKER=CONN_ID",
        help="the Airflow kubernetes connection of a MultiKueue worker cluster (as the operators' "
        "multikueue_connections): each worker of a MultiKueue queue is checked through it; repeatable",
    )
    p.add_argument(
        "--dag",
        action="append",
        default=[],
        metavar="FILE",
        help="check every job a DAG file defines (each provider operator's kind, runtime, queue); repeatable",
    )
    p.add_argument(
        "--timeout",
        type=TIMEOUT,
        default=DEFAULT_TIMEOUT,
        help=f"seconds a question is retried when the server does not answer (default {DEFAULT_TIMEOUT:g})",
    )
    p.add_argument("--debug", action="store_true", help="show the traceback of a failure")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)  # a usage error exits 2 with argparse's message
    if not args.kind and not args.dag:
        p.error("name the jobs to check: --kind KIND (repeatable) or --dag FILE")
    if args.runtime and not args.kind:
        p.error("--runtime goes with --kind TrainJob")
    workers = _worker_connections(p, args.worker_connection)
    try:
        targets = [_target(name, args.runtime, args.queue, workers) for name in args.kind]
    except ValueError as error:
        p.error(str(error))
    try:
        # What Airflow and the DAG file log while loading goes to stderr: stdout is the table.
        with contextlib.redirect_stdout(sys.stderr):
            hook = _hook(args)
            if not args.debug:
                # The retries of a server that is down are one failure, which its line says (--debug
                # shows each): the client's warnings and the hook's (a stdlib logger, which this silences,
                # in place of the structlog one Airflow would give it).
                logging.disable(logging.WARNING)
                hook._log = logging.getLogger("airflow_tfjob.preflight")
            namespace = args.namespace or _context_namespace(args) or "default"
            for dag_file in args.dag:
                targets += [_with_workers(t, workers) for t in _dag_targets(Path(dag_file), hook)]
            if targets:
                report = _check(hook, namespace, targets, args.timeout)
        if not targets:
            print(f"tfjob-preflight: {', '.join(args.dag)} defines no job of this provider", file=sys.stderr)
            return EXIT_USAGE
    except Unreachable as error:
        if args.debug:
            raise
        print(f"tfjob-preflight: {error}", file=sys.stderr)
        return EXIT_UNREACHABLE
    except Exception as error:  # anything else: still one line, the traceback on request
        if args.debug:
            raise
        print(f"tfjob-preflight: {type(error).__name__}: {error} (--debug shows where)", file=sys.stderr)
        return EXIT_UNREACHABLE
    jobs = ", ".join(
        f"{t.source or t.kind.kind}" + (f" on {t.runtime}" if t.runtime else "") for t in targets
    )
    print(f"Preflight of namespace {namespace} for {jobs}\n")
    print(report.table())
    print(f"\n{report.summary()}")
    return report.exit_status


def _target(name: str, runtime: str | None, queue: str | None, workers: dict[str, str]) -> Target:
    kind = kind_named(name)
    return Target(kind, runtime, queue=queue, source=kind.kind, workers=tuple(workers.items()))


def _worker_connections(p: argparse.ArgumentParser, given: Sequence[str]) -> dict[str, str]:
    """``--worker-connection WORKER=CONN_ID`` flags as a map (a malformed one is a usage error)."""
    found = {}
    for flag in given:
        worker, sep, conn_id = flag.partition("=")
        if not sep or not worker.strip() or not conn_id.strip():
            p.error(f"--worker-connection {flag!r}: give WORKER=CONN_ID, e.g. worker1=k8s_worker1")
        found[worker.strip()] = conn_id.strip()
    return found


def _with_workers(target: Target, workers: dict[str, str]) -> Target:
    """A DAG task's target with the command line's worker connections under its own (the task's win)."""
    return replace(target, workers=tuple({**workers, **dict(target.workers)}.items()))


def _connect(hook: Any, timeout: float) -> Callable[[str], Any]:
    """A MultiKueue worker's cluster from its Airflow connection id: a hook of the command's hook's class
    on that connection, asked with the command's timeout."""
    return lambda conn_id: type(hook)(conn_id=conn_id, api_retry_timeout=timeout)


def _hook(args: argparse.Namespace) -> Any:
    config_file = args.kubeconfig or os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")
    config_file = config_file.split(os.pathsep)[0]
    if not Path(config_file).is_file():
        where = (
            "--kubeconfig"
            if args.kubeconfig
            else "$KUBECONFIG"
            if os.environ.get("KUBECONFIG")
            else "the default"
        )
        raise Unreachable(f"no kubeconfig at {config_file} ({where}): give --kubeconfig FILE")
    return KubeflowJobHook(
        conn_id=None, config_file=config_file, cluster_context=args.context, api_retry_timeout=args.timeout
    )


def _context_namespace(args: argparse.Namespace) -> str | None:
    hook_file = args.kubeconfig or os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")
    try:
        contexts, current = config.list_kube_config_contexts(config_file=hook_file.split(os.pathsep)[0])
    except Exception as error:
        raise Unreachable(f"cannot read the kubeconfig {hook_file}: {error}") from error
    chosen = next((c for c in contexts if c["name"] == args.context), None) if args.context else current
    if args.context and chosen is None:
        raise Unreachable(
            f"no context {args.context!r} in {hook_file}: use one of "
            + ", ".join(c["name"] for c in contexts)
        )
    return ((chosen or {}).get("context") or {}).get("namespace")


def _check(hook: Any, namespace: str, targets: list[Target], timeout: float) -> Report:
    try:
        return check(hook, namespace, targets, _connect(hook, timeout))
    except Exception as error:
        status = api_status(error)
        if status is None and not _is_connection_error(error):
            raise
        said = str(status_of(error).get("message") or "") or str(error).splitlines()[0]
        if status in (401, 403):
            raise Unreachable(
                f"the server refused the connection's user ({status}): {said}; check the "
                "kubeconfig's credentials and the provider's Role (rbac/role.yaml)"
            ) from error
        if status == 404:
            raise Unreachable(
                f"the server answered 404 Not Found: {said}; is the kubeconfig's server a "
                "Kubernetes API server?"
            ) from error
        if status is not None:
            raise Unreachable(f"the server answered {status}: {said}") from error
        raise Unreachable(
            f"cannot reach the API server of {hook.config_file}: {said}; is the cluster running, and is "
            "the kubeconfig's server right?"
        ) from error


def _is_connection_error(error: BaseException) -> bool:
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, (HTTPError, OSError)) or type(seen).__name__ == "ApiCallFailed":
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _dag_targets(path: Path, hook: Any) -> list[Target]:
    """Every provider job a DAG file defines, as its operator will run it (an ``api="auto"`` TFJob is
    decided as the operator decides it, from the cluster's discovery)."""
    if not path.is_file():
        raise Unreachable(f"no DAG file at {path}")

    # Airflow's DAG processing (about 220 modules, 1.3-1.7 s on a busy machine) for a DAG file's jobs
    # only: a check of named jobs, and every refusal of a bad argument, start without it.
    if AIRFLOW_V_3_2_PLUS:
        from airflow.dag_processing.dagbag import DagBag
    else:  # 3.0 and 3.1 keep it among the models
        from airflow.models.dagbag import DagBag  # type: ignore[no-redef]

    bag = DagBag(dag_folder=str(path), safe_mode=False)
    if bag.import_errors:
        first = next(iter(bag.import_errors.values())).strip().splitlines()[-1]
        raise Unreachable(f"the DAG file {path} does not import: {first}")
    targets = []
    for dag in bag.dags.values():
        for task in dag.tasks:
            choose = getattr(task, "choose_api", None)
            if choose is not None:
                try:
                    choose(lambda: hook)
                except RuntimeError:
                    pass  # neither API served: the kind's row says so
            target = target_of_task(task)
            if target is not None:
                targets.append(
                    Target(
                        target.kind,
                        target.runtime,
                        target.runtime_kind,
                        target.queue,
                        f"{dag.dag_id}.{task.task_id}",
                    )
                )
    return targets


if __name__ == "__main__":
    sys.exit(main())
