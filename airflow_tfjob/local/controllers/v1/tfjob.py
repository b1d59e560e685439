"""TFJob controller of the local cluster, imitating training-operator v1.9.4 (its tfjob_controller.go): a
KindPass over the TFJOB row of airflow_tfjob/jobs/kinds.py like every other kind, whose row gives the names,
the defaults (SetDefaults_TFJob; this module adds successPolicy "") and UpdateJobStatus (kindstatus.py, by
the row's SUCCESS_TF/FAILURE_TF rules). This module adds what the row does not say: TF_CONFIG, into the
`tensorflow` container only, and the master role.

Reasons and events are the operator's (`TFJobCreated`, `TFJobRunning`, ..., component
`tfjob-controller`); UpdateJobStatus follows tfjob_controller.go: with a Chief/Master its completion decides,
otherwise the Workers' (all of them, or worker 0 unless successPolicy is AllWorkers).

Deliberate differences from a real cluster, all visible to users:

* Addresses. The operator writes `{job}-{type}-{i}.{ns}.svc:{port}` into TF_CONFIG. Every replica of the
  local cluster runs on this host and there is no cluster DNS, so each (job, type, index) gets its own
  127.0.0.1 port from `port_allocator` and TF_CONFIG says `127.0.0.1:{port}` instead; the rest of
  TF_CONFIG is byte for byte the operator's. The port is recorded in the annotation
  `local.tfjob.dev/host-port` on the replica's Pod and Service, and as the `targetPort` of the Service's
  `tfjob-port` (the Service's `port` stays the declared containerPort, 2222 by default). A replica keeps
  its port when its pod is recreated (ExitCode restarts). TF servers listen on the port of their own
  TF_CONFIG address, so replicas need nothing else.
* activeDeadlineSeconds fires on time: the operator only notices the deadline when some other event
  triggers a reconcile (kubeflow/trainer#3358); here a timer reconciles the job at the deadline.
* Reconcile errors (for example a Service name longer than 63 characters, kubeflow/trainer#1101) are
  retried with an exponential backoff from 0.5 s up to 60 s, shorter than controller-runtime's 1000 s cap,
  so the repeated FailedCreateService warnings stay few (they are aggregated into one Event's count).
* On backoffLimit/deadline failure the Failed condition is set before cleanup, as v1.9.4 does
  (training-operator PR #3420): cleanPodPolicy is respected, so with the default `None` the pods keep running.
"""

from __future__ import annotations

from airflow_tfjob.jobs.kinds import TFJOB
from airflow_tfjob.local.controllers.v1.kindpass import KindPass, controller_for
from airflow_tfjob.local.controllers.v1.tfconfig import tf_config
from airflow_tfjob.local.model.resources import JsonDict


class TFJobPass(KindPass):
    """One reconcile pass over a TFJob."""

    jobkind = TFJOB

    def extra_defaults(self, spec: JsonDict) -> None:
        if spec.get("successPolicy") is None:
            spec["successPolicy"] = ""

    def is_master_role(self, rtype: str, index: int) -> bool:
        if "Chief" in self.replicas or "Master" in self.replicas:
            return rtype in ("Chief", "Master")
        return rtype == "Worker" and index == 0

    def pod_env(self, rt: str, index: int) -> list[JsonDict]:
        """TF_CONFIG with each peer at its own host port; none for a job that is not distributed."""
        counts = {t.lower(): self.count(t) for t in self.replicas}

        def address(other_rt: str, other_index: int) -> str:
            return f"127.0.0.1:{self.ports.port(self.uid, other_rt, other_index)}"

        value = tf_config(counts, rt, index, address, dynamic_worker=self.spec.get("enableDynamicWorker") is True)
        return [] if value is None else [{"name": "TF_CONFIG", "value": value}]

    def env_targets(self, pod_spec: JsonDict) -> list[JsonDict]:
        """The first container named `tensorflow`: the operator's SetClusterSpec sets TF_CONFIG there only."""
        containers = pod_spec.get("containers") or []
        return [c for c in containers if c.get("name") == self.jobkind.container][:1]


TFJobController = controller_for(TFJobPass)
