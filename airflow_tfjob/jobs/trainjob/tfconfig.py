"""TF_CONFIG for TensorFlow on Trainer v2, computed in each node's container (pure).

Trainer v2 has no TensorFlow plugin (trainjob-behaviour.md §10): every pod of the trainer's Indexed Job
shares one template, so TF_CONFIG cannot be a literal env value. The provider therefore puts a small
launcher in front of the user's command: plain Python (any image with ``python3``; nothing of this
provider installed), it reads

- ``TFJOB_TF_CLUSTER``: the cluster as JSON, every task's stable DNS name ``<tj>-<rJob>-0-<i>.<tj>``
  (§5.3; the headless Service publishes them before readiness) and a port, computed here from the
  TrainJob's name (which the provider fixes before it builds the env);
- ``TFJOB_TF_TASK_TYPE``: the TensorFlow task type of the replicated job (``worker`` for the trainer);
- ``JOB_COMPLETION_INDEX`` (set by Kubernetes on Indexed Jobs): the task index;

writes ``TF_CONFIG`` and execs the user's command (its arguments, or ``TFJOB_TF_COMMAND`` (JSON) in
replicated jobs whose command the TrainJob cannot set, chief and ps). TensorFlow resolves the names
itself (gRPC); ``publishNotReadyAddresses`` makes them resolvable before the pods are ready. (The local
cluster rewrites every such name in a pod's env to its local address and port, localnet.py.)
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from airflow_tfjob.jobs.trainjob.pods import TRAINER_RJOB, pod_dns_name

ENV_CLUSTER = "TFJOB_TF_CLUSTER"
ENV_TASK_TYPE = "TFJOB_TF_TASK_TYPE"
ENV_COMMAND = "TFJOB_TF_COMMAND"
ENV_WORKING_DIR = "TFJOB_TF_WORKING_DIR"
# The launcher's source, for replicated jobs whose command is the runtime's (chief, ps): their runtime
# runs ``python3 -c "import os; exec(os.environ['TFJOB_TF_LAUNCHER'])"``.
ENV_LAUNCHER = "TFJOB_TF_LAUNCHER"
#: The order TensorFlow lists task types in (TF_CONFIG's, a TFJob's replica types lower-cased).
TASK_TYPES = ("chief", "ps", "worker")
#: The replicated job each task type runs in on the TensorFlow runtimes (runtimes/*.yaml): the one
#: table of it, read by the mapping (from_tfjob.py), the name limits (adapter.py) and TF_CONFIG here;
#: the workers are the trainer's nodes.
RJOB_OF_TYPE = {"chief": "chief", "ps": "ps", "worker": TRAINER_RJOB}
# Every pod has its own IP, so every task can listen on the port a TFJob's replicas use.
PORT = 2222

#: The launcher, run as ``python3 -c LAUNCHER <command...>``. Kept short and dependency-free.
LAUNCHER = r"""import json, os, sys
cluster = json.loads(os.environ["TFJOB_TF_CLUSTER"])
task = {"type": os.environ.get("TFJOB_TF_TASK_TYPE", "worker"), "index": int(os.environ.get("JOB_COMPLETION_INDEX", "0"))}
os.environ["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": task})
argv = sys.argv[1:] or json.loads(os.environ.get("TFJOB_TF_COMMAND", "[]"))
if os.environ.get("TFJOB_TF_WORKING_DIR"):
    os.chdir(os.environ["TFJOB_TF_WORKING_DIR"])
if not argv:
    sys.exit("tfjob launcher: no command to run (TFJOB_TF_COMMAND is empty)")
sys.stdout.flush()
os.execvp(argv[0], argv)
"""
LAUNCHER_COMMAND = ("python3", "-c", LAUNCHER)


def cluster(job_name: str, counts: Mapping[str, int]) -> dict[str, list[str]]:
    """The TF_CONFIG cluster of a TrainJob with ``counts`` tasks per type (``{"worker": 2}``)."""
    result: dict[str, list[str]] = {}
    for ttype in TASK_TYPES:
        addresses = [
            f"{pod_dns_name(job_name, RJOB_OF_TYPE[ttype], i)}:{PORT}" for i in range(counts.get(ttype, 0))
        ]
        if addresses:
            result[ttype] = addresses
    return result


def cluster_env(job_name: str, counts: Mapping[str, int]) -> str:
    return json.dumps(cluster(job_name, counts), separators=(",", ":"))


def tf_config(job_name: str, counts: Mapping[str, int], task_type: str, index: int) -> dict[str, object]:
    """What the launcher writes for one task when names are not rewritten (for tests and docs)."""
    return {"cluster": cluster(job_name, counts), "task": {"type": task_type, "index": index}}
