"""Trainer v2.3.0's MPI plugin (`plugins/mpi/mpi.go`, docs/reference/trainjob-behaviour.md §4.5), as far as the
API shows it: the replicated jobs `node` and `launcher` get the ssh volume `mpi-ssh-auth` (Secret
`<tj>-mpi-ssh-auth`) mounted at `sshAuthMountPath` in their `node` container; the launcher also gets the
hostfile (ConfigMap `<tj>-mpi-hostfile`, key `hostfile`, mounted at /etc/mpi) and the OpenMPI env. The
Secret (type kubernetes.io/ssh-auth, immutable, a P-521 key) is made once; the ConfigMap lists every node
endpoint with its slots (numProcPerNode: the TrainJob's, else the policy's, else the GPUs when more than 1).

The local cluster runs no sshd or mpirun for these pods: the objects are upstream's, the processes are
whatever the containers' commands start. A job whose `node` pods would run sshd (the shipped deepspeed and
mlx runtimes) cannot work here: its launcher's mpirun would ssh into them. Such a TrainJob is not run
when it starts: it fails at once with reason `MPIOverSSHUnsupported` (`ssh_required`), its JobSet kept
suspended, instead of crash-looping on a missing sshd until the Job's backoff limit.
"""

from __future__ import annotations

import base64
import posixpath

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from airflow_tfjob.local.model.resources import JsonDict

LAUNCHER = "launcher"
NODE = "node"
SSH_VOLUME = "mpi-ssh-auth"
SSH_SUFFIX = "-mpi-ssh-auth"
HOSTFILE_VOLUME = "mpi-hostfile"
HOSTFILE_SUFFIX = "-mpi-hostfile"
HOSTFILE_DIR = "/etc/mpi"
HOSTFILE = "hostfile"
RESERVED = ("OMPI_MCA_orte_default_hostfile", "OMPI_MCA_plm_rsh_args", "OMPI_MCA_orte_keep_fqdn_hostnames",
            "OMPI_MCA_orte_set_default_slots")
#: Open MPI 5's PRTE names beside the ORTE ones, in RESERVED's order (kubeflow/trainer#4029, as the pull request
#: lists them; Trainer 2.4 by issue 38's reading of its release notes): set on the launcher and reserved too.
PRTE_RESERVED = ("PRTE_MCA_prte_default_hostfile", "PRTE_MCA_plm_ssh_args", "PRTE_MCA_prte_keep_fqdn_hostnames",
                 "PRTE_MCA_prte_set_default_slots")


UNSUPPORTED_REASON = "MPIOverSSHUnsupported"


