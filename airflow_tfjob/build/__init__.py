"""Building and checking a job: parameters, manifests, templates, names and validation (pure).

Contract: parameters or a template in, one manifest (or a ``JobValidationError`` naming every bad field and
its fix) out, before anything reaches a cluster. No I/O but reading the template file ``templates.py``
allowed, no hooks, no following; reads the kind table in ``jobs``. Secrets are registered with Airflow's
masker here, the one side effect.
"""
