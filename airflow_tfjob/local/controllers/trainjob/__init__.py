"""Kubeflow Trainer v2.3.0's TrainJob controller: from a TrainJob and its (Cluster)TrainingRuntime to a
JobSet.

Contract: `controller` reconciles TrainJobs into JobSets and their conditions, with the JobSet Trainer
applies built by model/trainerbuild.py (pure, shared with the admission and Kueue as upstream's runtime
framework is), `status` is the alpha TrainJobStatus progress feature, `runtimes` the
ClusterTrainingRuntimes installed at start. The JobSet itself is ../jobset.py's.
"""
