"""One secret in every structured parameter that can hold one, rendered by a real task runner: the task log,
XCom and the rendered fields must show it as ***. Nothing runs (render_only): the manifests are the point."""

from __future__ import annotations

from airflow.sdk import DAG, task

from airflow_tfjob.operators.tfjob import TFJobOperator
from airflow_tfjob.operators.trainjob import TrainJobOperator

TOKEN = "dags-test-everywhere-token-7731"
CALL_TOKEN = "dags-test-everywhere-call-2208"

with DAG("secrets_everywhere", schedule=None, catchup=False, tags=["test"]):
    tfjob = TFJobOperator(
        task_id="tfjob",
        namespace="default",
        render_only=True,
        secret_env={"API_TOKEN": TOKEN},
        # A template carrying it deep in a replica's args, and the other templated structures.
        tfjob={
            "spec": {
                "tfReplicaSpecs": {
                    "Worker": {
                        "replicas": 1,
                        "template": {
                            "spec": {
                                "containers": [
                                    {
                                        "name": "tensorflow",
                                        "image": "local/python",
                                        "args": [f"--token={TOKEN}"],
                                    }
                                ]
                            }
                        },
                    }
                }
            }
        },
        env={"AUTH_HEADER": f"Bearer {TOKEN}"},
        hyperparameters={"auth": {"nested": {"deeper": {"deepest": {"token": [TOKEN]}}}}},
        volumes=[{"name": "v", "csi": {"driver": "d.example.com", "volumeAttributes": {"token": TOKEN}}}],
        replica_placement={"Worker": {"node_selector": {"token": TOKEN}}},
        pod_annotations={"example.com/token": TOKEN},
    )
    trainjob = TrainJobOperator(
        task_id="trainjob",
        namespace="default",
        runtime="torch-distributed",
        image="local/python",
        render_only=True,
        secret_env={"API_TOKEN": TOKEN},
        runtime_patches=[
            {
                "manager": "example.com/secrets-test",
                "trainingRuntimeSpec": {
                    "template": {
                        "spec": {
                            "replicatedJobs": [
                                {
                                    "name": "node",
                                    "template": {
                                        "spec": {
                                            "template": {
                                                "spec": {
                                                    "containers": [
                                                        {
                                                            # A sidecar: the webhook refuses env set
                                                            # on the trainer container through a patch.
                                                            "name": "sidecar",
                                                            "env": [{"name": "COPY", "value": TOKEN}],
                                                        }
                                                    ]
                                                }
                                            }
                                        }
                                    },
                                }
                            ]
                        }
                    }
                },
            }
        ],
    )

    @task.tfjob(image="local/python", worker=1, render_only=True, secret_args=["token"])
    def decorated(token: str, options: dict) -> int:
        return len(token)

    tfjob >> trainjob >> decorated(CALL_TOKEN, {"deep": {"er": {"and": {"deeper": [CALL_TOKEN]}}}})
