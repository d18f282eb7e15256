"""The wrappers that run the user's PySpark code unmodified under the runner
(:mod:`operators.query.application` says what each does and why).

:func:`install_hooks` wraps, once per process, ``DataStreamWriter``'s settings and ``start``,
``DataStreamReader``'s settings and ``load`` (the admission cap, :func:`cap_reader`) and
``SparkSession.stop``. Each wrapper acts only on a thread whose :data:`BOUND` names a starter
(the thread running the user's code); everywhere else it is the original call.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import structlog

if TYPE_CHECKING:
    from contracts.streamjob import StreamJob

log = structlog.get_logger("operators.query.application")


class HookedRun(Protocol):
    """What the wrappers read of one run of the user's code."""

    max_records_per_batch: int | None
    """The admission cap for the query the run starts (set on its Kafka or burst reader)."""


class HookedStarter(Protocol):
    """What the wrappers need of the starter running the user's code
    (:class:`operators.query.application.ApplicationStarter` is one)."""

    label: str
    job: StreamJob

    def on_start(self, writer: Any, call: Callable[[], Any]) -> Any:
        """The user's ``start()``: ``call`` starts the query; the starter records it."""
        ...


class Bound(threading.local):
    """The starter and run whose user code runs on this thread (None elsewhere)."""

    starter: HookedStarter | None = None
    run: HookedRun | None = None


BOUND = Bound()
_INSTALLED = threading.Lock()
_installed = False


def install_hooks() -> None:
    """Wrap ``DataStreamWriter``'s settings and ``start``, and ``SparkSession.stop``, once per
    process. Outside the user's thread every wrapper is the original call."""
    global _installed
    with _INSTALLED:
        if _installed:
            return
        from pyspark.sql import SparkSession
        from pyspark.sql.streaming.readwriter import DataStreamReader, DataStreamWriter

        def record_option(orig: Callable[..., Any]) -> Callable[..., Any]:
            def option(self: Any, key: str, value: Any) -> Any:
                self.__dict__.setdefault("_sa_options", {})[key.lower()] = str(value)
                return orig(self, key, value)
            return option

        def record_options(orig: Callable[..., Any]) -> Callable[..., Any]:
            def options(self: Any, **opts: Any) -> Any:
                rec = self.__dict__.setdefault("_sa_options", {})
                rec.update({k.lower(): str(v) for k, v in opts.items()})
                return orig(self, **opts)
            return options

        def record_name(orig: Callable[..., Any]) -> Callable[..., Any]:
            def queryName(self: Any, name: str) -> Any:
                self.__dict__["_sa_named"] = True
                return orig(self, name)
            return queryName

        def record_trigger(orig: Callable[..., Any]) -> Callable[..., Any]:
            def trigger(self: Any, *args: Any, **kwargs: Any) -> Any:
                given = [k for k, v in kwargs.items() if v not in (None, False)]
                self.__dict__["_sa_trigger"] = given[0] if given else "processingTime"
                return orig(self, *args, **kwargs)
            return trigger

        def hook_start(orig: Callable[..., Any]) -> Callable[..., Any]:
            def start(self: Any, *args: Any, **kwargs: Any) -> Any:
                starter = BOUND.starter
                if starter is None:
                    return orig(self, *args, **kwargs)
                if kwargs.get("queryName"):
                    self.__dict__["_sa_named"] = True
                opts = {k.lower(): str(v) for k, v in kwargs.items()
                        if k not in ("path", "format", "outputMode", "partitionBy",
                                     "queryName", "tableName")}
                self.__dict__.setdefault("_sa_options", {}).update(opts)
                return starter.on_start(self, lambda: orig(self, *args, **kwargs))
            return start

        def hook_stop(orig: Callable[..., Any]) -> Callable[..., Any]:
            def stop(self: Any) -> None:
                if BOUND.starter is not None:
                    log.info("the application's spark.stop() is ignored: the session is the "
                             "runner's", application=BOUND.starter.label)
                    return
                orig(self)
            return stop

        def record_format(orig: Callable[..., Any]) -> Callable[..., Any]:
            def format(self: Any, source: str) -> Any:
                self.__dict__["_sa_format"] = source
                return orig(self, source)
            return format

        def hook_load(orig: Callable[..., Any]) -> Callable[..., Any]:
            def load(self: Any, path: Any = None, format: Any = None,
                     *args: Any, **kwargs: Any) -> Any:
                run = BOUND.run
                if run is not None and run.max_records_per_batch is not None:
                    cap_reader(self, format or self.__dict__.get("_sa_format"),
                                run.max_records_per_batch, kwargs, path)
                return orig(self, path, format, *args, **kwargs)
            return load

        def hook_file_read(fmt: str, orig: Callable[..., Any]) -> Callable[..., Any]:
            def read(self: Any, path: Any, *args: Any, **kwargs: Any) -> Any:
                run = BOUND.run
                if run is not None and run.max_records_per_batch is not None:
                    cap_reader(self, fmt, run.max_records_per_batch, kwargs, path)
                return orig(self, path, *args, **kwargs)
            return read

        dsr: Any = DataStreamReader
        dsr.option = record_option(dsr.option)
        dsr.options = record_options(dsr.options)
        dsr.format = record_format(dsr.format)
        dsr.load = hook_load(dsr.load)
        for fmt in FILE_FORMATS:  # .json(path) and the like never pass through load()
            setattr(dsr, fmt, hook_file_read(fmt, getattr(dsr, fmt)))
        dsw: Any = DataStreamWriter
        dsw.option = record_option(dsw.option)
        dsw.options = record_options(dsw.options)
        dsw.queryName = record_name(dsw.queryName)
        dsw.trigger = record_trigger(dsw.trigger)
        dsw.start = hook_start(dsw.start)
        dsw.toTable = hook_start(dsw.toTable)
        session: Any = SparkSession
        session.stop = hook_stop(session.stop)
        _installed = True


