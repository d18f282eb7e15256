"""The errors of :mod:`app`: a demo that cannot run, with what to fix.

Hierarchy::

    AppError(RuntimeError)
    ├── DemoError            the demo's inputs or machine (no cores, bad --chaos, ...)
    ├── CalibrationError     measuring one executor's capacity failed
    └── KindBurstError       a step of `make kind-burst` failed (kubectl, the verifier)

The CLI prints them as one line and exits 2; docs/architecture.md lists every package's base.
"""

from __future__ import annotations


class AppError(RuntimeError):
    """Base of the application layer's errors."""


class DemoError(AppError):
    """A demo that cannot run, with what to fix."""


class KindBurstError(AppError):
    """A step of `make kind-burst` failed; the message names it and what was seen."""
