"""stream-autoscaler: an elastic autoscaling controller for Spark Structured Streaming.

The decision engine lives in :mod:`controller.core` (pure: stdlib + pydantic). Everything around
it (metrics sources, the simulator, the CLI, the Kubernetes reconciler) is an adapter.
"""

__version__ = "0.1.0"
