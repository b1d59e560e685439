"""JAXJob controller of the local cluster, imitating training-operator v1.9.4 (jax/jaxjob_controller.go,
envvar.go; jax_defaults.go): docs/reference/kubeflow-v1-kinds.md §3.

Defaults are kindpass.py's (Worker only, restartPolicy Never, port jaxjob-port 6666). Environment,
appended to every container: PYTHONUNBUFFERED, COORDINATOR_PORT, COORDINATOR_ADDRESS (a host, no
port), NUM_PROCESSES (the replica total) and PROCESS_ID (the index). Worker 0 has the master role; all
Workers must succeed; a failure restarts unless restartPolicy is Never. The reconciler, unlike the
other kinds', does not skip a job whose runPolicy.managedBy names another controller (§3.4).

Local addresses: COORDINATOR_ADDRESS is 127.0.0.1 and COORDINATOR_PORT worker 0's host port (the
operator: `{job}-worker-0` and 6666), so `jax.distributed.initialize(f"{addr}:{port}", ...)` works.
"""

from __future__ import annotations

from airflow_tfjob.jobs.kinds import JAXJOB
from airflow_tfjob.local.controllers.v1.kindpass import LOCAL_ADDRESS, KindPass, controller_for, env
from airflow_tfjob.local.model.resources import JsonDict


class JAXJobPass(KindPass):
    jobkind = JAXJOB
    honours_managed_by = False

    def is_master_role(self, rtype: str, index: int) -> bool:
        return index == 0

    def pod_env(self, rt: str, index: int) -> list[JsonDict]:
        self.require("Worker", "default container port is not exposed")
        return env(
            ("PYTHONUNBUFFERED", "1"),
            ("COORDINATOR_PORT", self.host_port("Worker", 0)),
            ("COORDINATOR_ADDRESS", LOCAL_ADDRESS),
            ("NUM_PROCESSES", self.total_replicas()),
            ("PROCESS_ID", index),
        )


JAXJobController = controller_for(JAXJobPass)
