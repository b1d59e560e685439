"""Move a README that still holds the user guide ("## User guide", ### sections) into the site's pages.

    python scripts/readme_to_docs.py [README]    (default: README.md; run from the repository root)

Writes docs/<page>.md for each section (headings two levels up, links between sections rewritten to
the pages, links to repository files turned into code), and README.md as its head (title, overview,
quick start) plus a pointer to the site. It did the move once; it is kept for merging a branch that
edited the README's user guide before the move (a new ### section must first be given a page in
PAGES, and a new page a place in mkdocs.yml's nav):

    base=$(git merge-base HEAD BRANCH); moved=<the last commit before the move>
    git merge-file -p <(git show BRANCH:README.md) <(git show $base:README.md) \
        <(git show $moved:README.md) > /tmp/README.full.md
    python scripts/readme_to_docs.py /tmp/README.full.md && make docs && git diff docs README.md
"""

from __future__ import annotations

import posixpath
import re
import sys
from pathlib import Path

ROOT = Path.cwd()
SOURCE = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "README.md"
readme = SOURCE.read_text()
# section title (### level) -> page
PAGES = {
    "Installation": "installation.md",
    "The Kubernetes connection": "connection.md",
    "Pointing at a real cluster": "connection.md",
    "A first DAG": "howto/first-dag.md",
    "TFJobOperator": "howto/tfjob-operator.md",
    "PyTorchJob, XGBoostJob, JAXJob and PaddleJob operators": "howto/other-kinds.md",
    "@task.tfjob: a Python function as the training program": "howto/taskflow.md",
    "Retries and reattachment": "howto/retries.md",
    "Reliability": "howto/retries.md",
    "Validation": "howto/validation.md",
    "TFJobSensor": "howto/sensors.md",
    "Hooks": "howto/hooks-triggers.md",
    "Triggers": "howto/hooks-triggers.md",
    "The example DAGs": "howto/examples.md",
    "The local cluster": "local-cluster-usage.md",
    "Security": "security.md",
    "Troubleshooting": "troubleshooting.md",
    "Performance": "performance.md",
    "Development": "development.md",
    "Lineage: Assets and OpenLineage": "howto/lineage.md",
}
TITLES = {
    "connection.md": "The Kubernetes connection",
    "howto/retries.md": "Retries, reattachment and reliability",
    "howto/hooks-triggers.md": "Hooks and triggers",
    "local-cluster-usage.md": "Running on the local cluster",
}
EXTRA = {  # pages' opening lines after the title
    "local-cluster-usage.md": "How to run DAGs against `tfjob-local`; how each part works inside is in [The local cluster](local-cluster.md).\n\n",
}


TASKFLOW_EXTRA = """
## @task.pytorchjob

`@task.pytorchjob(...)` does the same for a PyTorchJob: it takes every `PyTorchJobOperator` argument
except `command` (`master`, `worker`, `nproc_per_node`, `elastic_policy`, resources, env, volumes,
`deferrable`...) and `secret_args`, runs the function in every replica, and returns the value of rank 0:
the Master when the job has one (the training-operator gives it `RANK=0`), else Worker 0.

```python
from airflow.sdk import task

@task.pytorchjob(master=1, worker=2, image="registry.example.com/torch-trainer:1.0")
def world(scale: int) -> dict:
    import torch.distributed as dist             # the function runs in the pods: imports inside it

    dist.init_process_group("gloo")              # MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE are set
    return {"rank": dist.get_rank(), "world_size": dist.get_world_size() * scale}

world(1)
```
"""

