"""Careless and hostile input to the secrets, Kueue parameters, sweeps and lineage: each refused before any
request, naming the parameter and the fix, and never quoting a secret it carries.

Every operator case runs as a task would (rendered, then executed with ``render_only``) with the connection
pointing at a RequestCounter, so a refusal that costs a request is counted as one. Every case that can carry a
secret carries ``SECRET`` as a ``secret_env`` value too, so the masker knows it and the judge looks for it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from badinput_support import Case, FigureLine, Judgement, RequestCounter, TaskInstance, judge, task_context

from airflow_tfjob.build.checker import JobValidationError
from airflow_tfjob.integrations.sweeps import RankTrialsError, rank_trials

SURFACE = "secrets-kueue-sweeps-lineage"
SECRET = "s3cr3t-Tok3n-planted-24b"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"


def _run(op: Any) -> Any:
    context = task_context()
    op.render_template_fields(context)
    return op.execute(context)


def tfjob(**kwargs: Any) -> Callable[[], Any]:
    def call() -> Any:
        from airflow_tfjob.operators.tfjob import TFJobOperator

        given = {"image": "img:1", "worker": 1, "render_only": True, **kwargs}
        return _run(TFJobOperator(task_id="train", **given))

    return call


def trainjob(**kwargs: Any) -> Callable[[], Any]:
    def call() -> Any:
        from airflow_tfjob.operators.trainjob import TrainJobOperator

        given = {"runtime": "torch-distributed", "image": "img:1", "render_only": True, **kwargs}
        return _run(TrainJobOperator(task_id="train", **given))

    return call


def _patch(**container: Any) -> list[dict[str, Any]]:
    """One runtime patch (Trainer's RuntimePatch: manager, trainingRuntimeSpec) setting the node container."""
    # A sidecar: the webhook refuses env set on the trainer container (node) through a patch.
    pod = {"spec": {"containers": [{"name": "sidecar", **container}]}}
    job = {"name": "node", "template": {"spec": {"template": pod}}}
    return [
        {
            "manager": "example.com/sweeper",
            "trainingRuntimeSpec": {"template": {"spec": {"replicatedJobs": [job]}}},
        }
    ]


S = {"secret_env": {"API_TOKEN": SECRET}}
NAN, INF = math.nan, math.inf
LINEAGE_FIX = "s3://models/digits"
QUEUE_FIX = "lowercase"

CASES: list[Case] = []


def case(id: str, call: Callable[[], Any], field: str, fix: str, secret: str | None = None) -> None:
    CASES.append(Case(id, call, field, fix, secret))


# --------------------------------------------------------------------------- secrets
case("tj-secret-env-name-space", trainjob(secret_env={"BAD NAME": SECRET}), "BAD NAME", "letters", SECRET)
case("tj-secret-env-name-equals", trainjob(secret_env={"A=B": SECRET}), "A=B", "letters", SECRET)
case("tj-secret-env-name-empty", trainjob(secret_env={"": SECRET}), "secret_env", "letters", SECRET)
case("tf-secret-env-name-space", tfjob(secret_env={"BAD NAME": SECRET}), "BAD NAME", "letters", SECRET)
case(
    "tj-secret-env-value-list",
    trainjob(secret_env={"TOK": [SECRET]}),
    "secret_env.TOK",
    "secret_env={",
    SECRET,
)
case(
    "tf-secret-env-value-dict",
    tfjob(secret_env={"TOK": {"v": SECRET}}),
    "secret_env.TOK",
    "secret_env={",
    SECRET,
)
case("tj-secret-env-as-text", trainjob(secret_env=f"TOK={SECRET}"), "secret_env", "secret_env={", SECRET)
case("tf-secret-env-as-text", tfjob(secret_env=f"TOK={SECRET}"), "secret_env", "secret_env={", SECRET)
case("tj-secret-in-env-nested", trainjob(**S, env={"B": [SECRET]}), "env.B", "env={", SECRET)
case("tf-secret-in-env-nested", tfjob(**S, env={"B": {SECRET}}), "env.B", "env={", SECRET)
case(
    "tj-secret-in-patch-manager-type",
    trainjob(**S, runtime_patches=[{**_patch(env=[{"name": "X", "value": SECRET}])[0], "manager": 5}]),
    "manager",
    "manager",
    SECRET,
)
case(
    "tj-secret-in-patches-as-text",
    trainjob(**S, runtime_patches=f"env={SECRET}"),
    "runtime_patches",
    "[",
    SECRET,
)
case(
    "tf-secret-in-placement-type",
    tfjob(**S, replica_placement={"Worker": SECRET}),
    "replica_placement",
    "replica_placement={",
    SECRET,
)
case(
    "tf-secret-in-node-selector-list",
    tfjob(**S, node_selector=[SECRET]),
    "node_selector",
    "node_selector={",
    SECRET,
)
case("tf-secret-in-labels-value", tfjob(**S, labels={"team": f"{SECRET} x"}), "labels", "63", SECRET)
case("tj-secret-in-labels-value", trainjob(**S, labels={"team": f"{SECRET} x"}), "labels", "63", SECRET)
case(
    "tf-secret-in-hyperparameters-nan",
    tfjob(**S, hyperparameters={SECRET: NAN}),
    "hyperparameters",
    "{",
    SECRET,
)
case(
    "tf-secret-cut-short-in-args",
    tfjob(**S, args=[{"deep": [{"deeper": [SECRET * 3]}]}]),
    "args[0]",
    "args=[",
    SECRET,
)
case("tf-secret-as-image", tfjob(**S, image=f"img:{SECRET} x"), "image", "image", SECRET)

# --------------------------------------------------------------------------- Kueue parameters
for name, make in (("tf", tfjob), ("tj", trainjob)):
    for bad in (NAN, INF, -INF):
        case(f"{name}-queue-timeout-{bad}", make(**S, queue_timeout=bad), "queue_timeout", "finite", SECRET)
    for bad in (NAN, INF):
        case(
            f"{name}-workload-window-{bad}",
            make(**S, kueue_workload_window=bad),
            "kueue_workload_window",
            "finite",
            SECRET,
        )
    case(
        f"{name}-multikueue-connections-list",
        make(**S, multikueue_connections=["k8s_worker1"]),
        "multikueue_connections",
        "{'worker1': 'k8s_worker1'}",
        SECRET,
    )
    case(
        f"{name}-multikueue-connections-empty-worker",
        make(**S, multikueue_connections={"": "k8s_worker1"}),
        "multikueue_connections['']",
        "MultiKueueCluster's name",
        SECRET,
    )
    case(
        f"{name}-multikueue-connections-empty-conn",
        make(**S, multikueue_connections={"worker1": " "}),
        "multikueue_connections['worker1']",
        "connection id",
        SECRET,
    )
    case(
        f"{name}-multikueue-connections-none-conn",
        make(**S, multikueue_connections={"worker1": None, "worker2": "k8s"}),
        "multikueue_connections['worker1']",
        "connection id",
        SECRET,
    )
    case(f"{name}-queue-timeout-text", make(**S, queue_timeout="10m"), "queue_timeout", "seconds", SECRET)
    case(f"{name}-queue-timeout-bool", make(**S, queue_timeout=True), "queue_timeout", "seconds", SECRET)
    case(
        f"{name}-workload-window-none",
        make(**S, kueue_workload_window=None),
        "kueue_workload_window",
        "seconds",
    )
    for label, bad in (
        ("upper", "Team_Queue"),
        ("long", "q" * 64),
        ("dash", "-queue"),
        ("dot", "team.queue"),
    ):
        case(f"{name}-queue-name-{label}", make(**S, kueue_queue=bad), "kueue_queue", QUEUE_FIX, SECRET)
    case(
        f"{name}-queue-label-bad",
        make(**S, labels={QUEUE_LABEL: "Team_Queue"}),
        QUEUE_LABEL,
        QUEUE_FIX,
        SECRET,
    )
    case(
        f"{name}-queue-disagrees",
        make(**S, kueue_queue="team-a", labels={QUEUE_LABEL: "team-b"}),
        "kueue_queue",
        QUEUE_LABEL,
        SECRET,
    )
    case(f"{name}-queue-list", make(**S, kueue_queue=["team-a"]), "kueue_queue", "kueue_queue=", SECRET)
    case(f"{name}-on-preemption", make(**S, on_preemption="retry"), "on_preemption", "'wait'", SECRET)
    case(
        f"{name}-require-admission-text",
        make(**S, kueue_require_admission="yes"),
        "kueue_require_admission",
        "True or False",
        SECRET,
    )

# --------------------------------------------------------------------------- lineage
for param, wrap in (
    ("model_asset", lambda v: v),
    ("lineage_inputs", lambda v: [v]),
    ("lineage_outputs", lambda v: [v]),
):
    case(
        f"{param}-reserved-airflow",
        tfjob(**S, **{param: wrap("airflow://models/x")}),
        param,
        LINEAGE_FIX,
        SECRET,
    )
    case(f"{param}-scheme-only", tfjob(**S, **{param: wrap("s3://")}), param, LINEAGE_FIX, SECRET)
    case(f"{param}-number", tfjob(**S, **{param: wrap(5)}), param, LINEAGE_FIX, SECRET)
    case(f"{param}-whitespace", tfjob(**S, **{param: wrap("s3://models/a b")}), param, LINEAGE_FIX, SECRET)
case("lineage-inputs-text", tfjob(**S, lineage_inputs="s3://data/x"), "lineage_inputs", "list", SECRET)
case("lineage-outputs-dict", tfjob(**S, lineage_outputs={"uri": "s3://x"}), "lineage_outputs", "list", SECRET)
case("tj-model-asset-reserved", trainjob(**S, model_asset="airflow://m"), "model_asset", LINEAGE_FIX, SECRET)

# --------------------------------------------------------------------------- sweeps
HP = [{"lr": 0.1}, {"lr": 0.01}]
MET = [{"acc": 0.9, "loss": 0.2}, {"acc": 0.8, "loss": 0.3}]


def rank(*args: Any, **kwargs: Any) -> Callable[[], Any]:
    return lambda: rank_trials(*args, log=lambda line: None, **kwargs)


case("sweep-tie-breakers-text", rank(HP, MET, "acc", tie_breakers="loss"), "tie_breakers", "('loss', 'min')")
case(
    "sweep-tie-breakers-one",
    rank(HP, MET, "acc", tie_breakers=[("loss",)]),
    "tie_breakers",
    "('loss', 'min')",
)
case(
    "sweep-tie-breakers-three",
    rank(HP, MET, "acc", tie_breakers=[("loss", "min", 1)]),
    "tie_breakers",
    "('loss', 'min')",
)
case("sweep-tie-breakers-mode", rank(HP, MET, "acc", tie_breakers=[("loss", "up")]), "tie_breakers", "'min'")
case(
    "sweep-tie-breakers-name",
    rank(HP, MET, "acc", tie_breakers=[(5, "min")]),
    "tie_breakers",
    "('loss', 'min')",
)
case("sweep-tie-breakers-number", rank(HP, MET, "acc", tie_breakers=5), "tie_breakers", "('loss', 'min')")
case("sweep-metrics-text", rank(HP, "acc=0.9", "acc"), "metrics", "output['metrics']")
case("sweep-metrics-number", rank(HP, 5, "acc"), "metrics", "output['metrics']")
case("sweep-metrics-item", rank(HP, [5, {"acc": 1}], "acc"), "metrics", "output['metrics']")
case("sweep-metrics-length", rank(HP, MET[:1], "acc"), "metrics", "output['metrics']")
case("sweep-hyperparameters-text", rank("lr=0.1", MET, "acc"), "hyperparameters", "grid")
case("sweep-hyperparameters-item", rank([5, {"lr": 1}], MET, "acc"), "hyperparameters", "grid")
case("sweep-hyperparameters-none", rank(None, MET, "acc"), "hyperparameters", "grid")
case("sweep-objective-none", rank(HP, MET, None), "objective", "metric")
case("sweep-objective-number", rank(HP, MET, 5), "objective", "metric")
case("sweep-objective-empty", rank(HP, MET, ""), "objective", "metric")
case("sweep-mode", rank(HP, MET, "acc", mode="best"), "mode", "'max'")
case("sweep-all-infinite", rank(HP, [{"acc": INF}, {"acc": -INF}], "acc"), "acc", "finite")
case("sweep-all-nan", rank(HP, [{"acc": NAN}, {"acc": NAN}], "acc"), "acc", "finite")
case("sweep-log", lambda: rank_trials(HP, MET, "acc", log=5), "log", "print")

# --------------------------------------------------------------------------- more of the type table
case(
    "tj-workload-window-text",
    trainjob(**S, kueue_workload_window="30"),
    "kueue_workload_window",
    "seconds",
    SECRET,
)
case("tf-api-retry-timeout-inf", tfjob(**S, api_retry_timeout=INF), "api_retry_timeout", "seconds", SECRET)
case("tj-api-retry-timeout-nan", trainjob(**S, api_retry_timeout=NAN), "api_retry_timeout", "seconds", SECRET)
case("tf-queue-name-empty", tfjob(**S, kueue_queue=""), "kueue_queue", QUEUE_FIX, SECRET)
case("tj-queue-name-space", trainjob(**S, kueue_queue="team a"), "kueue_queue", QUEUE_FIX, SECRET)
case("tj-lineage-inputs-text", trainjob(**S, lineage_inputs="s3://data/x"), "lineage_inputs", "list", SECRET)
case(
    "tj-lineage-outputs-none-item",
    trainjob(**S, lineage_outputs=[None]),
    "lineage_outputs",
    LINEAGE_FIX,
    SECRET,
)
case("sweep-hyperparameters-dict", rank({"lr": [0.1, 0.01]}, MET, "acc"), "hyperparameters", "grid")
case("sweep-metrics-dict", rank(HP, {"acc": 0.9}, "acc"), "metrics", "output['metrics']")
case(
    "sweep-tie-breakers-dict",
    rank(HP, MET, "acc", tie_breakers={"loss": "min"}),
    "tie_breakers",
    "('loss', 'min')",
)

REFUSALS: tuple[type[BaseException], ...] = (JobValidationError, RankTrialsError)


@pytest.fixture(scope="module")
def judged(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Judgement]]:
    directory = tmp_path_factory.mktemp("counter")
    with pytest.MonkeyPatch.context() as mp, RequestCounter(directory) as counter:
        extra = json.dumps({"kube_config_path": str(counter.kubeconfig)})
        mp.setenv("AIRFLOW_CONN_KUBERNETES_DEFAULT", json.dumps({"conn_type": "kubernetes", "extra": extra}))
        line = FigureLine(SURFACE)
        results = {c.id: line.add(judge(c, refusals=REFUSALS, counter=counter)) for c in CASES}
        line.write()
        print(line.line())
        yield results


