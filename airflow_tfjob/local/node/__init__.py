"""The local cluster's one node: the kubelet (and scheduler) that runs pods as process groups on this host.

Contract: `runner` watches pods in the store, binds them to this node and runs them (`podrun`: containers,
restarts, termination; `podenv`: the environment a kubelet builds), keeping their logs in `podlogs` for the
API server's pods/log endpoint. Networking without a cluster network: host `ports` per replica, `localnet`
loopback addresses for JobSet pods, `dns` files for headless Services. `watchdog` is a standard-library
script run by path (`python -I -S .../node/watchdog.py`) that kills the process groups when the cluster dies.
Imports model/ and store/ only.
"""
