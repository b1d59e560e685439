"""Following a job to its end: the async core the worker and the triggerer both run.

Contract: ``core.follow_job`` watches one job, streams its replicas' logs, reads its metrics and progress,
gathers a failed job's evidence and applies cleanup; ``cleanup`` holds the one kill. It reaches the cluster
only through the async hook and the list-and-watch layers (``hooks``), builds nothing but what it reports
(``build``), asks ``jobs`` what differs between APIs, and knows nothing of operators or Airflow's task
machinery: what it returns is plain, JSON-able data. One exception: ``failure`` defines the exception a
failed job raises (an AirflowException carrying the failure's cause), so that every room can raise it.
What a follow reads besides the job (metrics, progress, checkpoints, a returned value, a queue's place)
is a part (``parts``: the contract), given to the core by its caller from the registry
``airflow_tfjob.integrations.parts``: the core imports no part and no integration.
"""
