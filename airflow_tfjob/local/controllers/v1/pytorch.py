"""PyTorchJob controller of the local cluster, imitating training-operator v1.9.4 (pytorch/
pytorchjob_controller.go, envvar.go, master.go, elastic.go, initcontainer.go; pytorch_defaults.go):
docs/reference/kubeflow-v1-kinds.md §1.

Defaults (in memory): those of kindpass.py, then `setElasticPolicy` (min/max from each other, else both
the Worker count) and `nprocPerNode: "auto"` unless the deprecated `elasticPolicy.nProcPerNode` is set.
Environment, appended to every container: PYTHONUNBUFFERED; with a Master spec MASTER_PORT,
PET_MASTER_PORT, MASTER_ADDR, PET_MASTER_ADDR, WORLD_SIZE (replicas x nprocPerNode, 1 per node unless an
integer), RANK and PET_NODE_RANK (Master 0, Worker index + 1); PET_NPROC_PER_NODE; then PET_NNODES (the
replica total) or, with an elasticPolicy, the PET_RDZV_* set. The master role is the Master, else
worker 0. With a Master, Worker pods get the `init-pytorch` init container that waits for the master's
name to resolve (node/dns.py stands in for cluster DNS).

Local addresses: MASTER_ADDR is 127.0.0.1 and MASTER_PORT the master's host port (the operator: the
Service name `{job}-master-0` and 23456); PET_RDZV_ENDPOINT's defaults likewise point at worker 0's
host port (a user's own rdzvHost / rdzvPort are kept as given).
"""

from __future__ import annotations

from airflow_tfjob.jobs.kinds import PYTORCHJOB
from airflow_tfjob.local.controllers.v1.kindpass import (
    LOCAL_ADDRESS,
    KindPass,
    controller_for,
    default_elastic_range,
    env,
)
from airflow_tfjob.local.model.resources import JsonDict
from airflow_tfjob.local.node.dns import wait_for_name_container


def nproc_int(value: object) -> int:
    """getNprocPerNodeInt: the integer nprocPerNode, 1 for nil, `auto`, `cpu`, `gpu` or anything else."""
    try:
        return int(str(value)) if value is not None else 1
    except ValueError:
        return 1


class PyTorchJobPass(KindPass):
    jobkind = PYTORCHJOB

    def extra_defaults(self, spec: JsonDict) -> None:
        elastic = default_elastic_range(spec, self.jobkind.spec_key)
        deprecated = elastic.get("nProcPerNode") if elastic is not None else None
        if deprecated is None and spec.get("nprocPerNode") is None:
            spec["nprocPerNode"] = "auto"

    def is_master_role(self, rtype: str, index: int) -> bool:
        if self.has_master():
            return rtype == "Master"
        return rtype == "Worker" and index == 0

    def any_worker_succeeds(self) -> bool:
        return self.spec.get("elasticPolicy") is not None

    def pod_env(self, rt: str, index: int) -> list[JsonDict]:
        total = self.total_replicas()
        out = env(("PYTHONUNBUFFERED", "1"))
        if self.has_master():
            port = self.host_port("Master", 0)
            rank = index + 1 if rt == "worker" else index
            out += env(
                ("MASTER_PORT", port),
                ("PET_MASTER_PORT", port),
                ("MASTER_ADDR", LOCAL_ADDRESS),
                ("PET_MASTER_ADDR", LOCAL_ADDRESS),
                ("WORLD_SIZE", total * nproc_int(self.spec.get("nprocPerNode"))),
                ("RANK", rank),
                ("PET_NODE_RANK", rank),
            )
        if self.spec.get("nprocPerNode") is not None:
            out += env(("PET_NPROC_PER_NODE", self.spec["nprocPerNode"]))
        elastic = self.spec.get("elasticPolicy")
        if not isinstance(elastic, dict):
            return out + env(("PET_NNODES", total))
        return out + self._elastic_env(elastic, total)

    def _elastic_env(self, elastic: JsonDict, total: int) -> list[JsonDict]:
        """ElasticEnvVarGenerator: rendezvous endpoint and backend, node range, then the optional ones."""
        host = elastic.get("rdzvHost") or LOCAL_ADDRESS
        port = elastic.get("rdzvPort")
        if port is None:
            self.require("Worker", "port not found")
            port = self.host_port("Worker", 0)
        low, high = elastic.get("minReplicas"), elastic.get("maxReplicas")
        nnodes = f"{low}:{high}" if low is not None and high is not None else str(total)
        out = env(
            ("PET_RDZV_ENDPOINT", f"{host}:{port}"),
            ("PET_RDZV_BACKEND", elastic.get("rdzvBackend") or "c10d"),
            ("PET_NNODES", nnodes),
        )
        for field, name in (("maxRestarts", "PET_MAX_RESTARTS"), ("nProcPerNode", "PET_NPROC_PER_NODE"),
                            ("rdzvId", "PET_RDZV_ID")):
            if elastic.get(field) is not None:
                out += env((name, elastic[field]))
        conf = elastic.get("rdzvConf")
        if isinstance(conf, list) and conf:
            out += env(("PET_RDZV_CONF", ",".join(f"{c.get('key')}={c.get('value')}" for c in conf)))
        if elastic.get("standalone") is True:
            out += env(("PET_STANDALONE", ""))
        return out

    def extra_pod_spec(self, pod_spec: JsonDict, rt: str, index: int) -> None:
        if rt == "worker" and self.has_master():
            init = wait_for_name_container("init-pytorch", f"{self.name}-master-0", "waiting for master")
            pod_spec["initContainers"] = [*(pod_spec.get("initContainers") or []), init]


PyTorchJobController = controller_for(PyTorchJobPass)
