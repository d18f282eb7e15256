"""The application layer: the ``stream-autoscaler`` CLI and the local ``demo``.

The only package that imports both planes (:mod:`controller` and :mod:`operators`): it wires the
data plane's mini-cluster and verifier to the control plane's local loop. Nothing imports it.
"""
