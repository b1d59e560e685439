"""The triggers the operators and sensors defer with, and the asset watchers' trigger, run by Airflow's triggerer.

Contract: ``deferral.KubeflowJobTrigger`` runs the same follow core as a synchronous task and yields one
final event; ``KubeflowJobConditionTrigger`` serves the sensors; ``assets.KubeflowJobSucceededTrigger``
is an ``AssetWatcher``'s (an event per labelled job that succeeds, whoever created it). All serialize
to plain kwargs; ``tfjob.py`` keeps the classpaths the 0.1.0 builds stored resolvable.
"""
