"""The Kubernetes controller: StreamJobs and ScalingPolicies in, scaled Spark jobs out.

Layers, each talking only to the one below: ``main`` (the CLI) -> ``manager`` (informers,
queue, workers, leader election) -> ``reconciler`` (one job: collect, decide, act) ->
``api`` (the only module that calls the Kubernetes API). ``resources`` and ``status`` are pure
builders; the decisions come from :mod:`controller.core`.
"""
