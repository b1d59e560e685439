"""The controllers of the local cluster: watch the store, reconcile one object at a time, write back.

Contract: every controller runs on `reconciler` (a work queue of object keys fed by watches, requeues after a
delay, retries with backoff, one reconcile at a time), the Kueue manager in kueue/ included, and talks to
the store only through its public methods, as a controller talks to the API. v1/ holds the
training-operator's kubeflow.org/v1 kinds (one module per kind over the shared job pass), trainjob/
Kubeflow Trainer v2's TrainJob, `jobset` the JobSet controller and `batch` the batch/v1 Job controller
JobSets use. Processes are node/'s: a controller only creates pods and services. Imports model/, store/,
node/'s addresses (ports, localnet, dns) and the JobSet webhook's defaults (admission/trainjobs.py).
"""
