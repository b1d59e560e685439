"""Talking to the Kubernetes API: the hooks, the list-and-watch layers, retries and credentials.

Contract: every request the provider makes goes through this room, under the one retry policy
(``retry.py``); objects come back as plain dicts in API form, and errors as the vocabulary callers branch
on (``AmbiguousCreate``, ``WatchExpired``...), never a raw client exception. It knows HTTP, the clients and
the connection, and nothing of Airflow tasks, following or building: it may read only the kind table
(``jobs``) and ``constants``. ``tfjob.py`` is the documented public path of the two hooks.
"""
