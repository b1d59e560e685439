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
replicated jobs whose command the TrainJob cannot set, chief and ps). Where a stand-in for cluster DNS
is advertised (``TFJOB_LOCAL_DNS``, the local cluster's directory of names: a file per name holding its
address), names are read from it instead, waiting for the name to appear like a DNS lookup would.

Ports: one per task, from a base derived from the job's name, so that tasks sharing a host (the local
cluster) never collide; on a real cluster any port works (the headless Service declares none).
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping

from airflow_tfjob.trainjob.pods import pod_dns_name

ENV_CLUSTER = "TFJOB_TF_CLUSTER"
ENV_TASK_TYPE = "TFJOB_TF_TASK_TYPE"
ENV_COMMAND = "TFJOB_TF_COMMAND"
ENV_WORKING_DIR = "TFJOB_TF_WORKING_DIR"
# The launcher's source, for replicated jobs whose command is the runtime's (chief, ps): their runtime
# runs ``python3 -c "import os; exec(os.environ['TFJOB_TF_LAUNCHER'])"``.
ENV_LAUNCHER = "TFJOB_TF_LAUNCHER"
# The order TensorFlow lists task types in, and the replicated job each type runs in.
TASK_TYPES = ("chief", "ps", "worker")
RJOB_OF_TYPE = {"chief": "chief", "ps": "ps", "worker": "node"}
PORT_BASE, PORT_SPAN = 20000, 20000

#: The launcher, run as ``python3 -c LAUNCHER <command...>``. Kept short and dependency-free.
LAUNCHER = r"""import json, os, sys, time
cluster = json.loads(os.environ["TFJOB_TF_CLUSTER"])
dns = os.environ.get("TFJOB_LOCAL_DNS")
def resolve(address):
    host, _, port = address.rpartition(":")
    if not dns:
        return address
    for _ in range(600):
        for name in (host, host.split(".")[0]):
            path = os.path.join(dns, name)
            if os.path.exists(path):
                words = open(path).read().split()
                if words:
                    return words[0] + ":" + port
        time.sleep(0.1)
    return address
cluster = {t: [resolve(a) for a in addrs] for t, addrs in cluster.items()}
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


def base_port(job_name: str) -> int:
    return PORT_BASE + zlib.crc32(job_name.encode()) % PORT_SPAN


def cluster(job_name: str, counts: Mapping[str, int]) -> dict[str, list[str]]:
    """The TF_CONFIG cluster of a TrainJob with ``counts`` tasks per type (``{"worker": 2}``)."""
    port = base_port(job_name)
    result: dict[str, list[str]] = {}
    for ttype in TASK_TYPES:
        addresses = []
        for index in range(counts.get(ttype, 0)):
            addresses.append(f"{pod_dns_name(job_name, RJOB_OF_TYPE[ttype], index)}:{port}")
            port += 1
        if addresses:
            result[ttype] = addresses
    return result


def cluster_env(job_name: str, counts: Mapping[str, int]) -> str:
    return json.dumps(cluster(job_name, counts), separators=(",", ":"))


def tf_config(job_name: str, counts: Mapping[str, int], task_type: str, index: int) -> dict[str, object]:
    """What the launcher writes for one task when names are not rewritten (for tests and docs)."""
    return {"cluster": cluster(job_name, counts), "task": {"type": task_type, "index": index}}
