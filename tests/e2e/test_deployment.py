"""The digits example (deferrable) in a real Airflow deployment, as a person meets it.

Run 1: triggered through the REST API v2; while the task is deferred, its links (TensorBoard, a "Logs"
link per replica) are served by the links endpoint and both workers' lines arrive in the task log read
through the API; the task's log view in headless Chromium shows those lines and the TensorBoard link
(screenshots: build/e2e/log-view.png and links.png, printed by `make e2e`). Run 2: links read while deferred again,
then the task is marked failed through the API while the triggerer is stopped (so before any
triggerer has started its trigger); its TFJob, pods and replica processes are gone within 10 s.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from deployment import REPO, Deployment, StepTimeout, deployment

pytestmark = [pytest.mark.e2e, pytest.mark.tensorflow, pytest.mark.timeout(420)]

DAG_ID = "example_tfjob_digits"
TASK = "train"
ARTIFACTS = REPO / "build" / "e2e"
SCREENSHOT = ARTIFACTS / "log-view.png"
LINKS_SCREENSHOT = ARTIFACTS / "links.png"
CHROMIUM = os.environ.get("TFJOB_E2E_CHROMIUM", "/usr/bin/chromium")
REPLICAS = ("worker-0", "worker-1")


@pytest.fixture(scope="module")
def airflow() -> Iterator[Deployment]:
    home = Path(tempfile.mkdtemp(prefix="tfjob-e2e-"))
    shutil.rmtree(ARTIFACTS, ignore_errors=True)
    env = {
        # The example's train task defers to the triggerer, as the test is about.
        "AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE": "True",
        "TFJOB_EXAMPLES_DATA_DIR": str(home / "data"),
        "TFJOB_EXAMPLES_TENSORBOARD": "1",
        "TF_CPP_MIN_LOG_LEVEL": "2",
    }
    try:
        with deployment(home, ARTIFACTS / "logs", REPO / "example_dags", env) as running:
            yield running
    finally:
        shutil.rmtree(home, ignore_errors=True)


def ti_path(run_id: str) -> str:
    return f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances/{TASK}"


def trigger(airflow: Deployment, epochs: int) -> str:
    run = airflow.call("POST", f"/dags/{DAG_ID}/dagRuns", json={"logical_date": None, "conf": {"epochs": epochs}})
    return str(run["dag_run_id"])


def ti_state(airflow: Deployment, run_id: str) -> str | None:
    response = airflow.api.get(ti_path(run_id))
    return response.json().get("state") if response.status_code == 200 else None


def links(airflow: Deployment, run_id: str) -> dict[str, str | None]:
    return dict(airflow.call("GET", ti_path(run_id) + "/links")["extra_links"])


def log_text(airflow: Deployment, run_id: str) -> str:
    response = airflow.api.get(ti_path(run_id) + "/logs/1", params={"full_content": True},
                               headers={"Accept": "application/json"})
    if response.status_code != 200:
        return ""
    content = response.json().get("content") or []
    return "\n".join(str(x.get("event", "")) if isinstance(x, dict) else str(x) for x in content)


def wait_deferred_with_links(airflow: Deployment, run_id: str) -> dict[str, str | None]:
    """The links as the API serves them once the task is deferred and every link has its URL."""
    def ready() -> dict[str, str | None] | None:
        if ti_state(airflow, run_id) != "deferred":
            return None
        served = links(airflow, run_id)
        return served if served and all(served.values()) else None

    served = airflow.wait("the deferred task's links", ready, 90)
    assert set(served) == {"TensorBoard", *(f"Logs {r}" for r in REPLICAS)}, served
    return served


def test_digits_in_a_deployment(airflow: Deployment) -> None:
    started = time.monotonic()
    airflow.wait("the digits DAG parsed", lambda: airflow.api.get(f"/dags/{DAG_ID}").status_code == 200, 90)
    airflow.call("PATCH", f"/dags/{DAG_ID}", json={"is_paused": False})

    # ---- run 1: links and live replica logs while the task is deferred, then the log view in a browser
    first = trigger(airflow, epochs=6)
    served = wait_deferred_with_links(airflow, first)
    assert served["TensorBoard"].startswith("http://"), served  # type: ignore[union-attr]

    wait_live_lines(airflow, first)
    # The task's TensorBoard link lasts while the task runs (its board goes with it). A loaded machine
    # once took longer to bring the page up than the job took to finish six epochs, so the replicas
    # are stopped (SIGSTOP) while the browser reads the page, and go on afterwards.
    with paused(served):
        assert ti_state(airflow, first) == "deferred", "run 1 ended before its page could be read"
        log_view(airflow, first, served)
    print(f"e2e: run 1 checked after {time.monotonic() - started:.0f} s")

    # ---- run 2: links while deferred, then mark-failed stops the job, its pods and replica processes.
    # The triggerer is stopped throughout, so the mark lands before any triggerer has
    # started run 2's trigger: Airflow then runs no code of the task nor of the trigger, and only the
    # provider's listener in the API server (airflow_tfjob.plugins.kill_listener) can stop the job.
    known = {job["metadata"]["name"] for job in tfjobs(airflow)}
    with airflow.stopped("triggerer"):
        second = trigger(airflow, epochs=50)
        wait_deferred_with_links(airflow, second)
        job = airflow.wait("run 2's TFJob", lambda: next((j for j in tfjobs(airflow) if j["metadata"]["name"] not in known), None), 30)
        name = job["metadata"]["name"]
        pods = airflow.wait("run 2's replica and TensorBoard processes", lambda: replica_pids(airflow, name), 60)
        airflow.call("PATCH", ti_path(second), json={"new_state": "failed"})
        marked = time.monotonic()
        airflow.wait(f"TFJob {name}, its pods and processes gone", lambda: gone(airflow, name, pods), 10)
        print(f"e2e: run 2's job gone {time.monotonic() - marked:.1f} s after mark-failed")
    airflow.wait("run 1 succeeded", lambda: run_state(airflow, first) in ("success", "failed"), 120)
    assert run_state(airflow, first) == "success", airflow.log_tails()
    print(f"e2e: wall time {time.monotonic() - started:.0f} s; screenshot {SCREENSHOT}")


def wait_live_lines(airflow: Deployment, run_id: str) -> None:
    """Both workers' lines in the task log read through the API while the task is deferred (they come
    from the trigger following the job)."""
    def live_lines() -> bool:
        text = log_text(airflow, run_id)
        return all(f"[{r}]" in text for r in REPLICAS) and ti_state(airflow, run_id) == "deferred"

    airflow.wait("[worker-0] and [worker-1] lines in the deferred task's log", live_lines, 120)


@contextmanager
def paused(served: dict[str, str | None]) -> Iterator[None]:
    """The processes of the replicas whose "Logs" links ``served`` lists, stopped until the block ends."""
    pods = [str(url).split("/pods/", 1)[1].split("/", 1)[0] for name, url in served.items() if name.startswith("Logs ")]
    pids = [pid for pod in pods for pid in _processes_with(f"HOSTNAME={pod}")]
    assert len(pods) == len(REPLICAS) and pids, (pods, pids)
    try:
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        yield
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


def run_state(airflow: Deployment, run_id: str) -> str:
    return str(airflow.call("GET", f"/dags/{DAG_ID}/dagRuns/{run_id}")["state"])


def log_view(airflow: Deployment, run_id: str, served: dict[str, str | None]) -> None:
    """The task's page in headless Chromium: both replicas' lines in its log view; its links (Airflow
    3.3's UI lists them in the Details tab), the TensorBoard URL among them."""
    from playwright.sync_api import expect, sync_playwright

    page_url = f"{airflow.url}/dags/{DAG_ID}/runs/{quote(run_id, safe='')}/tasks/{TASK}"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        shot = SCREENSHOT
        try:
            # The all-admins login sets the UI's token cookie and comes back to the task's page.
            page.goto(f"{airflow.url}/auth/token/login?next={quote(page_url, safe='')}")
            for replica in REPLICAS:
                expect(page.get_by_text(f"[{replica}]").first).to_be_visible(timeout=60_000)
            page.screenshot(path=str(SCREENSHOT))
            shot = LINKS_SCREENSHOT
            page.get_by_role("link", name="Details", exact=True).click()
            for name, url in served.items():
                link = page.get_by_role("link", name=name, exact=True)
                expect(link).to_be_visible(timeout=30_000)
                assert link.get_attribute("href") == url, (name, url)
            page.screenshot(path=str(LINKS_SCREENSHOT), full_page=True)
        except Exception as error:
            page.screenshot(path=str(shot), full_page=True)
            raise StepTimeout(f"the task's page ({shot}): {error}\n{airflow.log_tails()}") from error
        finally:
            browser.close()


# ---------------------------------------------------------------------- the cluster, read directly


def _clients(airflow: Deployment) -> tuple[Any, Any]:
    from kubernetes import client, config

    api = config.new_client_from_config(str(airflow.kubeconfig))
    return client.CustomObjectsApi(api), client.CoreV1Api(api)


def tfjobs(airflow: Deployment) -> list[dict[str, Any]]:
    custom, _ = _clients(airflow)
    return list(custom.list_namespaced_custom_object("kubeflow.org", "v1", "default", "tfjobs")["items"])


def pod_names(airflow: Deployment, job: str) -> list[str]:
    """The job's pods: its replicas and its TensorBoard (all named after the job)."""
    _, core = _clients(airflow)
    return [pod.metadata.name for pod in core.list_namespaced_pod("default").items
            if pod.metadata.name.startswith(f"{job}-")]


def replica_pids(airflow: Deployment, job: str) -> dict[str, list[int]]:
    """The processes running each pod of `job` (the local cluster sets HOSTNAME to the pod's name);
    empty until both replicas and the board have theirs."""
    found = {name: _processes_with(f"HOSTNAME={name}") for name in pod_names(airflow, job)}
    return found if len(found) == len(REPLICAS) + 1 and all(found.values()) else {}


def gone(airflow: Deployment, job: str, pids: dict[str, list[int]]) -> bool:
    if any(j["metadata"]["name"] == job for j in tfjobs(airflow)) or pod_names(airflow, job):
        return False
    return not any(_alive(pid) for pid_list in pids.values() for pid in pid_list)


def _processes_with(entry: str) -> list[int]:
    wanted = entry.encode()
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                if wanted in (proc / "environ").read_bytes().split(b"\0"):
                    pids.append(int(proc.name))
            except OSError:
                continue
    return pids


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
