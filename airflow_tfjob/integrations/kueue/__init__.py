"""Following a job through Kueue: queued, admitted, running, preempted, resumed.

An optional module (docs/architecture.md, "Outside systems"): the follow core imports
:mod:`airflow_tfjob.integrations.kueue.tracker` only for a job that carries Kueue's queue label, and the hooks'
Kueue calls live in :mod:`airflow_tfjob.hooks.kueue`. Ground truth: docs/reference/kueue-behaviour.md.

- :mod:`airflow_tfjob.integrations.kueue.workload` (pure): a Workload (and the job) -> :class:`QueueView`, the
  state the task log shows, and the numbers the result reports.
- :mod:`airflow_tfjob.integrations.kueue.tracker`: the follow core's view of the queue: polls the Workload and
  the queue position through the async hook, writes each change once, enforces ``queue_timeout``,
  ``on_preemption`` and ``kueue_require_admission``.
"""
