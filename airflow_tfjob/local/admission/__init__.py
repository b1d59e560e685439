"""What the API server checks and defaults on a write before the store keeps it.

Contract: functions the API server calls on a create, update or patch body, in the real server's order:
server-side field validation (`fieldValidation=Strict|Warn|Ignore`), the CRD's structural schema
(`schemacheck`), the training-operator v1 validating webhooks (`v1jobs`, `webhooks`) and Kubeflow Trainer's
and JobSet's defaulting and validation (`trainjobs`). Each answers with an ApiError or with `warnings` that
the request sends back as Warning headers. Reads the store (e.g. a TrainJob's runtime) but never writes it.
Imports model/ (Trainer's runtime build among it, model/trainerbuild.py, as Trainer's own webhook uses it)
and store/ only: the `local-layers` contract in pyproject.toml holds it there.
"""
