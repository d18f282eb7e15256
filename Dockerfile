# syntax=docker/dockerfile:1.7
# One image for the controller (`stream-autoscaler controller`) and the Spark drivers' runner
# (`stream-autoscaler runner --job ...`): Python 3.11, Java 17 JRE, PySpark and the project.
#   docker build -t stream-autoscaler:dev .        (hack/kind/load-image.sh does this)
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

# --- build: a virtualenv with the project and its Spark extra ---------------------------------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
RUN python -m venv /opt/venv && /opt/venv/bin/pip install --upgrade pip setuptools wheel
# Dependencies first, so a source change does not re-download PySpark.
COPY pyproject.toml README.md ./
COPY app/__init__.py app/__init__.py
COPY contracts/__init__.py contracts/__init__.py
COPY controller/__init__.py controller/__init__.py
COPY operators/__init__.py operators/__init__.py
RUN /opt/venv/bin/pip install ".[spark]" && /opt/venv/bin/pip uninstall -y stream-autoscaler
COPY app ./app
COPY contracts ./contracts
COPY controller ./controller
COPY operators ./operators
RUN /opt/venv/bin/pip install --no-deps . && /opt/venv/bin/python -m compileall -q /opt/venv

# --- runtime ----------------------------------------------------------------------------------
FROM ${PYTHON_IMAGE} AS runtime
RUN apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless tini procps \
 && rm -rf /var/lib/apt/lists/* \
 && ln -s "$(dirname "$(dirname "$(readlink -f "$(command -v java)")")")" /opt/java \
 && groupadd --gid 10001 app \
 && useradd --uid 10001 --gid app --home-dir /home/app --create-home --shell /usr/sbin/nologin app \
 && install -d -o app -g app /var/lib/stream-autoscaler
COPY --from=build /opt/venv /opt/venv
COPY policies /opt/stream-autoscaler/policies
COPY traces /opt/stream-autoscaler/traces
ENV PATH=/opt/venv/bin:$PATH \
    JAVA_HOME=/opt/java \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    SPARK_LOCAL_DIRS=/tmp
WORKDIR /home/app
USER 10001:10001
# 8080: controller /healthz; 9090: Prometheus /metrics.
EXPOSE 8080 9090
ENTRYPOINT ["/usr/bin/tini", "--", "stream-autoscaler"]
CMD ["--help"]
