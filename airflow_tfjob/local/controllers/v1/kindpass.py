"""The reconcile pass of the kubeflow.org/v1 kinds (TFJob, PyTorchJob, XGBoostJob, JAXJob, PaddleJob),
driven by their row in airflow_tfjob/jobs/kinds.py: names, in-memory defaults (SetDefaults_<Kind>:
cleanPodPolicy None, replica keys in canonical case, replicas 1, the kind's restartPolicy, the kind's port
on its container or container[0]), the environment appended to the containers, and UpdateJobStatus by
the kind's success and failure rules (kindstatus.py). A kind's module (tfjob.py, pytorch.py, ...) adds
its master role, its environment (and which containers get it) and any extra defaults.

Addresses are local, as for TF_CONFIG: where the operator writes a bare Service name (`{job}-master-0`)
the local cluster writes 127.0.0.1, and where it writes the kind's port (23456, 9999, 6666, 36543) it
writes the host port of that replica (ports.py), recorded on its Pod and Service."""

from __future__ import annotations

import copy
from typing import ClassVar

from airflow_tfjob.jobs.kinds import API_VERSION, JobKind
from airflow_tfjob.local.controllers.v1 import kindstatus
from airflow_tfjob.local.controllers.v1.controller import V1JobController
from airflow_tfjob.local.controllers.v1.jobpass import JobPass, ReconcileError
from airflow_tfjob.local.model.resources import JsonDict

LOCAL_ADDRESS = "127.0.0.1"


class KindPass(JobPass):
    """One reconcile pass over a job of `jobkind`; a kind's module subclasses it."""

    jobkind: ClassVar[JobKind]

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        kind = cls.__dict__.get("jobkind")
        if kind is not None:
            cls.kind = kind.kind
            cls.plural = kind.plural
            cls.api_version = API_VERSION
            cls.controller_name = kind.controller
            cls.replica_specs_field = kind.spec_key
            cls.container_name = kind.container
            cls.port_name = kind.port_name

    # ---- what a kind's module provides

    def extra_defaults(self, spec: JsonDict) -> None:
        """Defaults beyond the shared ones (PyTorch's elasticPolicy and nprocPerNode)."""

    def pod_env(self, rt: str, index: int) -> list[JsonDict]:
        """The variables the operator appends to every container of replica (rt, index)."""
        raise NotImplementedError

    def env_targets(self, pod_spec: JsonDict) -> list[JsonDict]:
        """The containers `pod_env` is appended to: every one (TFJob's TF_CONFIG goes to its own container)."""
        return list(pod_spec.get("containers") or [])

    def extra_pod_spec(self, pod_spec: JsonDict, rt: str, index: int) -> None:
        """Anything else SetClusterSpec adds to a new pod (PyTorch's init container)."""

    def any_worker_succeeds(self) -> bool:
        """Whether one succeeded Worker makes a Master-less job succeed (PyTorch with elasticPolicy)."""
        return False

    # ---- JobPass hooks

    def default_spec(self, spec: JsonDict) -> JsonDict:
        spec = copy.deepcopy(spec) if isinstance(spec, dict) else {}
        run_policy = spec.get("runPolicy")
        if not isinstance(run_policy, dict):
            run_policy = spec["runPolicy"] = {}
        run_policy.setdefault("cleanPodPolicy", "None")
        replicas = spec.get(self.jobkind.spec_key)
        renamed: JsonDict = {}
        for key, value in (replicas if isinstance(replicas, dict) else {}).items():
            canonical = self.jobkind.canonical_type(str(key)) or key
            renamed[canonical] = value if isinstance(value, dict) else {}
        for rspec in renamed.values():
            if rspec.get("replicas") is None:
                rspec["replicas"] = 1
            if not rspec.get("restartPolicy"):
                rspec["restartPolicy"] = self.jobkind.restart_policy
            self._default_port(rspec.setdefault("template", {}).setdefault("spec", {}))
        spec[self.jobkind.spec_key] = renamed
        self.extra_defaults(spec)
        return spec

    def _default_port(self, pod_spec: JsonDict) -> None:
        containers = pod_spec.get("containers") or []
        if not containers:
            return
        index = next((i for i, c in enumerate(containers) if c.get("name") == self.jobkind.container), 0)
        ports = containers[index].setdefault("ports", [])
        if not any(p.get("name") == self.jobkind.port_name for p in ports):
            ports.append({"name": self.jobkind.port_name, "containerPort": self.jobkind.port})

    def ordered_types(self) -> list[str]:
        """The kind's types in the table's order (the operator walks a Go map, in random order), then any
        unknown key (the webhook refuses those; without it they get pods like the others)."""
        known = [t for t in self.jobkind.replica_types if t in self.replicas]
        return known + sorted(t for t in self.replicas if t not in self.jobkind.replica_types)

    def set_cluster_spec(self, pod_spec: JsonDict, rt: str, index: int) -> None:
        env = self.pod_env(rt, index)
        if env:  # a replica without variables of its kind (a lone TFJob replica) keeps its containers as given
            for container in self.env_targets(pod_spec):
                container["env"] = [*(container.get("env") or []), *copy.deepcopy(env)]
        self.extra_pod_spec(pod_spec, rt, index)

    def update_job_status(self) -> None:
        kindstatus.update_job_status(self, self.jobkind, any_worker_succeeds=self.any_worker_succeeds())

    # ---- helpers for the kinds' environments

    def total_replicas(self) -> int:
        return sum(self.count(t) for t in self.replicas)

    def host_port(self, rtype: str, index: int) -> int:
        """The local stand-in for the kind's port on replica (rtype, index): its own host port."""
        return self.ports.port(self.uid, rtype.lower(), index)

    def require(self, rtype: str, what: str) -> None:
        """The operator's SetClusterSpec error when the spec it reads a port from is missing: no pod."""
        if rtype not in self.replicas:
            raise ReconcileError(f"{self.kind} {self.namespace}/{self.name}: {what}")


def env(*pairs: tuple[str, object]) -> list[JsonDict]:
    return [{"name": name, "value": str(value)} for name, value in pairs]


def default_elastic_range(spec: JsonDict, spec_key: str) -> JsonDict | None:
    """setElasticPolicy (PyTorch) / setPaddleElasticPolicy: min and max from each other, else both the
    Worker count. Returns the elasticPolicy (None when the job has none). Here, beside the pass, because
    two kinds share it and a kind's module imports no other kind's."""
    elastic = spec.get("elasticPolicy")
    if not isinstance(elastic, dict):
        return None
    low, high = elastic.get("minReplicas"), elastic.get("maxReplicas")
    if low is None and high is not None:
        elastic["minReplicas"] = high
    elif high is None and low is not None:
        elastic["maxReplicas"] = low
    elif low is None and high is None:
        workers = (spec[spec_key].get("Worker") or {}).get("replicas")
        elastic["minReplicas"] = elastic["maxReplicas"] = workers
    return elastic


def controller_for(pass_type: type[KindPass]) -> type[V1JobController]:
    """The V1JobController subclass that runs `pass_type` (one per kind, started by cluster.py), named
    `{Kind}Controller`."""
    return type(f"{pass_type.jobkind.kind}Controller", (V1JobController,), {"job_pass": pass_type})
