"""Sources: where a job's records come from.

* ``burst`` (:mod:`operators.sources.burst`): deterministic records at a trace's rate, for
  burst tests and exactly-once checks;
* ``files`` (:mod:`operators.sources.files`): new files in a directory;
* ``kafka`` (:mod:`operators.sources.kafka`): topics through Spark's Kafka connector (its jars
  on ``spark.jars``, see :func:`operators.sources.kafka.kafka_jars`).

Each is a :class:`operators.sources.base.SourceAdapter` (the DataFrame, streaming or batch; the
verifier's replay; fixed read partitions; the backlog probe); :mod:`operators.sources.registry`
maps the manifest's source model to it and answers the runner's questions of a source.

This file imports nothing: every executor's Python worker that reads the burst source runs it
before the reader (:mod:`operators.sources.burst_datasource`), so what it imported, each worker
would pay at its start, on a CPU-limited executor, before its first task
(``tests/unit/operators/sources/test_sources.py::
test_an_executors_python_worker_imports_the_reader_without_the_drivers_modules``).
"""
