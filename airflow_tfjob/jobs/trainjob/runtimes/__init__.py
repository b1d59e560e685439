"""The TensorFlow ClusterTrainingRuntimes shipped with the provider, and the command that installs them.

Trainer v2 ships no TensorFlow runtime (trainjob-behaviour.md §10); TFJobOperator(api="trainjob")
runs on these (``from_tfjob.RUNTIME_OF_TYPES``): ``tensorflow-distributed`` (workers),
``tensorflow-chief`` (chief + workers), ``tensorflow-ps`` (chief + PS + workers). Install them once
per cluster (an admin's step, like Trainer's own runtimes)::

    tfjob-runtimes install [--kubeconfig PATH] [--context NAME] [--image IMAGE]
    python -m airflow_tfjob.jobs.trainjob.runtimes install ...     # the same
    tfjob-runtimes show [--image IMAGE]                        # print the YAML (for kubectl apply -f -)

``--image`` sets the image of the replicated jobs the TrainJob cannot set (chief and PS run the
runtime's image; the workers run the TrainJob's). Installing again replaces them (a TrainJob that
exists keeps the snapshot it was created with, §3.2).

Every call to the cluster goes through the provider's synchronous hook (``KubeflowJobHook.apply_object``),
so the install runs under the hooks' one retry policy (``INSTALL_RETRY_SECONDS`` in all, a command's
wait rather than a task's) and its failures are the hooks' errors, told in words by :func:`_failure`.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import unicodedata
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

import yaml
from urllib3.exceptions import HTTPError

from airflow_tfjob.hooks.common import api_status, status_of
from airflow_tfjob.hooks.retry import ApiCallFailed
from airflow_tfjob.hooks.sync import KubeflowJobHook

if TYPE_CHECKING:
    from airflow_tfjob.hooks.sync import KubeflowJobHook

NAMES = ("tensorflow-distributed", "tensorflow-chief", "tensorflow-ps")
GROUP, VERSION, PLURAL = "trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes"
#: How long each call of ``install`` is retried when the server does not answer or answers 5xx (the
#: hooks' retry policy; preflight's default too): an admin at a terminal, not a task that must ride out
#: an API server's restart.
INSTALL_RETRY_SECONDS = 10.0


class Installs(Protocol):
    """What :func:`install` needs of a cluster: the hooks' create-or-replace (``KubeflowJobHook``)."""

    def apply_object(self, plural: str, body: dict, namespace: str | None = None) -> str: ...


def load_runtimes(image: str | None = None) -> list[dict[str, Any]]:
    """The shipped runtimes as objects; ``image`` replaces every container's image."""
    out = []
    for name in NAMES:
        text = resources.files(__name__).joinpath(f"{name}.yaml").read_text(encoding="utf-8")
        runtime = yaml.safe_load(text)
        if image:
            for rjob in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
                for container in rjob["template"]["spec"]["template"]["spec"]["containers"]:
                    container["image"] = image
        out.append(runtime)
    return out


def install(cluster: Installs, image: str | None = None, log: Callable[[str], Any] = print) -> list[str]:
    """Create or replace each runtime through ``cluster`` (the hook: :func:`cluster_hook`); their names."""
    installed = []
    for runtime in load_runtimes(image):
        name = runtime["metadata"]["name"]
        done = cluster.apply_object(PLURAL, runtime)
        log(f"{done} ClusterTrainingRuntime {name}")
        installed.append(name)
    return installed


def cluster_hook(config_file: str, context: str | None = None) -> KubeflowJobHook:
    """The synchronous hook over a kubeconfig file (no Airflow connection), under ``INSTALL_RETRY_SECONDS``."""
    # Imported here, not at the top: the hook loads Airflow, which ``show`` (YAML piped to kubectl) and the
    # provider's readers of the runtimes (preflight, the TrainJob adapter's tests) do not need.

    return KubeflowJobHook(
        conn_id=None, config_file=config_file, cluster_context=context, api_retry_timeout=INSTALL_RETRY_SECONDS
    )


