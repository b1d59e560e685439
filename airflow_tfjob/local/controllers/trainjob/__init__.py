"""Kubeflow Trainer v2.3.0's TrainJob controller: from a TrainJob and its (Cluster)TrainingRuntime to a
JobSet.

Contract: `build` turns a runtime and a TrainJob into the JobSet Trainer applies (pure), `controller`
reconciles TrainJobs into JobSets and their conditions, `status` is the alpha TrainJobStatus progress
feature, `runtimes` the ClusterTrainingRuntimes installed at start. The JobSet itself is ../jobset.py's.
"""
