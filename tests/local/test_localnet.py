"""Local addresses of a JobSet's pods (localnet.py): the stable names in a pod's env, command and args
become 127.0.0.1 and the named pod's host port; everything else is left as written."""

from __future__ import annotations

from typing import Any

from airflow_tfjob.local.node.localnet import localize_pod

PORTS = {"tj-node-0-0": 40001, "tj-node-0-1": 40002}


def pod(env: list[dict[str, Any]], args: list[str] | None = None, hostname: str = "tj-node-0-1") -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "ml"},
            "spec": {"hostname": hostname, "subdomain": "tj",
                     "containers": [{"name": "node", "command": ["python"], "args": args or [], "env": env}]}}


def test_names_with_ports_in_a_list_become_local_addresses() -> None:
    p = pod([{"name": "WORKERS", "value": "tj-node-0-0.tj:2222,tj-node-0-1.tj.ml.svc.cluster.local:2222"}],
            ["--coordinator=tj-node-0-0.tj:29500", "--peer", "tj-node-0-1.tj"])
    localize_pod(p, PORTS)
    container = p["spec"]["containers"][0]
    assert container["env"] == [{"name": "WORKERS", "value": "127.0.0.1:40001,127.0.0.1:40002"}]
    assert container["args"] == ["--coordinator=127.0.0.1:40001", "--peer", "127.0.0.1"]
    assert p["metadata"]["annotations"] == {"local.tfjob.dev/host-port": "40002"}


def test_a_port_variable_paired_with_a_rewritten_address_gets_that_pods_port() -> None:
    p = pod([{"name": "PET_MASTER_ADDR", "value": "tj-node-0-0.tj"}, {"name": "PET_MASTER_PORT", "value": "29500"},
             {"name": "OTHER_PORT", "value": "29500"}])
    localize_pod(p, PORTS)
    assert {e["name"]: e["value"] for e in p["spec"]["containers"][0]["env"]} == {
        "PET_MASTER_ADDR": "127.0.0.1", "PET_MASTER_PORT": "40001", "OTHER_PORT": "29500"}


def test_other_names_and_longer_names_are_left_alone() -> None:
    text = "tj-node-0-10.tj:1 xtj-node-0-0.tj other-node-0-0.tj tj-node-0-0.tjx tj-node-0-0"
    p = pod([{"name": "X", "value": text}])
    localize_pod(p, PORTS)
    assert p["spec"]["containers"][0]["env"][0]["value"] == text
