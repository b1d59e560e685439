"""An Airflow deployment in production shape, on this machine: PostgreSQL (Debian's server, the metadata
database), Redis (Debian's server, Celery's broker), an S3-compatible object store (moto's server mode)
holding the task logs (or, ``remote_logs=False``, no object store: task logs stay in the files the
worker and the triggerers write, which the API server reads, as on a shared volume), the local cluster, and `airflow api-server`, `scheduler`, `dag-processor`,
`celery worker` and TWO `airflow triggerer` processes. Each runs in a process group (a session) of
its own on 127.0.0.1 with its own ports and folders, and :meth:`Deployment.stop` ends them all,
whatever the test's outcome.

The two triggerers name themselves "localhost" and "127.0.0.1" (``[core] hostname_callable``, see
deployment_hostname.py): both resolve to this machine, and the test tells their jobs apart by them.
``scripts/services.sh`` installs Debian's packages where they are missing (`make test` runs it).
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from deployment import VENV_BIN, Deployment, free_port

import airflow_tfjob

PACKAGE = Path(airflow_tfjob.__file__).parent

E2E = Path(__file__).resolve().parent
BUCKET = "airflow-task-logs"
#: The triggerers' names (their jobs' hostname column) and log-server ports.
TRIGGERERS = {"triggerer-a": "localhost", "triggerer-b": "127.0.0.1"}
#: ``[triggerer] triggerer_health_check_threshold``: a triggerer whose heartbeat is older than this is
#: dead, and another takes its triggers (short, so that the failover is measured in seconds). Not
#: shorter: on a loaded machine a live triggerer's heartbeat came 6 s late, its triggers moved to the
#: other one and back, and Airflow 3.3.2 cancels a trigger that moved away as if a user had killed its
#: task (TriggerRunnerSupervisor.update_triggers: on_kill runs), which deletes the job.
HEALTH_CHECK_THRESHOLD = 15


def postgres_bin() -> Path:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/postgres"))
    assert found, "Debian's PostgreSQL is not installed: run scripts/services.sh"
    return Path(found[-1]).parent


def _as_postgres() -> list[str]:
    """PostgreSQL refuses to run as root: as root, its processes run as Debian's `postgres` user."""
    return ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []


