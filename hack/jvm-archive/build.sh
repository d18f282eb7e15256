#!/usr/bin/env bash
# A class-data-sharing archive of the classes a Spark driver loads, for the test lanes' JVMs
# (built by hack/prepare.sh; the figures: docs/benchmark.md, the JVM class archive).
#
# Every Spark JVM of this venv (SparkSubmit, the standalone master, workers and executors) runs
# on one class path, $SPARK_HOME/conf:jars/*; a JVM started with -XX:SharedArchiveFile maps the
# archived classes instead of reading, parsing and verifying them from the jars again. hack/test.sh
# gives the archive to the lanes' JVMs; a JVM on another class path (the Kafka broker, Spark's
# launcher) logs that it cannot use it (silenced there) and runs as before.
#
# The archive holds this venv's absolute jar paths, sizes and times, so it lives in the venv and
# is rebuilt when the jars or the JVM are newer. Built by the lanes' typical query under
# spark-submit (warmup.py): the dump happens as its JVM exits, before spark-submit returns.
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV=${VENV:-.venv}
archive=${JVM_ARCHIVE:-$VENV/share/stream-autoscaler/spark-classes.jsa}
spark_home=$("$VENV/bin/python" -c 'from operators.query.cluster import spark_home; print(spark_home())')
java_bin=$(readlink -f "$(command -v java)")
if [[ -s $archive && $archive -nt $spark_home/jars && $archive -nt $java_bin ]]; then
  echo "jvm-archive: $archive is up to date"
  exit 0
fi
mkdir -p "$(dirname "$archive")"
tmp="$archive.tmp.$$"
trap 'rm -f "$tmp" "$tmp.log"' EXIT
# The archive holds no heap objects, so the JIT and collector flags need not match: one dumped
# with the JVM's defaults serves the lanes' C1 and serial-collector JVMs (11.7k classes mapped).
# Bounded: a warm-up stuck in Spark fails prepare after 5 minutes instead of hanging it.
timeout 300 env -u JAVA_TOOL_OPTIONS PYSPARK_PYTHON="$VENV/bin/python" PYSPARK_DRIVER_PYTHON="$VENV/bin/python" \
  SPARK_LOCAL_IP=127.0.0.1 SPARK_LOCAL_HOSTNAME=localhost \
  "$VENV/bin/spark-submit" --master 'local[2]' --conf spark.ui.enabled=false \
  --driver-java-options "-XX:ArchiveClassesAtExit=$tmp -Xlog:cds*=warning" \
  hack/jvm-archive/warmup.py >"$tmp.log" 2>&1 || {
  echo "jvm-archive: the warm-up failed; its log:" >&2
  tail -40 "$tmp.log" >&2
  exit 1
}
[[ -s $tmp ]] || { echo "jvm-archive: the JVM wrote no archive at $tmp" >&2; exit 1; }
mv "$tmp" "$archive"
echo "jvm-archive: $archive ($(du -m "$archive" | cut -f1) MiB)"
