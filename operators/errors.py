"""The errors of :mod:`operators`: what stops a job from being built, run, scaled or checked.

Hierarchy::

    OperatorsError                           every error below
    ├── JobDefinitionError(ValueError)       a manifest that cannot become a query
    │                                        (``where`` + ``problem``; operators.query.job)
    ├── SourceError(ValueError)              a source that cannot be read as described
    │   ├── BurstSourceError                 a bad trace, t,load without loadUnitRate
    │   ├── FileSourceError                  a files source described incompletely
    │   └── KafkaSourceError                 a Kafka source or sink, or the connector's jars
    ├── SinkError(ValueError)                a sink we cannot write to (operators.query.sinks)
    ├── CheckpointError(ValueError)          a checkpoint we must not start from
    │                                        (operators.state.checkpoint; ``problem`` code)
    ├── RepartitionError(RuntimeError)       a repartition that failed, rolled back or not
    │                                        (operators.state.repartition; ``step``)
    ├── VerifierError(RuntimeError)          the exactly-once verifier cannot judge this job
    ├── ActionConflict(RuntimeError)         an action requested while another runs, or in a
    │                                        phase that refuses it: HTTP 409
    │                                        (operators.driver.actions)
    ├── ClusterError(RuntimeError)           the mini-cluster could not start
    │                                        (operators.query.cluster)
    ├── CpuQuotaError(RuntimeError)          a CPU quota cannot be set here: no permission, no
    │                                        cpu controller, a bad figure (operators.query.cgroups)
    └── LoadGenError(RuntimeError)           the Kafka load generator cannot run (operators.loadgen)

Each keeps the built-in base it always had (``ValueError`` for what a manifest says,
``RuntimeError`` for what happened while running), so ``except ValueError`` callers still see
them. Classes with their own fields live beside the code that raises them; the rest are here.
The other packages' bases: :class:`contracts.errors.ContractError`,
:class:`controller.errors.ControllerError`, ``app.errors.AppError``.
"""

from __future__ import annotations


class OperatorsError(Exception):
    """Base of the data plane's errors."""


class JobDefinitionError(OperatorsError, ValueError):
    """A manifest that cannot become a query. ``where`` is the operator name (or ``source``,
    ``sink``, ``checkpoint``, ``state store``, ``output mode``); ``problem`` says what is wrong."""

    def __init__(self, where: str, problem: str) -> None:
        super().__init__(f"{where}: {problem}")
        self.where = where
        self.problem = problem


class SourceError(OperatorsError, ValueError):
    """A source that cannot be read as the manifest describes it."""


class BurstSourceError(SourceError):
    """A burst source that cannot run (bad trace, t,load without load_unit_rate)."""


class FileSourceError(SourceError):
    """A file source the manifest describes incompletely."""


class KafkaSourceError(SourceError):
    """A Kafka source or sink that cannot be read or written as described."""


class VerifierError(OperatorsError, RuntimeError):
    """The verifier cannot judge this job (wrong source or sink kind, unreadable checkpoint)."""


FIRST_LINE_CHARS = 400
"""An error is quoted in status, logs and Events by its first meaningful line, cut here: long
enough for Spark's analysis errors, short enough for a condition message."""


def first_line(e: BaseException | str) -> str:
    """The first meaningful line of an error (Py4J errors start with boilerplate, Spark's end
    with a JVM stack trace), at most :data:`FIRST_LINE_CHARS`; the type's name when there is
    none. The one helper every module of the data plane quotes errors with."""
    for line in str(e).splitlines():
        line = line.strip()
        if line and not line.startswith(("An error occurred", "JVM stacktrace")):
            return line[:FIRST_LINE_CHARS]
    return type(e).__name__ if isinstance(e, BaseException) else "error"
