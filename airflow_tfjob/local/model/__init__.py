"""The local cluster's vocabulary: the kinds it serves and what an object of one of them is.

Contract: pure data and functions over JSON objects (resource types, the API error shape, selectors,
patches, defaults, request-body shape rules, the scale subresource, Pod create validation, the
OpenAPI schemas of core types and of the kubeflow.org/v1 CRDs, the version profiles: what differs
between the upstream releases the cluster can stand for, and Kubeflow Trainer's runtime framework: the
JobSet a TrainJob becomes, which the admission, the TrainJob controller and Kueue all compute, as
upstream's webhook, controller and Kueue integration do). Nothing here holds state, does I/O or
imports another room of the local cluster; every other room imports it.
"""
