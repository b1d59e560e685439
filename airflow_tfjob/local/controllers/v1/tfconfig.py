"""TF_CONFIG as training-operator v1.9.4 writes it, with local addresses.

The operator (`genTFConfigJSONStr`, `genClusterSpec`, `convertClusterSpecToSparseClusterSpec`) emits
compact Go JSON: keys `cluster`, `task`, `environment` in that order, the cluster's keys sorted (Go map
encoding), every replica type of the spec (Evaluator and unknown types included) lower-cased, and
`"environment": "cloud"`. With `enableDynamicWorker` it emits the sparse form instead: `cluster` has
exactly `worker` (an object keyed by the task's own index) then `ps`, and there is no `environment`.
A worker of a job without PS gets `"ps": null`, because Go marshals the nil slice it copies as null.

The only deviation is the address: where the operator writes `{job}-{type}-{i}.{namespace}.svc:{port}`,
the local cluster writes `127.0.0.1:{port}` with a port allocated per replica, since every replica runs
on the same host and no cluster DNS exists. The caller supplies the addresses.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

# isDistributed counts these types only: a spec of one Chief and a `Foo` replica is "not distributed".
_COUNTED_TYPES = ("chief", "evaluator", "master", "ps", "worker")


def is_distributed(replica_counts: Mapping[str, int]) -> bool:
    """True unless the known replica types add up to exactly one pod (kubeflow/trainer#1078)."""
    return sum(n for rt, n in replica_counts.items() if rt in _COUNTED_TYPES) != 1


def cluster_spec(
    replica_counts: Mapping[str, int], address: Callable[[str, int], str]
) -> dict[str, list[str]]:
    """`{lower type: [address of index 0, 1, ...]}` with sorted keys, as Go encodes a map."""
    return {rt: [address(rt, i) for i in range(max(n, 0))] for rt, n in sorted(replica_counts.items())}


def tf_config(
    replica_counts: Mapping[str, int],
    replica_type: str,
    index: int,
    address: Callable[[str, int], str],
    *,
    dynamic_worker: bool = False,
) -> str | None:
    """The TF_CONFIG value for one replica, or None when the operator injects none.

    `replica_counts` maps lower-cased replica types to their (defaulted) replica counts; `address(type,
    index)` returns the `host:port` of a replica.
    """
    if not is_distributed(replica_counts):
        return None
    rt = replica_type.lower()
    cluster = cluster_spec(replica_counts, address)
    task = {"type": rt, "index": index}
    config: dict[str, Any]
    if dynamic_worker:
        config = {"cluster": _sparse_cluster(cluster, rt, index), "task": task}
    else:
        config = {"cluster": cluster, "task": task, "environment": "cloud"}
    return json.dumps(config, separators=(",", ":"))


def _sparse_cluster(cluster: Mapping[str, list[str]], rt: str, index: int) -> dict[str, Any]:
    worker: dict[str, str] = {}
    ps: list[str] | None = []
    if rt == "ps":
        ps = [cluster[rt][index]]
    elif rt == "worker":
        ps = cluster.get("ps")  # absent => nil slice => null, byte for byte
        worker[str(index)] = cluster[rt][index]
    return {"worker": worker, "ps": ps}