def test_every_case_is_refused_before_any_request_naming_the_field_and_fix(
    judged: dict[str, Judgement],
) -> None:
    line = FigureLine(SURFACE, list(judged.values()))
    assert len(CASES) >= 50
    assert line.failures() == [], "\n".join(str(f) for f in line.failures())


@pytest.mark.parametrize("case_id", [c.id for c in CASES])
def test_case(judged: dict[str, Judgement], case_id: str) -> None:
    judgement = judged[case_id]
    assert judgement.outcome == "refused" and not judgement.leaked, str(judgement)


# --------------------------------------------------------------------------- rendered fields


def _rendered_fields(op: Any) -> str:
    """What Airflow stores and the UI shows of the task's rendered fields (its own serialization)."""
    from airflow.sdk.execution_time.task_runner import _serialize_rendered_fields

    return json.dumps(_serialize_rendered_fields(op))


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(
            lambda: __import__("airflow_tfjob.operators.trainjob", fromlist=["x"]).TrainJobOperator(
                task_id="train",
                runtime="torch-distributed",
                image="img:1",
                render_only=True,
                secret_env={"API_TOKEN": SECRET},
                runtime_patches=_patch(env=[{"name": "COPY", "value": f"Bearer {SECRET}"}]),
            ),
            id="trainjob-runtime-patches",
        ),
        pytest.param(
            lambda: __import__("airflow_tfjob.operators.tfjob", fromlist=["x"]).TFJobOperator(
                task_id="train",
                image="img:1",
                worker=1,
                render_only=True,
                secret_env={"API_TOKEN": SECRET},
                tfjob={"spec": {"tfReplicaSpecs": {"Worker": {"template": {"spec": {"containers": [
                    {"name": "tensorflow", "args": [f"--token={SECRET}"]}]}}}}}},
                hyperparameters={"a": {"b": {"c": {"d": {"e": [f"x{SECRET}"]}}}}},
                volumes=[{"name": "v", "csi": {"driver": "d", "volumeAttributes": {"token": SECRET}}}],
            ),
            id="tfjob-template-hyperparameters-volumes",
        ),
    ],
)  # fmt: skip
def test_a_secret_repeated_deep_in_a_templated_structure_is_hidden_in_the_rendered_fields(make: Any) -> None:
    op = make()
    ti = TaskInstance()
    context = task_context(ti)
    op.render_template_fields(context)
    shown = _rendered_fields(op)
    assert "***" in shown
    assert SECRET not in shown
    result = op.execute(context)  # the job is built from the values as rendered, secret included
    assert op.secret_env == {"API_TOKEN": SECRET}
    assert SECRET not in json.dumps(result, default=str) + json.dumps(ti.xcoms, default=str)


