"""The TaskFlow decorators ``@task.tfjob`` and ``@task.pytorchjob``: a Python function as every replica's
program.

Contract: a decorated function becomes the operator of its kind with a generated bootstrap command; the
result travels back through the replica's log. Everything else is the operators' story.
"""