def cap_reader(reader: Any, fmt: str | None, cap: int, load_options: dict[str, Any],
               path: Any = None) -> None:
    """Set the admission cap on the user's reader of ``format(fmt)``: the lower of it and the
    script's own (an ``option()`` before, or a ``load()`` keyword); a file format's in files
    (:func:`cap_file_reader`); a format with no such limit (rate, socket) is read as the script
    wrote it."""
    from operators.sources.registry import read_cap_option

    name = read_cap_option(fmt)
    if name is None and (fmt or "").lower() in FILE_FORMATS:
        cap_file_reader(reader, (fmt or "").lower(), cap, load_options, path)
        return
    if name is None:
        log.info("the admission cap does not apply to this source", format=fmt, cap=cap)
        return
    given = {k.lower(): k for k in load_options}
    own = (load_options[given[name.lower()]] if name.lower() in given
           else reader.__dict__.get("_sa_options", {}).get(name.lower()))
    value = cap if own is None else min(cap, int(float(own)))
    if name.lower() in given:
        load_options[given[name.lower()]] = str(value)
    else:
        reader.option(name, str(value))
    log.info("admission cap set on the application's reader", format=fmt, option=name,
             value=value, script_value=own)


FILE_FORMATS = ("json", "csv", "text", "parquet", "orc")
"""Spark's file source formats: their micro-batches are limited in files
(``maxFilesPerTrigger``)."""


def _option_text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def cap_file_reader(reader: Any, fmt: str, cap: int, load_options: dict[str, Any],
                    path: Any) -> None:
    """The admission cap on the user's file reader, in files: ``cap`` over the records per file
    measured on the newest files under ``path`` that the job's checkpoint logged, read with the
    script's own options; the lower of it and the script's ``maxFilesPerTrigger``. Not set
    (logged) when the reader has no single path or nothing is logged under it yet."""
    from operators.sources.files import records_per_logged_file, whole_units

    starter, recorded = BOUND.starter, reader.__dict__.get("_sa_options", {})
    given = {k.lower(): k for k in load_options}
    path = path if path is not None else recorded.get("path")
    if starter is None or not isinstance(path, str):
        log.info("the admission cap does not apply to this file reader: no single path",
                 format=fmt, cap=cap)
        return
    opts = {**recorded, **{k.lower(): _option_text(v) for k, v in load_options.items()
                           if isinstance(v, str | int | float | bool)}}
    own = opts.pop("maxfilespertrigger", None)
    for streaming_only in ("path", "schema"):  # the count reads the logged files, inferring
        opts.pop(streaming_only, None)
    spark = reader._spark
    per_file = records_per_logged_file(
        starter.job.spec.checkpoint.location, path,
        lambda files: int(spark.read.format(fmt).options(**opts).load(files).count()))
    if per_file is None:
        return
    value = whole_units(cap, per_file)
    value = value if own is None else min(value, int(float(own)))
    if "maxfilespertrigger" in given:
        load_options[given["maxfilespertrigger"]] = str(value)
    else:
        reader.option("maxFilesPerTrigger", str(value))
    log.info("admission cap set on the application's reader", format=fmt,
             option="maxFilesPerTrigger", value=value, records=cap,
             records_per_file=round(per_file, 1), script_value=own)