OTHER_KINDS_EXTRA = """
## The kinds at a glance

Generated from the kind table the operators, sensors, hooks and the local cluster share
(`airflow_tfjob/jobs/kinds.py`). "Exactly one": the training-operator's webhook refuses any other count for
that type. The shortcut sets that type's replica count; `replicas={"Worker": 4}` does the same by name.

<!-- kinds-table -->

What each kind's replicas find in their environment (`MASTER_ADDR`, `MASTER_PORT`, `RANK`,
`WORLD_SIZE` for PyTorch and XGBoost, `COORDINATOR_ADDRESS`, `NUM_PROCESSES`, `PROCESS_ID` for JAX,
Paddle's `PADDLE_*` variables) is listed in
[the kubeflow.org/v1 kinds reference](../reference/kubeflow-v1-kinds.md).

## One task per kind

```python
from airflow_tfjob.operators.generic import KubeflowJobOperator
from airflow_tfjob.operators.jaxjob import JAXJobOperator
from airflow_tfjob.operators.paddlejob import PaddleJobOperator
from airflow_tfjob.operators.xgboostjob import XGBoostJobOperator

# XGBoostJob: one Master (required; it runs the tracker) and the Workers.
XGBoostJobOperator(task_id="xgb", master=1, worker=2, image="my/xgb:1",
                   command=["python", "train_xgb.py"], hyperparameters={"rounds": 200})

# JAXJob: Workers only; the job succeeds when every Worker does.
JAXJobOperator(task_id="jax", worker=4, image="my/jax:1", command=["python", "train_jax.py"])

# PaddleJob in collective mode: Workers without a Master (rank 0 is Worker 0).
PaddleJobOperator(task_id="paddle", worker=2, image="my/paddle:1",
                  command=["python", "-m", "paddle.distributed.launch", "train.py"])

# The generic class with the kind given (any spelling of the kind, or its plural), and a manifest
# template rendered with Jinja, overridden by the parameters.
KubeflowJobOperator(task_id="torch", kind="pytorchjob", job="jobs/pytorch.yaml", worker=8)
```

Each job is checked before anything is created: `JAXJobOperator(master=1, ...)` fails its task with
`JobValidationError: Invalid JAXJob: replicas.master: a JAXJob has no Master replicas; its replica
types are Worker. Fix: ...`, and an `XGBoostJobOperator` without a Master is refused the same way.

## Waiting for a job of another kind

```python
from airflow_tfjob.sensors.generic import KubeflowJobSensor
from airflow_tfjob.sensors.pytorchjob import PyTorchJobSensor

PyTorchJobSensor(task_id="wait_torch", name="nightly-{{ ds_nodash }}", namespace="ml",
                 deferrable=True)
KubeflowJobSensor(task_id="wait_paddle", kind="PaddleJob", name="paddle-ocr", target_condition="Running")
```
"""

README_DOCS = """
## Documentation

The user guide is a documentation site, built from `docs/` and the code's docstrings:

```
make docs        # writes build/site; open build/site/index.html
```

It builds offline in seconds and fails on any warning or broken link (`make test` builds it too). Its
pages, readable here as well:

- [Installation](docs/installation.md) and [the Kubernetes connection](docs/connection.md)
- How-to guides: [a first DAG](docs/howto/first-dag.md), [TFJobOperator](docs/howto/tfjob-operator.md),
  [PyTorchJob, XGBoostJob, JAXJob and PaddleJob](docs/howto/other-kinds.md),
  [@task.tfjob and @task.pytorchjob](docs/howto/taskflow.md), [sensors](docs/howto/sensors.md),
  [hooks and triggers](docs/howto/hooks-triggers.md), [retries and reliability](docs/howto/retries.md),
  [validation](docs/howto/validation.md), [recipes](docs/recipes.md), [the example DAGs](docs/howto/examples.md)
- Parameter reference (generated from the code): [operators](docs/api/operators.md),
  [parameters by kind](docs/api/parameters.md), [sensors](docs/api/sensors.md),
  [task decorators](docs/api/decorators.md), [hooks](docs/api/hooks.md), [triggers](docs/api/triggers.md)
- [Running on the local cluster](docs/local-cluster-usage.md) and [how it works](docs/local-cluster.md)
- [Architecture](docs/architecture.md), the training-operator's behaviour as references
  ([TFJob](docs/reference/tfjob-behaviour.md), [the other v1 kinds](docs/reference/kubeflow-v1-kinds.md))
- [Troubleshooting](docs/troubleshooting.md), [security](docs/security.md),
  [performance](docs/performance.md), [development](docs/development.md), [changelog](docs/changelog.md)
"""

REPLACE = {
    "howto/other-kinds.md": [
        ('(see "Validation" below)', "(see [Validation](validation.md))"),
        ("`@task.tfjob` does below", "[`@task.tfjob`](taskflow.md) does"),
    ],
    "development.md": [
        (
            "make demo         # the demo of the quick start\n",
            "make demo         # the demo of the quick start\nmake docs         # this site into build/site (strict: any warning fails); make test runs it\n",
        )
    ],
}
APPEND = {
    "howto/taskflow.md": TASKFLOW_EXTRA,
    "howto/other-kinds.md": OTHER_KINDS_EXTRA,
    "installation.md": "\n## This documentation\n\nThe `docs` extra (MkDocs and mkdocstrings, pinned in the lock) builds this site:\n`make docs` writes it into `build/site`, with no network access, and fails on any warning.\n",
}


