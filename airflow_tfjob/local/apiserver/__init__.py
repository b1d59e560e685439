"""The local cluster's Kubernetes REST API over HTTP (aiohttp): what kubectl and the clients talk to.

Contract: `server` routes the verbs on namespaced and cluster-scoped resources and their subresources to
the store, after the middlewares (`auth` tokens, `rbac` roles, the fault plan of ../faults.py) and with the
decode-time checks of admission/. Beside it: discovery and OpenAPI documents, kubectl's server-side
tables, the watch and pods/log endpoints, request metrics, TLS certificates, and the `extensions` an
optional room (kueue/) adds. Reads pod logs from node/podlogs; never runs a controller or a process.
Imports model/, store/, admission/, node/podlogs.py and ../credential.py.
"""
