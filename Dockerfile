# One image for the controller (`stream-autoscaler controller`), the Spark drivers' runner
# (`stream-autoscaler runner --job ...`) and Spark on Kubernetes' executor pods (container args
# `executor`, see docker/entrypoint.sh): Python 3.11, Java 17 JRE, PySpark, Spark's Kafka
# connector, S3A (hadoop-aws, AWS SDK) and the project.
#   docker build -t stream-autoscaler:dev .        (hack/kind/load-image.sh does this)
#   make image      (hack/image/build.sh: the same file on a debootstrap'd Debian base, no registry)
# No `# syntax=` line: it would pull a frontend image from Docker Hub; the builtin BuildKit
# frontend (Docker >= 20.10) has everything used here, RUN --mount=type=secret included.
# A build that must trust a TLS-intercepting proxy passes its CA bundle as the BuildKit secret
# `ca-bundle`; it is mounted only during the pip runs and never written to a layer.
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

# --- build: a virtualenv with the project and its Spark extra ---------------------------------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
RUN --mount=type=secret,id=ca-bundle \
    if [ -s /run/secrets/ca-bundle ]; then export PIP_CERT=/run/secrets/ca-bundle; fi \
 && python -m venv /opt/venv && /opt/venv/bin/pip install --upgrade pip setuptools wheel
# Dependencies first, so a source change does not re-download PySpark.
COPY pyproject.toml README.md ./
COPY app/__init__.py app/__init__.py
COPY contracts/__init__.py contracts/__init__.py
COPY controller/__init__.py controller/__init__.py
COPY operators/__init__.py operators/__init__.py
RUN --mount=type=secret,id=ca-bundle \
    if [ -s /run/secrets/ca-bundle ]; then export PIP_CERT=/run/secrets/ca-bundle; fi \
 && /opt/venv/bin/pip install ".[spark]" && /opt/venv/bin/pip uninstall -y stream-autoscaler
COPY app ./app
COPY contracts ./contracts
COPY controller ./controller
COPY operators ./operators
RUN --mount=type=secret,id=ca-bundle \
    if [ -s /run/secrets/ca-bundle ]; then export PIP_CERT=/run/secrets/ca-bundle; fi \
 && /opt/venv/bin/pip install --no-deps . && /opt/venv/bin/python -m compileall -q /opt/venv

# --- connector: Spark's Kafka connector and S3A from Maven Central, each jar's SHA-256 pinned ----
# A user's Kafka job needs the connector, a job checkpointed on s3a:// needs hadoop-aws and the
# AWS SDK (13 MB), in the driver and executor pods, which have no registry to fetch `--packages`
# from. The runner puts each directory on spark.jars when the job needs it
# (STREAM_AUTOSCALER_KAFKA_JARS, STREAM_AUTOSCALER_S3A_JARS).
FROM ${PYTHON_IMAGE} AS connector
COPY docker/spark-kafka-jars.txt docker/s3a-jars.txt docker/fetch_jars.py /tmp/
RUN --mount=type=secret,id=ca-bundle \
    if [ -s /run/secrets/ca-bundle ]; then export SSL_CERT_FILE=/run/secrets/ca-bundle; fi \
 && python /tmp/fetch_jars.py /tmp/spark-kafka-jars.txt /opt/jars/kafka \
 && python /tmp/fetch_jars.py /tmp/s3a-jars.txt /opt/jars/s3a

# --- runtime ----------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS runtime
# python:3.11-slim lacks Java, tini and ps; the debootstrap base of hack/image/build.sh has them.
RUN if ! command -v java >/dev/null || ! [ -x /usr/bin/tini ] || ! command -v ps >/dev/null; then \
      apt-get update \
      && apt-get install -y --no-install-recommends openjdk-17-jre-headless tini procps \
      && rm -rf /var/lib/apt/lists/*; \
    fi \
 && ln -s "$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")" /opt/java \
 && groupadd --gid 10001 app \
 && useradd --uid 10001 --gid app --home-dir /home/app --create-home --shell /usr/sbin/nologin app \
 && install -d -o app -g app /var/lib/stream-autoscaler
COPY --from=build /opt/venv /opt/venv
COPY --from=connector /opt/jars /opt/stream-autoscaler/jars
COPY policies /opt/stream-autoscaler/policies
COPY traces /opt/stream-autoscaler/traces
COPY examples /opt/stream-autoscaler/examples
COPY docker/entrypoint.sh /usr/local/bin/entrypoint.sh
ENV PATH=/opt/venv/bin:$PATH \
    STREAM_AUTOSCALER_KAFKA_JARS=/opt/stream-autoscaler/jars/kafka \
    STREAM_AUTOSCALER_S3A_JARS=/opt/stream-autoscaler/jars/s3a \
    JAVA_HOME=/opt/java \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    SPARK_LOCAL_DIRS=/tmp \
    STREAM_AUTOSCALER_JVM_ARCHIVE=/opt/stream-autoscaler/spark-classes.jsa
# A class-data-sharing archive of the classes a Spark driver loads (the lanes' one, built here on
# the image's own jars: hack/jvm-archive/warmup.py's query in local mode, dumped as its driver
# exits). The runner gives it to the driver's and executors' JVMs (spark.{driver,executor}.
# defaultJavaOptions, operators/query/session.py::jvm_archive_conf), which then map those classes
# instead of reading and verifying them from the jars at every pod start. A JVM maps it only on a
# class path that starts with the driver's: that string is kept beside it for the executors'
# entrypoint, and the build fails if the JVM refuses the archive on it.
COPY hack/jvm-archive/warmup.py /tmp/jvm-archive-warmup.py
RUN cd /tmp && SPARK_LOCAL_IP=127.0.0.1 SPARK_LOCAL_HOSTNAME=localhost \
      PYSPARK_PYTHON=/opt/venv/bin/python PYSPARK_DRIVER_PYTHON=/opt/venv/bin/python \
      timeout 600 spark-submit --master 'local[2]' --conf spark.ui.enabled=false \
      --driver-java-options "-XX:ArchiveClassesAtExit=$STREAM_AUTOSCALER_JVM_ARCHIVE" \
      /tmp/jvm-archive-warmup.py >/tmp/jvm-archive.log 2>&1 \
      || { tail -40 /tmp/jvm-archive.log; exit 1; } \
 && SPARK_PRINT_LAUNCH_COMMAND=1 spark-submit --version 2>&1 \
      | sed -n 's/^Spark Command: .* -cp \([^ ]*\) .*/\1/p' | head -1 >/opt/stream-autoscaler/spark-classpath \
 && test -s /opt/stream-autoscaler/spark-classpath \
 && java -Xshare:on -XX:SharedArchiveFile="$STREAM_AUTOSCALER_JVM_ARCHIVE" \
      -cp "$(cat /opt/stream-autoscaler/spark-classpath)" -version \
 && chmod a+r "$STREAM_AUTOSCALER_JVM_ARCHIVE" /opt/stream-autoscaler/spark-classpath \
 && rm -rf /tmp/jvm-archive-warmup.py /tmp/jvm-archive.log /tmp/spark-* /tmp/hsperfdata_* /tmp/jvm-archive-*
WORKDIR /home/app
USER 10001:10001
# 8080: controller /healthz; 9090: Prometheus /metrics.
EXPOSE 8080 9090
# tini stays PID 1; the entrypoint dispatches `driver`/`executor` to Spark, anything else to the CLI.
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/entrypoint.sh"]
CMD ["--help"]
