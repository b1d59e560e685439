"""The registry of follow parts: every part a follow may be made of, one line each, in calling order.

The operator (both modes' worker side) and the trigger hand it to the follow core (``follow.core``),
which knows no part by name (follow/parts.py holds the contract). It lives here, above the follow
room, because a part may belong to an optional integration (Kueue's): the core's room may not import
one. A new part is its module and a line below.

The order is the order of their lines in the task log at the same moment (the metrics' missing
warning before the reported progress's last line, as before parts) and of the calls on each change.
"""

from __future__ import annotations

from airflow_tfjob.follow.checkpoints import CheckpointPart
from airflow_tfjob.follow.metrics import MetricsPart
from airflow_tfjob.follow.parts import PartTypes
from airflow_tfjob.follow.progress import ProgressPart, ReportedProgressPart
from airflow_tfjob.follow.returned import ReturnCapturePart
from airflow_tfjob.follow.tap import TapPart
from airflow_tfjob.integrations.kueue.multikueue import WorkerPart
from airflow_tfjob.integrations.kueue.part import QueuePart

PARTS: PartTypes = (
    MetricsPart,
    ProgressPart,
    ReportedProgressPart,
    CheckpointPart,
    ReturnCapturePart,
    QueuePart,
    WorkerPart,
    TapPart,
)