def slug(text: str) -> str:
    text = re.sub(r"`", "", text)
    value = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", value)


guide = readme.split("\n## User guide\n", 1)[1]
# drop the table of contents list: everything up to the first ###
guide = guide[guide.index("\n### ") + 1 :]
sections = re.split(r"(?m)^(?=### )", guide)
pages: dict[str, list[str]] = {}
anchors: dict[str, str] = {}
order = []
in_code = False
for sec in sections:
    if not sec.strip():
        continue
    title = sec.splitlines()[0][4:].strip()
    if title not in PAGES:
        sys.exit(f"unmapped README section: {title!r}")
    page = PAGES[title]
    if page not in pages:
        order.append(page)
        pages[page] = []
    pages[page].append(sec)
    fence = False
    for line in sec.splitlines():
        if line.startswith("```"):
            fence = not fence
        m = re.match(r"(#{3,6}) (.*)", line)
        if m and not fence:
            anchors[slug(m.group(2))] = page

REPO_ONLY = re.compile(r"^(airflow_tfjob|example_dags|tests|scripts|requirements|Makefile|pyproject)")


def fix_links(text: str, page: str) -> str:
    def repl(m: re.Match[str]) -> str:
        label, target = m.group(1), m.group(2)
        if re.match(r"[a-z]+://", target):
            return m.group(0)
        path, _, anchor = target.partition("#")
        if not path:
            dest = anchors.get(anchor)
            if dest is None:
                sys.exit(f"{page}: unknown anchor #{anchor}")
            if dest == page:
                return f"[{label}](#{anchor})"
            return f"[{label}]({posixpath.relpath(dest, posixpath.dirname(page) or '.')}#{anchor})"
        if path.startswith("docs/"):
            rel = posixpath.relpath(path[5:], posixpath.dirname(page) or ".")
            return f"[{label}]({rel}{'#' + anchor if anchor else ''})"
        if (ROOT / "docs" / posixpath.dirname(page) / path).exists() and path.endswith(".md"):
            return m.group(0)
        if REPO_ONLY.match(path):
            # outside the site: name the repository path
            return label if label.startswith("`") else f"{label} (`{path}`)"
        sys.exit(f"{page}: unhandled link {target}")

    return re.sub(r"\[([^\]]+)\]\(([^)\s]+)\)", repl, text)


def shift(text: str) -> str:
    out, fence = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fence = not fence
        if not fence and re.match(r"#{3,6} ", line):
            line = line[2:]
        out.append(line)
    return "\n".join(out) + "\n"


for page in order:
    body = "".join(pages[page])
    body = shift(body)
    if page in TITLES:
        # several ### sections: a page title above them, each section one level below
        lines, fence = [], False
        for line in body.splitlines():
            if line.startswith("```"):
                fence = not fence
            if not fence and re.match(r"#{1,5} ", line):
                line = "#" + line
            lines.append(line)
        if lines and lines[0] == f"## {TITLES[page]}":
            lines = lines[1:]
        body = f"# {TITLES[page]}\n\n" + EXTRA.get(page, "") + "\n".join(lines) + "\n"
    body = fix_links(body, page) + APPEND.get(page, "")
    for old, new in REPLACE.get(page, []):
        if old not in body:
            sys.exit(f"{page}: text to replace not found: {old!r}")
        body = body.replace(old, new)
    body = re.sub(r"\n{3,}", "\n\n", body)
    dest = ROOT / "docs" / page
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(body)
    print(page, len(body.splitlines()))

# The README keeps its head (title, overview, quick start) and points to the site.
head = readme.split("\n## User guide\n", 1)[0].rstrip() + "\n"


def readme_link(m: re.Match[str]) -> str:
    label, target = m.group(1), m.group(2)
    if target.startswith("#") and target[1:] in anchors:
        return f"[{label}](docs/{anchors[target[1:]]}{target})"
    return m.group(0)


head = re.sub(r"\[([^\]]+)\]\(([^)\s]+)\)", readme_link, head)
head += README_DOCS
(ROOT / "README.md").write_text(head)
