"""Kubeflow Trainer v2 (TrainJob, ``trainer.kubeflow.org/v1alpha1``): the provider's adapter.

One module per concern, all pure but ``discovery`` and ``runtimes`` (which talk to the API through
a hook or a kube-config): ``manifest`` (the TrainJob the user asked for), ``validation`` (refused
before submit, naming the field and the fix), ``status`` (a TrainJob -> ``JobStatus``), ``pods``
(which pods are the job's replicas and how the task log names them), ``tfconfig`` (TF_CONFIG computed
in each node's container), ``from_tfjob`` (a TFJob manifest -> a TrainJob on a TensorFlow runtime),
``runtimes`` (the TensorFlow ClusterTrainingRuntimes shipped as package data, and their install
command) and ``discovery`` (``api="auto"``: which API the cluster serves). Ground truth:
docs/reference/trainjob-behaviour.md.
"""