class ProductionDeployment(Deployment):
    """The running services and components (see the module's docstring)."""

    # In production the triggerers run on machines (pods) of their own. Here two cores serve them
    # beside the Celery worker's task processes, the cluster's replicas and the DAG processor, which
    # at the sweep's start want every core at once; those run at a lower priority, so that a triggerer
    # loop ready to run gets a core as it would on its own node, and Airflow's watchdog measures the
    # loop, not this machine's run queue. The triggerers, scheduler, API server and services keep
    # the default priority.
    NICE = {"celery-worker": 10, "tfjob-local": 10, "dag-processor": 10}

    def __init__(self, home: Path, logs: Path, remote_logs: bool = True) -> None:
        super().__init__(home, logs)
        self.remote_logs = remote_logs
        self.pg_port = free_port()
        self.redis_port = free_port()
        self.s3_port = free_port()
        self.pg_dir = Path(tempfile.mkdtemp(prefix="tfjob-e2e-pg-"))
        self.db_url = f"postgresql+psycopg2://postgres@127.0.0.1:{self.pg_port}/airflow"
        self.release = home / "release-sweep"

    # ------------------------------------------------------------------ services

    def start_services(self) -> None:
        self._start_postgres()
        redis = self._start("redis", ["redis-server", "--port", str(self.redis_port), "--bind", "127.0.0.1",
                                      "--save", "", "--appendonly", "no", "--dir", str(self.home)])
        self.wait("Redis", lambda: _answers(["redis-cli", "-p", str(self.redis_port), "ping"], "PONG"), 30, redis)
        if self.remote_logs:
            moto = self._start("s3", [str(VENV_BIN / "moto_server"), "-H", "127.0.0.1", "-p", str(self.s3_port)])
            self.wait("the S3 endpoint", self._bucket_created, 60, moto)
        self.wait("PostgreSQL", self._database_created, 60, self.processes["postgres"])

    def _start_postgres(self) -> None:
        bin_dir, data = postgres_bin(), self.pg_dir / "data"
        if os.geteuid() == 0:
            shutil.chown(self.pg_dir, "postgres", "postgres")
        # Trust over 127.0.0.1 and a socket in its own folder; no fsync: the database lives for one test.
        subprocess.run([*_as_postgres(), str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres",
                        "--auth=trust", "--no-sync", "-E", "UTF8"], check=True, capture_output=True, timeout=120)
        self._start("postgres", [*_as_postgres(), str(bin_dir / "postgres"), "-D", str(data),
                                 "-p", str(self.pg_port), "-k", str(self.pg_dir),
                                 "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off",
                                 "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
                                 "-c", "max_connections=300"])

    def _database_created(self) -> bool:
        import psycopg2

        try:
            conn = psycopg2.connect(host="127.0.0.1", port=self.pg_port, user="postgres", dbname="postgres",
                                    connect_timeout=2)
        except psycopg2.OperationalError:
            return False
        conn.autocommit = True  # CREATE DATABASE runs outside a transaction
        try:
            with conn.cursor() as cur:
                cur.execute("SELECT 1 FROM pg_database WHERE datname = 'airflow'")
                if cur.fetchone() is None:
                    cur.execute("CREATE DATABASE airflow")
        finally:
            conn.close()
        return True

    def _bucket_created(self) -> bool:
        import boto3
        import botocore.exceptions

        try:
            self.s3().create_bucket(Bucket=BUCKET)
        except (botocore.exceptions.EndpointConnectionError, botocore.exceptions.ConnectionClosedError):
            return False
        except self.s3().exceptions.BucketAlreadyOwnedByYou:
            pass
        del boto3
        return True

    def s3(self) -> Any:
        import boto3

        return boto3.client("s3", endpoint_url=f"http://127.0.0.1:{self.s3_port}", region_name="us-east-1",
                            aws_access_key_id="testing", aws_secret_access_key="testing")

    def sql(self, query: str, *args: Any) -> list[tuple[Any, ...]]:
        """Rows of a query on Airflow's database (the test reads the trigger and job tables)."""
        import psycopg2

        conn = psycopg2.connect(host="127.0.0.1", port=self.pg_port, user="postgres", dbname="airflow")
        try:
            with conn, conn.cursor() as cur:
                cur.execute(query, args)
                return list(cur.fetchall())
        finally:
            conn.close()

    # ------------------------------------------------------------------ Airflow

    def start_production_airflow(self, dags_folder: Path) -> None:
        # As installed (pip compiles a wheel's bytecode): a fresh checkout's first import would compile the
        # provider's modules on a triggerer's loop, a cost of the checkout, not of a deployment.
        subprocess.run([str(VENV_BIN / "python"), "-m", "compileall", "-q", str(PACKAGE)], check=True)
        extra = {"kube_config_path": str(self.kubeconfig), "namespace": "default"}
        self.env = {
            **os.environ,
            "AIRFLOW_HOME": str(self.home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags_folder),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
            "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": self.db_url,
            "AIRFLOW__CELERY__BROKER_URL": f"redis://127.0.0.1:{self.redis_port}/0",
            "AIRFLOW__CELERY__RESULT_BACKEND": f"db+postgresql+psycopg2://postgres@127.0.0.1:{self.pg_port}/airflow",
            "AIRFLOW__CELERY__WORKER_CONCURRENCY": "8",
            "AIRFLOW__CORE__PARALLELISM": "16",
            "AIRFLOW__CORE__HOSTNAME_CALLABLE": "deployment_hostname.hostname",
            "PYTHONPATH": os.pathsep.join(filter(None, [str(E2E), os.environ.get("PYTHONPATH")])),
            **self.api_server_env(),
            # A busy machine answers slowly: the task processes wait for the API server rather than fail.
            "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "60",
            "AIRFLOW__WORKERS__EXECUTION_API_RETRIES": "10",
            # The sweep's replicas count lines until the test creates this file.
            "TFJOB_E2E_RELEASE": str(self.release),
            "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "1",
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": "30",
            "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "1",
            "AIRFLOW__TRIGGERER__TRIGGERER_HEALTH_CHECK_THRESHOLD": str(HEALTH_CHECK_THRESHOLD),
            # Every stall of a triggerer's loop over half a second is logged (the test reads them).
            "AIRFLOW__TRIGGERER__BLOCKED_MAIN_THREAD_WARNING_THRESHOLD": "0.5",
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
            **self._task_log_env(),
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
            "AIRFLOW_CONN_KUBERNETES_DEFAULT": json.dumps({"conn_type": "kubernetes", "extra": extra}),
            "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        }
        airflow = str(VENV_BIN / "airflow")
        migrated = subprocess.run([airflow, "db", "migrate"], env=self.env, capture_output=True, text=True,
                                  timeout=300)
        assert migrated.returncode == 0, f"airflow db migrate:\n{migrated.stdout[-3000:]}\n{migrated.stderr[-5000:]}"
        for name in ("api-server", "scheduler", "dag-processor"):
            self._start(name, [airflow, name])
        self._start("celery-worker", [airflow, "celery", "worker"])
        for name, hostname in TRIGGERERS.items():
            self._start(name, [airflow, "triggerer"], env={
                "TFJOB_E2E_HOSTNAME": hostname,
                "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
            })
        self.wait("the API server", self._api_ready, 120, self.processes["api-server"])

    def _task_log_env(self) -> dict[str, str]:
        """Where task logs go: the S3 endpoint (uploaded when a task, or a trigger in its triggerer, ends),
        or (``remote_logs`` False) nowhere but the local files."""
        if not self.remote_logs:
            return {"AIRFLOW__LOGGING__REMOTE_LOGGING": "False"}
        s3 = {"endpoint_url": f"http://127.0.0.1:{self.s3_port}", "region_name": "us-east-1"}
        return {
            "AIRFLOW__LOGGING__REMOTE_LOGGING": "True",
            "AIRFLOW__LOGGING__REMOTE_BASE_LOG_FOLDER": f"s3://{BUCKET}/logs",
            "AIRFLOW__LOGGING__REMOTE_LOG_CONN_ID": "task_logs_s3",
            "AIRFLOW_CONN_TASK_LOGS_S3": json.dumps({"conn_type": "aws", "login": "testing",
                                                     "password": "testing", "extra": s3}),
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_DEFAULT_REGION": "us-east-1",
        }

    def triggerer_jobs(self) -> dict[str, int]:
        """The running triggerers' job ids, by process name."""
        by_host = {host: name for name, host in TRIGGERERS.items()}
        rows = self.sql("SELECT hostname, max(id) FROM job WHERE job_type = 'TriggererJob' "
                        "AND state = 'running' GROUP BY hostname")
        return {by_host[host]: int(job) for host, job in rows if host in by_host}

    def stop(self) -> None:
        try:
            super().stop()
        finally:
            shutil.rmtree(self.pg_dir, ignore_errors=True)


def _answers(argv: list[str], expected: str) -> bool:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.stdout.strip() == expected


@contextmanager
def production_deployment(home: Path, logs: Path, dags_folder: Path,
                          remote_logs: bool = True) -> Iterator[ProductionDeployment]:
    logs.mkdir(parents=True, exist_ok=True)
    running = ProductionDeployment(home, logs, remote_logs)
    try:
        running.start_services()
        running.start_cluster()
        running.start_production_airflow(dags_folder)
        yield running
    finally:
        running.stop()