def ssh_required(js_spec: JsonDict) -> str | None:
    """The message a started TrainJob fails with when its `node` job runs sshd for the launcher's mpirun,
    else None."""
    for rjob in js_spec.get("replicatedJobs") or []:
        if rjob.get("name") != NODE:
            continue
        pod = (((rjob.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec") or {}
        for container in pod.get("containers") or []:
            argv = [*(container.get("command") or []), *(container.get("args") or [])]
            if argv and posixpath.basename(str(argv[0])) == "sshd":
                return (f"the local cluster cannot run this MPI TrainJob: its launcher runs mpirun over ssh into "
                        f"the {NODE} pods, whose container {container.get('name')} runs {argv[0]}, and local "
                        f"processes have no sshd to ssh into")
    return None


def slots(policy: JsonDict, trainer: JsonDict | None, gpus: int) -> int:
    mpi = policy.get("mpi") or {}
    if trainer and trainer.get("numProcPerNode") is not None:
        return int(trainer["numProcPerNode"])
    procs = int(mpi.get("numProcPerNode") or 1)
    return gpus if procs == 1 and gpus > 1 else procs


def _upsert(items: list[JsonDict], item: JsonDict, key: str = "name") -> None:
    for i, old in enumerate(items):
        if old.get(key) == item.get(key):
            items[i] = item
            return
    items.append(item)


def enforce(name: str, js_spec: JsonDict, policy: JsonDict, nslots: int, *, prte: bool = False) -> None:
    """EnforceMLPolicy's volumes, mounts and env on the JobSet spec (in place); `prte`: the launcher also gets
    the PRTE variables, with the ORTE ones' values except keep_fqdn_hostnames, which #4029 sets false (the
    hostfile's short pod names never match what PRTE resolves for the launcher itself)."""
    mpi = policy.get("mpi") or {}
    ssh = {"name": SSH_VOLUME, "secret": {
        "secretName": f"{name}{SSH_SUFFIX}", "defaultMode": 0o400,
        "items": [{"key": "ssh-privatekey", "path": "id_rsa", "mode": 0o640},
                  {"key": "ssh-publickey", "path": "id_rsa.pub", "mode": 0o644},
                  {"key": "ssh-publickey", "path": "authorized_keys", "mode": 0o644}]}}
    hostfile = {"name": HOSTFILE_VOLUME, "configMap": {
        "name": f"{name}{HOSTFILE_SUFFIX}", "items": [{"key": HOSTFILE, "path": HOSTFILE, "mode": 0o444}]}}
    for rjob in js_spec.get("replicatedJobs") or []:
        if rjob.get("name") not in (NODE, LAUNCHER):
            continue
        launcher = rjob["name"] == LAUNCHER
        pod = rjob.setdefault("template", {}).setdefault("spec", {}).setdefault("template", {}).setdefault("spec", {})
        volumes = pod.setdefault("volumes", [])
        _upsert(volumes, ssh)
        if launcher:
            _upsert(volumes, hostfile)
        for container in pod.get("containers") or []:
            if container.get("name") != NODE:
                continue
            mounts = container.setdefault("volumeMounts", [])
            _upsert(mounts, {"name": SSH_VOLUME, "mountPath": mpi.get("sshAuthMountPath") or "/root/.ssh"})
            if launcher:
                _upsert(mounts, {"name": HOSTFILE_VOLUME, "mountPath": HOSTFILE_DIR})
                env = container.setdefault("env", [])
                for names, keep_fqdn in ((RESERVED, "true"), *([(PRTE_RESERVED, "false")] if prte else [])):
                    for entry in ({"name": names[0], "value": f"{HOSTFILE_DIR}/{HOSTFILE}"},
                                  {"name": names[2], "value": keep_fqdn},
                                  {"name": names[3], "value": str(nslots)},
                                  {"name": names[1], "value": "-o ConnectionAttempts=10"}):
                        _upsert(env, entry)


def hostfile_data(name: str, js_spec: JsonDict, policy: JsonDict, nslots: int) -> str:
    """`<tj>-<rjob>-<replica>-<index>.<subdomain> slots=N` a line, for the node job (and the launcher when it
    runs as a node), in the JobSet's order."""
    as_node = bool((policy.get("mpi") or {}).get("runLauncherAsNode"))
    subdomain = (js_spec.get("network") or {}).get("subdomain") or name
    lines = []
    for rjob in js_spec.get("replicatedJobs") or []:
        if not (rjob.get("name") == NODE or (as_node and rjob.get("name") == LAUNCHER)):
            continue
        count = int(((rjob.get("template") or {}).get("spec") or {}).get("parallelism") or 1)
        for replica in range(int(rjob.get("replicas", 1))):
            lines += [f"{name}-{rjob['name']}-{replica}-{i}.{subdomain} slots={nslots}\n" for i in range(count)]
    return "".join(lines)


def ssh_secret(tj: JsonDict, owner: JsonDict) -> JsonDict:
    key = ec.generate_private_key(ec.SECP521R1())
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                                serialization.NoEncryption())
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)

    def b64(raw: bytes) -> str:
        return base64.b64encode(raw).decode()
    meta = tj["metadata"]
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/ssh-auth", "immutable": True,
            "metadata": {"name": f"{meta['name']}{SSH_SUFFIX}", "namespace": meta["namespace"],
                         "ownerReferences": [owner]},
            "data": {"ssh-privatekey": b64(private), "ssh-publickey": b64(public + b"\n")}}


def hostfile_configmap(tj: JsonDict, owner: JsonDict, data: str) -> JsonDict:
    meta = tj["metadata"]
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": f"{meta['name']}{HOSTFILE_SUFFIX}", "namespace": meta["namespace"],
                         "ownerReferences": [owner]},
            "data": {HOSTFILE: data}}
