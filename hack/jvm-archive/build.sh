#!/usr/bin/env bash
# A class-data-sharing archive of the classes a Spark driver loads, for this venv's Spark JVMs
# (built by hack/prepare.sh and `make jvm-archive`, which `make demo` runs; the figures:
# docs/benchmark.md, the JVM class archive).
#
# Every Spark JVM of this venv (SparkSubmit, the standalone master, workers and executors) runs
# on one class path, $SPARK_HOME/conf:jars/*; a JVM started with -XX:SharedArchiveFile maps the
# archived classes instead of reading, parsing and verifying them from the jars again. A local
# run gives it to its driver, executors and mini-cluster (operators/query/cluster.py::jvm_archive
# finds it at the default path below); hack/test.sh gives it to every JVM of the lanes; a JVM on
# another class path (the Kafka broker, Spark's launcher) logs that it cannot use it (silenced
# there) and runs as before.
#
# One archive per machine and PySpark build, not per venv. The JVM accepts an archive only on
# the files it was dumped from: the same path, or another path to the same file (the same inode:
# a hard link; a copy with the same bytes is refused). Each venv's pip install writes its own
# copy of PySpark's jars, so the venv's jars are replaced by hard links into one copy kept in
# ~/.cache/stream-autoscaler/jvm-archive/<key>/home/jars, and the archive is dumped there, on
# that copy's paths, which outlive the clone. The next venv links the same files, and the
# archive is checked (`java -Xshare:on ... -version` on Spark's own class path, which fails on a
# mismatch) before it is used; where links cannot be made (another file system) or the check
# fails, the archive is dumped for this venv alone, as before.
# The dump: the lanes' typical query under spark-submit (warmup.py); it happens as its JVM
# exits, before spark-submit returns.
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV=${VENV:-.venv}
archive=${JVM_ARCHIVE:-$VENV/share/stream-autoscaler/spark-classes.jsa}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/stream-autoscaler/jvm-archive
spark_home=$("$VENV/bin/python" -c 'from operators.query.cluster import spark_home; print(spark_home())')
java_bin=$(readlink -f "$(command -v java)")
if [[ -s $archive && $archive -nt $spark_home/jars && $archive -nt $java_bin ]]; then
  echo "jvm-archive: $archive is up to date"
  exit 0
fi
mkdir -p "$(dirname "$archive")"

# What the archive depends on: the jars (a PySpark version's are fixed: names and sizes stand for
# their bytes), the JVM, and what is dumped (this directory).
key=$({
  "$VENV/bin/python" -c 'import pyspark; print(pyspark.__version__)'
  (cd "$spark_home/jars" && find . -maxdepth 1 -name '*.jar' -printf '%f %s\n' | LC_ALL=C sort)
  echo "$java_bin $(stat -c %Y "$java_bin")"
  cat hack/jvm-archive/build.sh hack/jvm-archive/warmup.py
} | sha256sum | cut -c1-16)
shared=$cache/$key

# Spark's launcher's class path for a SPARK_HOME (the exact string its JVMs get).
class_path() { # spark_home
  SPARK_HOME=$1 SPARK_PRINT_LAUNCH_COMMAND=1 "$VENV/bin/spark-submit" --version 2>&1 |
    sed -n 's/^Spark Command: .* -cp \([^ ]*\) .*/\1/p' | head -1
}
valid_on() { # archive, class path: the JVM maps it or refuses
  [[ -s $1 && -n $2 ]] && env -u JAVA_TOOL_OPTIONS java -Xshare:on -XX:SharedArchiveFile="$1" \
    -cp "$2" -version >/dev/null 2>&1
}
# The venv's jars as hard links of the machine's copy (made from this venv's on first use).
link_jars() {
  local jar
  mkdir -p "$cache"
  if [[ ! -d $shared/home/jars ]]; then
    rm -rf "$shared.tmp.$$"
    mkdir -p "$shared.tmp.$$/home"
    if cp -al "$spark_home/jars" "$shared.tmp.$$/home/jars" 2>/dev/null &&
      cp -al "$spark_home/bin" "$shared.tmp.$$/home/bin" 2>/dev/null &&
      mv -T "$shared.tmp.$$" "$shared" 2>/dev/null; then
      return 0 # the venv's files are the copy
    fi
    rm -rf "$shared.tmp.$$"
    [[ -d $shared/home/jars ]] || return 1 # else another prepare made it meanwhile: link to it
  fi
  for jar in "$spark_home"/jars/*.jar; do
    ln -f "$shared/home/jars/${jar##*/}" "$jar" 2>/dev/null || return 1
  done
}

shared_ok=false
if link_jars; then
  shared_ok=true
  if valid_on "$shared/spark-classes.jsa" "$(class_path "$spark_home")"; then
    ln -f "$shared/spark-classes.jsa" "$archive"
    touch "$archive"
    echo "jvm-archive: $archive: the machine's archive for these jars ($shared)"
    exit 0
  fi
fi

tmp="$archive.tmp.$$"
trap 'rm -f "$tmp" "$tmp.log"' EXIT
dump_home=$spark_home
$shared_ok && dump_home=$shared/home
# The archive holds no heap objects, so the JIT and collector flags need not match: one dumped
# with the JVM's defaults serves the lanes' C1 and serial-collector JVMs (11.7k classes mapped).
# Bounded: a warm-up stuck in Spark fails prepare after 5 minutes instead of hanging it.
timeout 300 env -u JAVA_TOOL_OPTIONS SPARK_HOME="$dump_home" \
  PYSPARK_PYTHON="$VENV/bin/python" PYSPARK_DRIVER_PYTHON="$VENV/bin/python" \
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
if ! valid_on "$archive" "$(class_path "$spark_home")"; then
  rm -f "$archive"
  echo "jvm-archive: the JVM refuses the archive dumped on $dump_home for this venv's class path; the lanes' JVMs start without it" >&2
elif $shared_ok; then
  ln -f "$archive" "$shared/spark-classes.jsa"
  # older PySpark builds' copies (~0.6 GB each with their jars) are dead weight: the newest two stay
  find "$cache" -mindepth 1 -maxdepth 1 -type d ! -name "$key" -printf '%T@ %p\n' | sort -rn |
    tail -n +2 | cut -d' ' -f2- | xargs -r rm -rf
  echo "jvm-archive: $archive ($(du -m "$archive" | cut -f1) MiB), kept for the machine in $shared"
else
  echo "jvm-archive: $archive ($(du -m "$archive" | cut -f1) MiB), for this venv only"
fi
