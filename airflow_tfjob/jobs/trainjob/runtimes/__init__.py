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
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import sys
import unicodedata
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any, NoReturn

import yaml

NAMES = ("tensorflow-distributed", "tensorflow-chief", "tensorflow-ps")
GROUP, VERSION, PLURAL = "trainer.kubeflow.org", "v1alpha1", "clustertrainingruntimes"


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


def install(api_client: Any, image: str | None = None, log: Any = print) -> list[str]:
    """Create or replace each runtime through ``api_client`` (a kubernetes ApiClient); their names."""
    from kubernetes import client
    from kubernetes.client.rest import ApiException

    api = client.CustomObjectsApi(api_client)
    installed = []
    for runtime in load_runtimes(image):
        name = runtime["metadata"]["name"]
        try:
            api.create_cluster_custom_object(GROUP, VERSION, PLURAL, runtime)
            log(f"created ClusterTrainingRuntime {name}")
        except ApiException as exc:
            if exc.status != 409:
                raise
            current = api.get_cluster_custom_object(GROUP, VERSION, PLURAL, name)
            body = copy.deepcopy(runtime)
            body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            api.replace_cluster_custom_object(GROUP, VERSION, PLURAL, name, body)
            log(f"replaced ClusterTrainingRuntime {name}")
        installed.append(name)
    return installed


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
        api_client, server = _client(args.kubeconfig, args.context)
        try:
            install(api_client, args.image)
        except Exception as error:
            raise _failure(error, server) from error
    except Failure as error:
        if args.debug:
            raise
        print(f"tfjob-runtimes: {error}", file=sys.stderr)
        return 1
    return 0


def _client(given: str | None, context: str | None) -> tuple[Any, str]:
    """An ApiClient for the kubeconfig and context, and its server; a Failure naming what is missing."""
    from kubernetes import config

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
    try:
        api_client = config.new_client_from_config(config_file=str(path), context=context)
    except Exception as error:
        said = " ".join(str(error).split())[:200]
        raise Failure(f"cannot use the kubeconfig {path} ({where}): {said}; fix the kubeconfig") from None
    return api_client, str(api_client.configuration.host)


def _failure(error: Exception, server: str) -> Failure:
    """A client error as one line: what the server said (or why it could not be reached) and the fix."""
    from kubernetes.client.rest import ApiException

    if isinstance(error, ApiException):
        try:
            said = json.loads(error.body or "{}").get("message") or error.reason
        except (ValueError, AttributeError):
            said = error.reason
        said = " ".join(str(said).split())[:200]
        if error.status == 401:
            return Failure(
                f"the API server at {server} refused the kubeconfig's credentials (401 Unauthorized: {said}); "
                "renew them (log in again) or give another --kubeconfig"
            )
        if error.status == 403:
            return Failure(
                f"the API server at {server} forbids this user to install runtimes (403 Forbidden: {said}); "
                "an admin with create, get and update on clustertrainingruntimes.trainer.kubeflow.org "
                "must run it"
            )
        if error.status == 404:
            return Failure(
                f"the API server at {server} serves no ClusterTrainingRuntime (404 Not Found: {said}); "
                "install Kubeflow Trainer v2 (its CRDs) first, then run this again"
            )
        return Failure(
            f"the API server at {server} answered {error.status} {error.reason}: {said}; try again, or run "
            "with --debug to see where"
        )
    if _is_connection_error(error):
        cause = error
        while cause.__cause__ or cause.__context__:
            cause = cause.__cause__ or cause.__context__  # type: ignore[assignment]
        reason = getattr(cause, "strerror", None) or type(cause).__name__
        return Failure(
            f"cannot reach the API server at {server} ({reason}): is the cluster running, and is the "
            "kubeconfig's server right?"
        )
    return Failure(f"{type(error).__name__}: {' '.join(str(error).split())[:200]} (--debug shows where)")


def _is_connection_error(error: BaseException) -> bool:
    from urllib3.exceptions import HTTPError

    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, (HTTPError, OSError)):
            return True
        seen = seen.__cause__ or seen.__context__
    return False
