"""A TrainJob's replica pods, as JobSet and the Job controller name and label them (pure).

trainjob-behaviour.md §5.3-5.4: pods of replicated job ``<rJob>`` are ``<tj>-<rJob>-<jobIdx>-<podIdx>-<5>``,
labelled ``jobset.sigs.k8s.io/jobset-name``, ``jobset.sigs.k8s.io/replicatedjob-name``,
``jobset.sigs.k8s.io/job-index`` and ``batch.kubernetes.io/job-completion-index``. The task log names a
replica ``<rJob>-<jobIdx>-<podIdx>`` (``[node-0-1]``), the stable part of its DNS name: the replica
"type" is ``<rJob>-<jobIdx>`` and its index the completion index (the node's rank).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

LABEL_JOBSET_NAME = "jobset.sigs.k8s.io/jobset-name"
LABEL_RJOB_NAME = "jobset.sigs.k8s.io/replicatedjob-name"
LABEL_JOB_INDEX = "jobset.sigs.k8s.io/job-index"
LABEL_COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
#: The replicated job the runtimes conventionally run the trainer in (container ``node`` too).
TRAINER_RJOB = "node"
#: On a TrainJob the provider created: the replica whose log holds the metrics and the return value
#: ("<rJob>-<jobIdx>-<podIdx>"), when it is not the trainer's node 0 (a TensorFlow chief).
ANNOTATION_RANK0 = "tfjob.airflow.apache.org/rank0-replica"
#: On a TFJob run as a TrainJob: its replica types as JSON, ``{"Worker": ["node", 2], "Chief": ["chief", 1]}``
#: (replicated job, replicas), so that its status reads as the TFJob's (trainjob/status.py).
ANNOTATION_TF_REPLICAS = "tfjob.airflow.apache.org/tf-replicas"


def replica_of(pod: Mapping[str, Any]) -> tuple[str, int] | None:
    """(``"<rJob>-<jobIdx>"``, completion index) of a JobSet pod; None for any other pod."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    rjob, index = labels.get(LABEL_RJOB_NAME), labels.get(LABEL_COMPLETION_INDEX)
    if not rjob or index is None or not str(index).isdigit():
        return None
    return f"{rjob}-{labels.get(LABEL_JOB_INDEX) or 0}", int(index)


def rank0(job: Mapping[str, Any]) -> tuple[str, int]:
    """The replica rank 0 runs in: the annotated one, else the trainer's first node (``node-0``, 0)."""
    named = str(((job.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_RANK0) or "")
    head, _, index = named.rpartition("-")
    if head and index.isdigit():
        return head, int(index)
    return f"{TRAINER_RJOB}-0", 0


def expected_pods(job: Mapping[str, Any]) -> int:
    """How many trainer pods the TrainJob asks for (0 when it leaves the count to its runtime)."""
    trainer = (job.get("spec") or {}).get("trainer") or {}
    count = trainer.get("numNodes") if isinstance(trainer, Mapping) else None
    return count if isinstance(count, int) and not isinstance(count, bool) and count > 0 else 0


def pod_dns_name(
    job_name: str, rjob: str, index: int, job_index: int = 0, subdomain: str | None = None
) -> str:
    """The stable DNS name of a node: ``<tj>-<rJob>-<jobIdx>-<podIdx>.<subdomain>`` (§5.3)."""
    return f"{job_name}-{rjob}-{job_index}-{index}.{subdomain or job_name}"


def tf_type(job: Mapping[str, Any], rtype: str) -> str:
    """``"worker"`` for replica type ``"node-0"`` of a TFJob run as a TrainJob (its annotation), so that
    ``log_replicas="worker:1"`` selects ``[node-0-1]``; ``rtype`` itself otherwise."""
    raw = ((job.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_TF_REPLICAS)
    try:
        layout = json.loads(raw) if isinstance(raw, str) else {}
    except ValueError:
        return rtype
    rjob = rtype.rpartition("-")[0]
    for tf_name, value in layout.items() if isinstance(layout, dict) else ():
        if isinstance(value, list) and value and value[0] == rjob:
            return str(tf_name).lower()
    return rtype
