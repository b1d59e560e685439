"""The TensorFlow ClusterTrainingRuntimes shipped with the provider, and the command that installs them.

Trainer v2 ships no TensorFlow runtime (trainjob-behaviour.md §10); TFJobOperator(api="trainjob")
runs on these (``from_tfjob.RUNTIME_OF_TYPES``): ``tensorflow-distributed`` (workers),
``tensorflow-chief`` (chief + workers), ``tensorflow-ps`` (chief + PS + workers). Install them once
per cluster (an admin's step, like Trainer's own runtimes)::

    tfjob-runtimes install [--kubeconfig PATH] [--context NAME] [--image IMAGE]
    python -m airflow_tfjob.trainjob.runtimes install ...     # the same
    tfjob-runtimes show [--image IMAGE]                        # print the YAML (for kubectl apply -f -)

``--image`` sets the image of the replicated jobs the TrainJob cannot set (chief and PS run the
runtime's image; the workers run the TrainJob's). Installing again replaces them (a TrainJob that
exists keeps the snapshot it was created with, §3.2).
"""

from __future__ import annotations

import argparse
import copy
import sys
from collections.abc import Sequence
from importlib import resources
from typing import Any

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


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tfjob-runtimes", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for command in ("install", "show"):
        p = sub.add_parser(command)
        p.add_argument(
            "--image", help="the image of every replicated job (default tensorflow/tensorflow:2.21.0)"
        )
        if command == "install":
            p.add_argument("--kubeconfig", help="kube-config file (default: $KUBECONFIG, ~/.kube/config)")
            p.add_argument("--context", help="kube-config context")
    args = parser.parse_args(argv)
    if args.command == "show":
        sys.stdout.write(yaml.safe_dump_all(load_runtimes(args.image), sort_keys=False))
        return 0
    from kubernetes import config

    api_client = config.new_client_from_config(config_file=args.kubeconfig, context=args.context)
    install(api_client, args.image)
    return 0
