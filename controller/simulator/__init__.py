"""The simulator: the decision engine and faithful baselines against a model of a Spark job.

``stream-autoscaler simulate`` (see :mod:`controller.simulator.cli`). The job model is in
:mod:`.model` and :mod:`.job`, the snapshot the engine sees in :mod:`.metrics`, the baselines in
:mod:`.baselines`, the clairvoyant lower bound in :mod:`.oracle`, outputs in :mod:`.report`.
"""

from controller.simulator.compare import Comparison, compare
from controller.simulator.model import JobModel, load_model

__all__ = ["Comparison", "JobModel", "compare", "load_model"]
