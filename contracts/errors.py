"""The errors of :mod:`contracts`: input a person wrote that cannot be used as written.

Hierarchy::

    ContractError(ValueError)        every error below; its text names the input and the fix
    ├── ManifestError                a StreamJob / ScalingPolicy manifest (file, field, value, why)
    ├── TraceError                   a burst trace (file, line, column)
    └── ChaosError                   a --chaos spec (the part, why)

Each package has one base like this one (``controller.errors.ControllerError``,
``operators.errors.OperatorsError``, ``app.errors.AppError``); docs/architecture.md lists them.
"""

from __future__ import annotations


class ContractError(ValueError):
    """Input that does not meet a contract; the message says what and where."""


def printable(text: str) -> str:
    """``text`` with every character a terminal would act on (escape sequences, NUL, bell,
    carriage return, a newline that would forge a line) shown escaped: a message quotes
    hostile input, never replays it (tests/fuzz: the ``raw-control`` outcome)."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
