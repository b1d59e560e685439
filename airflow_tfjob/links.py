"""Extra links shown on TFJob tasks in the Airflow UI.

Airflow 3 serialises an operator's links as ``{name: xcom_key}`` and the API server reads the URL
straight from that XCom, so the link is only as good as the value the operator pushed while the
task ran: the TensorBoard URL read from the Service's status (see ``tensorboard.py``). When the task
ends, Airflow pushes what ``get_link`` returns over that XCom: an empty value once the task deleted its
board, so the UI stops offering a link to it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperatorLink

from airflow_tfjob.tensorboard import XCOM_KEY

if TYPE_CHECKING:
    from airflow.sdk.types import TaskInstanceKey


class TensorBoardLink(BaseOperatorLink):
    """The job's TensorBoard, when the task was asked to start one."""

    name = "TensorBoard"

    @property
    def xcom_key(self) -> str:
        return XCOM_KEY

    def get_link(self, operator: Any, *, ti_key: TaskInstanceKey) -> str:
        # Airflow calls this when every task of the operator ends and pushes what it returns to the
        # link's XCom, which the UI reads. Without a board there is no XCom to read (asking would log
        # a 404 error in the task log); a board the task deleted gets no link (Airflow shows none).
        if not getattr(operator, "tensorboard", None) or getattr(operator, "_tensorboard_removed", False):
            return ""
        from airflow.sdk.execution_time.xcom import XCom

        value = XCom.get_value(ti_key=ti_key, key=XCOM_KEY)
        return str(value) if value else ""
