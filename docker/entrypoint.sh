#!/bin/bash
# The image's entrypoint (under tini, PID 1). Spark on Kubernetes starts its pods with the
# container args `driver ...` or `executor` and SPARK_* env, the way Spark's own image entrypoint
# (resource-managers/kubernetes/docker/.../entrypoint.sh) dispatches them; anything else is our
# CLI: `stream-autoscaler "$@"`.
#   driver    -> spark-submit --deploy-mode client --conf spark.driver.bindAddress=... "$@"
#   executor  -> java ... org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend
# Spark comes from the pyspark installation in the image's virtualenv (its jars/ directory).
set -euo pipefail

fail() {
  echo "entrypoint: $*" >&2
  exit 64
}

spark_home() {
  if [[ -z "${SPARK_HOME:-}" ]]; then
    SPARK_HOME=$(python -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))') ||
      fail "pyspark is not installed in this image (python: $(command -v python || echo none))"
    export SPARK_HOME
  fi
  [[ -d "$SPARK_HOME/jars" ]] || fail "no Spark jars in $SPARK_HOME/jars"
}

# Spark's own image runs under an arbitrary uid too: give it a passwd entry when it has none
# (the JVM and Hadoop's UserGroupInformation look the user up).
passwd_entry() {
  local uid
  uid=$(id -u)
  if ! getent passwd "$uid" >/dev/null && [[ -w /etc/passwd ]]; then
    echo "$uid:x:$uid:$(id -g):${SPARK_USER_NAME:-anonymous uid}:${HOME:-/tmp}:/bin/false" >>/etc/passwd
  fi
}

# The executor's class path starts with the driver's (Spark's launcher's: its conf directory,
# absent here, and pyspark's jars), which the image's class archive was dumped on: a JVM maps the
# archive only when its class path starts with the same jars, and an existing directory (the conf
# directory Spark on Kubernetes mounts) before them makes it refuse. Spark's own entrypoint puts
# SPARK_CLASSPATH and the conf directories first; here they follow the jars, which hold none of
# their files (Hadoop's core-default.xml aside, which a conf directory's core-site.xml
# overrides by name), and a StreamJob cannot set a class path (contracts/spark.py).
classpath() {
  local cp entry
  if [[ -s /opt/stream-autoscaler/spark-classpath ]]; then
    cp=$(</opt/stream-autoscaler/spark-classpath)
  else
    cp="$SPARK_HOME/conf:$SPARK_HOME/jars/*"
  fi
  for entry in "${SPARK_CONF_DIR:-}" "${HADOOP_CONF_DIR:-}" "${SPARK_CLASSPATH:-}" \
    "${SPARK_EXTRA_CLASSPATH:-}" "${SPARK_DIST_CLASSPATH:-}"; do
    [[ -n $entry ]] && cp="$cp:$entry"
  done
  printf '%s' "$cp"
}

require_env() { # command, then the variables it cannot do without
  local cmd=$1 missing=() name
  shift
  for name in "$@"; do
    [[ -n "${!name:-}" ]] || missing+=("$name")
  done
  if ((${#missing[@]})); then
    fail "'$cmd' needs the environment Spark on Kubernetes sets on its pods; missing:" \
      "${missing[*]} (was this container started by Spark on Kubernetes?)"
  fi
}

case "${1:-}" in
  driver)
    shift
    require_env driver SPARK_DRIVER_BIND_ADDRESS
    spark_home
    passwd_entry
    exec "$SPARK_HOME/bin/spark-submit" \
      --conf "spark.driver.bindAddress=$SPARK_DRIVER_BIND_ADDRESS" \
      --deploy-mode client \
      "$@"
    ;;
  executor)
    shift
    require_env executor SPARK_DRIVER_URL SPARK_EXECUTOR_ID SPARK_EXECUTOR_CORES SPARK_APPLICATION_ID \
      SPARK_EXECUTOR_POD_IP SPARK_EXECUTOR_MEMORY
    spark_home
    passwd_entry
    # SPARK_JAVA_OPT_0, _1, ... in numeric order, one option each.
    java_opts=()
    while IFS= read -r opt; do
      java_opts+=("$opt")
    done < <(env | grep '^SPARK_JAVA_OPT_' | sort -t_ -k4 -n | sed 's/^[^=]*=//')
    # An RPC secret from a file (spark.authenticate.secret.file, the controller's setting) is
    # read only where spark.master names Kubernetes (SecurityManager.secretKeyFromFile), and the
    # master is not among the settings Spark starts an executor with: without it the executor
    # cannot authenticate to fetch the rest (every story in tests/integration/node runs one).
    if [[ " ${java_opts[*]} " == *" -Dspark.authenticate.secret.file="* &&
      " ${java_opts[*]} " != *" -Dspark.master="* ]]; then
      java_opts+=("-Dspark.master=k8s://https://kubernetes.default.svc")
    fi
    java=${JAVA_HOME:+$JAVA_HOME/bin/}java
    exec "$java" "${java_opts[@]}" \
      "-Xms$SPARK_EXECUTOR_MEMORY" "-Xmx$SPARK_EXECUTOR_MEMORY" \
      -cp "$(classpath)" \
      org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend \
      --driver-url "$SPARK_DRIVER_URL" \
      --executor-id "$SPARK_EXECUTOR_ID" \
      --cores "$SPARK_EXECUTOR_CORES" \
      --app-id "$SPARK_APPLICATION_ID" \
      --hostname "$SPARK_EXECUTOR_POD_IP" \
      --resourceProfileId "${SPARK_RESOURCE_PROFILE_ID:-0}" \
      --podName "${SPARK_EXECUTOR_POD_NAME:-$(hostname)}"
    ;;
  *)
    exec stream-autoscaler "$@"
    ;;
esac
