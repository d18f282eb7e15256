"""Fakes of the runner for tests and benchmarks of the control plane.

A fake runner answers the control endpoint and ``/metrics`` exactly as :mod:`contracts` declares
them, backed by a small model of a micro-batch job instead of Spark (hundreds in one process).
"""
