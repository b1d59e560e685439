"""What etcd plus the generic API-server registry do: the object store and its watches.

Contract: `core.Store` keeps every object, numbers every change with one resourceVersion counter and fans
it out to `watchers.Watcher`s; deletion (preconditions, propagation, finalizers, graceful pods) and
garbage collection through ownerReferences are its mixins; `events` writes core/v1 Events into it as
client-go's recorder does. Imports only model/. It knows nothing of HTTP, controllers or processes.
"""
