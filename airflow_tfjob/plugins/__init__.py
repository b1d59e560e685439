"""The provider's Airflow plugin, loaded by every Airflow component through the ``airflow.plugins`` entry
point.

Contract: Airflow-facing like the operators (it may use every room below them); importing it stays
cheap, since the scheduler, API server and triggerer all load it at start.
"""
