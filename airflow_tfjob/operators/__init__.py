"""The Airflow-facing operators: one generic ``KubeflowJobOperator`` and a thin class per kind.

Contract: an operator tells the user's story (build and check, find or create, follow inline or defer,
turn the outcome into a result or an exception, clean up) and delegates each step to the rooms below
(``build``, ``hooks``, ``follow``, ``jobs``); it never talks HTTP itself. Importing a kind's module stays
cheap (no ``kubernetes``, ``aiohttp`` or cncf hooks at load): DAG files import it at every parse.
"""
