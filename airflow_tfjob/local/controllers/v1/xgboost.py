"""XGBoostJob controller of the local cluster, imitating training-operator v1.9.4 (xgboost/
xgboostjob_controller.go, xgboost.go; xgboost_defaults.go): docs/reference/kubeflow-v1-kinds.md §2.

Defaults are kindpass.py's (restartPolicy Never, port xgboostjob-port 9999). Environment, appended to
every container: MASTER_PORT, MASTER_ADDR, WORLD_SIZE (the replica total), RANK (Master 0, Worker
index + the Master count), PYTHONUNBUFFERED, and with more than one replica WORKER_PORT and WORKER_ADDRS
(one entry per Worker; the operator's comment says they serve LightGBM). Only the Master has the master
role and decides success; a Failed pod fails the job unless its restartPolicy is ExitCode.

Local addresses: MASTER_ADDR is 127.0.0.1 and MASTER_PORT the master's host port. WORKER_ADDRS lists
127.0.0.1 once per Worker (the operator: `{job}-worker-0,...`) and WORKER_PORT is worker 0's host port,
since every replica shares this host: a LightGBM-style job whose workers all listen on WORKER_PORT
cannot run locally beyond one Worker; the XGBoost collective, which meets at the master, can.
"""

from __future__ import annotations

from airflow_tfjob.jobs.kinds import XGBOOSTJOB
from airflow_tfjob.local.controllers.v1.kindpass import LOCAL_ADDRESS, KindPass, controller_for, env
from airflow_tfjob.local.model.resources import JsonDict


class XGBoostJobPass(KindPass):
    jobkind = XGBOOSTJOB

    def is_master_role(self, rtype: str, index: int) -> bool:
        return rtype == "Master"

    def pod_env(self, rt: str, index: int) -> list[JsonDict]:
        self.require("Master", "failed to found the port")
        total = self.total_replicas()
        rank = index + self.count("Master") if rt == "worker" else index
        out = env(
            ("MASTER_PORT", self.host_port("Master", 0)),
            ("MASTER_ADDR", LOCAL_ADDRESS),
            ("WORLD_SIZE", total),
            ("RANK", rank),
            ("PYTHONUNBUFFERED", "1"),
        )
        if total > 1:
            self.require("Worker", "failed to found the port")
            out += env(
                ("WORKER_PORT", self.host_port("Worker", 0)),
                ("WORKER_ADDRS", ",".join(LOCAL_ADDRESS for _ in range(total - 1))),
            )
        return out


XGBoostJobController = controller_for(XGBoostJobPass)