class _Parser(argparse.ArgumentParser):
    """argparse with kubectl's manners: a usage error is one line and exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {' '.join(message.split())} (see {self.prog} --help)\n")


class Failure(Exception):
    """Why the install could not be done, in one line naming the missing part and the fix."""


def _image(value: str) -> str:
    if not value or any(c.isspace() or unicodedata.category(c)[0] in "CZ" for c in value):
        raise argparse.ArgumentTypeError(
            f"{value!r}: an image reference is not empty and has no whitespace or invisible characters, "
            "e.g. tensorflow/tensorflow:2.21.0"
        )
    return value


def build_parser() -> argparse.ArgumentParser:
    """The command line (every tool's module names its builder so; tests walk each one's options, and a
    numeric one must be a constants.NumberOption)."""
    parser = _Parser(prog="tfjob-runtimes", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True, metavar="{install,show}")
    for command in ("install", "show"):
        p = sub.add_parser(command)
        p.add_argument(
            "--image",
            type=_image,
            help="the image of every replicated job (default tensorflow/tensorflow:2.21.0)",
        )
        if command == "install":
            p.add_argument("--kubeconfig", help="kube-config file (default: $KUBECONFIG, ~/.kube/config)")
            p.add_argument("--context", help="kube-config context")
            p.add_argument("--debug", action="store_true", help="show the traceback of a failure")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "show":
        sys.stdout.write(yaml.safe_dump_all(load_runtimes(args.image), sort_keys=False))
        return 0
    try:
        hook, server = _client(args.kubeconfig, args.context, quiet=not args.debug)
        try:
            install(hook, args.image)
        except Exception as error:
            raise _failure(error, server) from error
    except Failure as error:
        if args.debug:
            raise
        print(f"tfjob-runtimes: {error}", file=sys.stderr)
        return 1
    return 0


def _client(given: str | None, context: str | None, quiet: bool = True) -> tuple[KubeflowJobHook, str]:
    """The hook for the kubeconfig and context, and its server; a Failure naming what is missing.
    ``quiet``: the retries of a server that is down are one failure, which its line says (--debug shows
    each), so the hook's warnings go to a stdlib logger that is silenced."""
    env = os.environ.get("KUBECONFIG", "").split(os.pathsep)[0]
    path = Path(given or env or Path.home() / ".kube" / "config").expanduser()
    where = "--kubeconfig" if given else "$KUBECONFIG" if env else "the default"
    if not path.is_file():
        raise Failure(f"no kubeconfig at {path} ({where}): give --kubeconfig FILE")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as error:
        mark = getattr(error, "problem_mark", None)
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        # Never the content: a kubeconfig holds tokens and keys.
        raise Failure(
            f"cannot read the kubeconfig {path} ({where}): not valid YAML{at}; fix the kubeconfig or give "
            "another with --kubeconfig FILE"
        ) from None
    contexts = [c.get("name") for c in (data or {}).get("contexts") or [] if isinstance(c, dict)]
    if context is not None and context not in contexts:
        raise Failure(
            f"no context {context!r} in {path} (--context): use one of {', '.join(map(str, contexts)) or '(none)'}"
        )
    if context is None and not (data or {}).get("current-context"):
        raise Failure(
            f"the kubeconfig {path} has no current context: give --context NAME "
            f"(one of {', '.join(map(str, contexts)) or '(none)'})"
        )
    hook = cluster_hook(str(path), context)
    if quiet:
        logging.disable(logging.WARNING)
        # A stdlib logger (which logging.disable silences) in place of the structlog one Airflow gives it.
        hook._log = logging.getLogger("airflow_tfjob.jobs.trainjob.runtimes")  # type: ignore[assignment]
    try:
        server = str(hook.api_client.configuration.host)
    except Exception as error:
        said = " ".join(str(error).split())[:200]
        raise Failure(f"cannot use the kubeconfig {path} ({where}): {said}; fix the kubeconfig") from None
    return hook, server


def _failure(error: Exception, server: str) -> Failure:
    """A hook's error as one line: what the server said (or why it could not be reached) and the fix.
    A status the retry policy gave up on (ApiCallFailed: 5xx, 429) is read from its last answer."""
    status = api_status(error)
    answer = error.last if isinstance(error, ApiCallFailed) else error
    if status is not None:
        reason = str(getattr(answer, "reason", None) or "")
        said = " ".join(str(status_of(answer).get("message") or reason).split())[:200]
        if status == 401:
            return Failure(
                f"the API server at {server} refused the kubeconfig's credentials (401 Unauthorized: {said}); "
                "renew them (log in again) or give another --kubeconfig"
            )
        if status == 403:
            return Failure(
                f"the API server at {server} forbids this user to install runtimes (403 Forbidden: {said}); "
                "an admin with create, get and update on clustertrainingruntimes.trainer.kubeflow.org "
                "must run it"
            )
        if status == 404:
            return Failure(
                f"the API server at {server} serves no ClusterTrainingRuntime (404 Not Found: {said}); "
                "install Kubeflow Trainer v2 (its CRDs) first, then run this again"
            )
        return Failure(
            f"the API server at {server} answered {status} {reason}: {said}; try again, or run "
            "with --debug to see where"
        )
    if _is_connection_error(answer):
        cause = answer
        while cause.__cause__ or cause.__context__:
            cause = cause.__cause__ or cause.__context__  # type: ignore[assignment]
        reason = getattr(cause, "strerror", None) or type(cause).__name__
        return Failure(
            f"cannot reach the API server at {server} ({reason}): is the cluster running, and is the "
            "kubeconfig's server right?"
        )
    return Failure(f"{type(error).__name__}: {' '.join(str(error).split())[:200]} (--debug shows where)")


def _is_connection_error(error: BaseException) -> bool:
    """Whether the server could not be reached (the sync client's transport, urllib3, or the socket)."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, (HTTPError, OSError)):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