# --------------------------------------------------------------------------- sweeps: what ranks


def test_an_infinite_objective_is_listed_not_ranked() -> None:
    hp = [{"lr": 1.0}, {"lr": 0.1}, {"lr": 0.01}, {"lr": 0.001}]
    met = [{"acc": INF}, {"acc": 0.7}, {"acc": NAN}, {"acc": -INF}]
    result = rank_trials(hp, met, "acc", log=lambda line: None)
    assert result["best"]["trial"] == 1
    assert result["ranking"] == [1]
    assert [t["trial"] for t in result["trials"]] == [0, 1, 2, 3]  # every trial listed


def test_a_non_finite_tie_breaker_comes_last_among_equals() -> None:
    hp = [{"lr": 1.0}, {"lr": 0.1}, {"lr": 0.01}]
    met = [{"acc": 0.9, "loss": -INF}, {"acc": 0.9, "loss": NAN}, {"acc": 0.9, "loss": 0.3}]
    result = rank_trials(hp, met, "acc", tie_breakers=[("loss", "min")], log=lambda line: None)
    assert result["ranking"] == [2, 0, 1]


def test_a_none_objective_is_told_to_name_a_metric_not_to_read_logs() -> None:
    with pytest.raises(RankTrialsError) as caught:
        rank_trials(HP, MET, None, log=lambda line: None)  # type: ignore[arg-type]
    assert "objective" in str(caught.value) and "logs" not in str(caught.value)
