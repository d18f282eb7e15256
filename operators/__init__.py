"""The data plane: the PySpark job runner and everything that runs in the Spark driver.

Levels, each importing only those below it (import-linter's layers contract in pyproject.toml;
docs/architecture.md has the table):

* :mod:`operators.driver` — the driver process and its endpoints: the runner, its actions, the
  control endpoint, the Prometheus exporter, the listener, the ``runner`` command line;
* :mod:`operators.query` — what runs the query: the Spark session and its local cluster, the
  job (a declared pipeline, a user's script or function) and its sinks;
* :mod:`operators.sources` — where records come from (burst, files, Kafka) and the backlog;
* :mod:`operators.state` — the checkpoint: inspect, back up, restore, repartition;
* the leaves: :mod:`operators.errors`, :mod:`operators.names`, :mod:`operators.offsets` (pure)
  and :mod:`operators.jars`, :mod:`operators.s3a` (the connectors' jars and settings).

Beside the levels, tools that use them: :mod:`operators.loadgen` (Kafka load),
:mod:`operators.verifier` (exactly once), :mod:`operators.udf_examples`,
:mod:`operators.testing` (a simulated runner for the controller's tests).
"""
