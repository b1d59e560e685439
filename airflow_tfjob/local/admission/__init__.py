"""What the API server checks and defaults on a write before the store keeps it.

Contract: functions the API server calls on a create, update or patch body, in the real server's order:
server-side field validation (`fieldValidation=Strict|Warn|Ignore`), the CRD's structural schema
(`schemacheck`), the training-operator v1 validating webhooks (`v1jobs`, `webhooks`) and Kubeflow Trainer's
and JobSet's defaulting and validation (`trainjobs`). Each answers with an ApiError or with `warnings` that
the request sends back as Warning headers. Reads the store (e.g. a TrainJob's runtime) but never writes it.
Imports model/ and store/, and Trainer's runtime build (controllers/trainjob/build.py, pure) as Trainer's
own webhook does (tests/local/test_rooms.py holds every room to its list).
"""
