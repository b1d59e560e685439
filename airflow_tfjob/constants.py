"""Names shared by the provider's modules (and the local cluster): training-operator labels and our own
identity and annotation keys.

Kept free of imports so that every module (including the cheap-to-import operator module) can use it.
"""

from __future__ import annotations

GROUP = "kubeflow.org"
VERSION = "v1"
API_VERSION = f"{GROUP}/{VERSION}"
PLURAL = "tfjobs"
KIND = "TFJob"

# Canonical replica type keys, in the order the training-operator processes them.
REPLICA_TYPES = ("Chief", "Evaluator", "Master", "PS", "Worker")
CONTAINER_NAME = "tensorflow"
PORT_NAME = "tfjob-port"
DEFAULT_PORT = 2222

# Labels the training-operator puts on pods and services.
LABEL_OPERATOR_NAME = "training.kubeflow.org/operator-name"
LABEL_JOB_NAME = "training.kubeflow.org/job-name"
LABEL_REPLICA_TYPE = "training.kubeflow.org/replica-type"
LABEL_REPLICA_INDEX = "training.kubeflow.org/replica-index"
LABEL_JOB_ROLE = "training.kubeflow.org/job-role"

# Identity labels the provider writes on the TFJob, so a later try can find it again.
LABEL_MANAGED = "airflow.apache.org/tfjob-provider"
LABEL_DAG_ID = "airflow.apache.org/dag-id"
LABEL_TASK_ID = "airflow.apache.org/task-id"
LABEL_RUN_ID = "airflow.apache.org/run-id"
LABEL_MAP_INDEX = "airflow.apache.org/map-index"
LABEL_TRY_NUMBER = "airflow.apache.org/try-number"
LABEL_HANDLED = "airflow.apache.org/tfjob-handled"

ANNOTATION_PREFIX = "tfjob.airflow.apache.org/"
ANNOTATION_DAG_ID = ANNOTATION_PREFIX + "dag-id"
ANNOTATION_TASK_ID = ANNOTATION_PREFIX + "task-id"
ANNOTATION_RUN_ID = ANNOTATION_PREFIX + "run-id"
ANNOTATION_INTENDED_CLEAN_POD_POLICY = ANNOTATION_PREFIX + "clean-pod-policy"
ANNOTATION_INTENDED_TTL = ANNOTATION_PREFIX + "ttl-seconds-after-finished"
ANNOTATION_RESULT_REPORTED = ANNOTATION_PREFIX + "result-reported"
# keep_failed_for: when a failed job and its pods go (RFC 3339), on the job and on the batch Job whose
# TTL deletes a job its API gives no TTL (follow/cleanup.py); the label names the job that Job keeps.
ANNOTATION_KEEP_FAILED_UNTIL = ANNOTATION_PREFIX + "keep-failed-until"
LABEL_KEEPS_FAILED = ANNOTATION_PREFIX + "keeps-failed"

KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
GPU_RESOURCE = "nvidia.com/gpu"
ANNOTATION_MAP_INDEX = ANNOTATION_PREFIX + "map-index"
ANNOTATION_TRY_NUMBER = ANNOTATION_PREFIX + "try-number"
# Comma-separated names of env vars whose literal values the user marked secret (`secret_env`):
# the names only, so that rendered manifests, XComs and logs can hide the values.
ANNOTATION_SECRET_ENV = ANNOTATION_PREFIX + "secret-env"

# Values the training-operator gives meaning to (the CRD accepts any string).
RESTART_POLICIES = ("Always", "OnFailure", "ExitCode", "Never")
CLEAN_POD_POLICIES = ("None", "Running", "All")
SUCCESS_POLICIES = ("", "AllWorkers")
MANAGED_BY_VALUES = ("kubeflow.org/training-operator", "kueue.x-k8s.io/multikueue")

#: The grace period (seconds) of a kill's deletions unless the operator's ``kill_grace_period`` says
#: otherwise: SIGTERM, then SIGKILL one second later. A killed task's job must stop within seconds, not
#: after the pods' own terminationGracePeriodSeconds (30 s by default); 1 rather than 0 because 0 is a
#: forced deletion, which removes the pod objects before the kubelet has stopped their processes.
KILL_GRACE_PERIOD = 1
