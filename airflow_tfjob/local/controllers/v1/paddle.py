"""PaddleJob controller of the local cluster, imitating training-operator v1.9.4 (paddlepaddle/
paddlepaddle_controller.go, envvar.go; paddlepaddle_defaults.go): docs/reference/kubeflow-v1-kinds.md §4.

Defaults: kindpass.py's (restartPolicy OnFailure, port `master` 36543) and elasticPolicy's min/max as
PyTorch's (it has no other effect in v1.9.4). Environment, appended to every container:
PYTHONUNBUFFERED, PADDLE_JOB_ID, PADDLE_NNODES, then PADDLE_MASTER: the rendezvous pod (master 0 if
there is a Master, else worker 0) gets POD_IP_DUMMY and `PADDLE_MASTER=$(POD_IP_DUMMY):{port}`, every
other pod the rendezvous pod's address; with a Master, masters also get PADDLE_SERVER_NUM=1 and workers
PADDLE_TRAINER_NUM=1. Only Master pods have the master role (none without a Master).

Local addresses: POD_IP_DUMMY is the value 127.0.0.1 rather than the pod's IP (fieldRef status.podIP),
so that the rendezvous address every pod gets is the same, `127.0.0.1:{host port of the rendezvous
pod}` (the operator: `{job}-master-0:36543` or `{job}-worker-0:36543`).
"""

from __future__ import annotations

from airflow_tfjob.jobs.kinds import PADDLEJOB
from airflow_tfjob.local.controllers.v1.kindpass import (
    LOCAL_ADDRESS,
    KindPass,
    controller_for,
    default_elastic_range,
    env,
)
from airflow_tfjob.local.model.resources import JsonDict


class PaddleJobPass(KindPass):
    jobkind = PADDLEJOB

    def extra_defaults(self, spec: JsonDict) -> None:
        default_elastic_range(spec, self.jobkind.spec_key)

    def is_master_role(self, rtype: str, index: int) -> bool:
        return rtype == "Master"

    def pod_env(self, rt: str, index: int) -> list[JsonDict]:
        out = env(("PYTHONUNBUFFERED", "1"), ("PADDLE_JOB_ID", self.name), ("PADDLE_NNODES", self.total_replicas()))
        rendezvous = "master" if self.has_master() else "worker"
        port = self.host_port(rendezvous, 0)
        if rt == rendezvous and index == 0:
            out += env(("POD_IP_DUMMY", LOCAL_ADDRESS), ("PADDLE_MASTER", f"$(POD_IP_DUMMY):{port}"))
        else:
            out += env(("PADDLE_MASTER", f"{LOCAL_ADDRESS}:{port}"))
        if self.has_master():
            out += env(("PADDLE_SERVER_NUM", "1") if rt == "master" else ("PADDLE_TRAINER_NUM", "1"))
        return out


PaddleJobController = controller_for(PaddleJobPass)
