#!/usr/bin/env bash
# Resolve the Kafka jars from Maven Central and cache them outside the work tree:
#   $cache/broker-<KAFKA_VERSION>/       the broker's classpath (kafka_2.13 + runtime deps + slf4j-simple)
#   $cache/spark-kafka-<SPARK_KAFKA_VERSION>/  spark-sql-kafka, token provider, kafka-clients,
#                                              commons-pool2 (for spark.jars, by local path)
# $cache = $SA_KAFKA_CACHE or ~/.cache/stream-autoscaler/kafka. Maven does the dependency
# resolution (`dependency:copy-dependencies` on broker-pom.xml / spark-pom.xml) with strict
# checksums against Central's .sha1 files, into its own local repository under $cache/m2;
# settings.xml sends every repository (Spark's parent pom names a GCS mirror) to Central.
# A group is resolved again only when its stamp changes (the pom, versions.env's KEY=value lines
# and settings.xml hashed; a comment edit resolves nothing): a warm run reads two files.
# `make tools` (hack/tools/build.sh) calls this.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
cache=${SA_KAFKA_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/stream-autoscaler/kafka}
in_ci() { case "${CI:-}" in 1 | true | TRUE | yes) return 0 ;; esac; return 1; }

# Maven from Debian when missing (as hack/setup-python.sh installs Java and Prometheus).
if ! command -v mvn >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1; then
  echo "kafka: installing Debian's maven package" >&2
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  { $SUDO apt-get update -qq &&
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends maven; } ||
    echo "kafka: could not install maven" >&2
fi
missing=""
command -v java >/dev/null 2>&1 || missing+=" java"
command -v mvn >/dev/null 2>&1 || missing+=" mvn (Debian: apt-get install maven)"
if [[ -n "$missing" ]]; then
  echo "kafka: cannot resolve the Kafka jars, missing:$missing" >&2
  in_ci && exit 1
  echo "kafka: skipping; the Kafka test tier will be skipped" >&2
  exit 0
fi

mkdir -p "$cache"
exec 8>"$cache/.resolve.lock"
flock 8

plugin=org.apache.maven.plugins:maven-dependency-plugin:3.8.1
props=(
  "-Dkafka.version=$KAFKA_VERSION" "-Dslf4j.version=$SLF4J_VERSION"
  "-Dspark.kafka.version=$SPARK_KAFKA_VERSION" "-Dkafka.clients.version=$KAFKA_CLIENTS_VERSION"
  "-Dcommons.pool2.version=$COMMONS_POOL2_VERSION"
  "-Dspark.token.provider.version=$SPARK_TOKEN_PROVIDER_VERSION"
)

# resolve <name> <dir> <pom> [extra mvn args]
resolve() {
  local name=$1 dir=$2 pom=$3; shift 3
  local stamp tmp start=$SECONDS
  stamp=$(cat "$here/$pom" <(grep -v '^[[:space:]]*#' "$here/versions.env") "$here/settings.xml" |
    sha256sum | cut -c1-16)
  if [[ -f "$dir/.stamp" && "$(cat "$dir/.stamp")" == "$stamp" ]]; then
    echo "kafka: $name up to date ($dir)"
    return
  fi
  echo "kafka: resolving $name from Maven Central ..."
  tmp=$(mktemp -d "$cache/.resolve-$name.XXXXXX")
  MAVEN_OPTS="${MAVEN_OPTS:-} -Djansi.passthrough=false -Dstyle.color=never" mvn -B -q -U --strict-checksums -s "$here/settings.xml" -f "$here/$pom" "-Dmaven.repo.local=$cache/m2" "${props[@]}" \
    "$plugin:copy-dependencies" -DoutputDirectory="$tmp" -DincludeScope=runtime "$@"
  if ! compgen -G "$tmp/*.jar" >/dev/null; then
    echo "kafka: $name: Maven copied no jars" >&2
    exit 1
  fi
  echo "$stamp" >"$tmp/.stamp"
  rm -rf "$dir"
  mv "$tmp" "$dir"
  echo "kafka: $name: $(find "$dir" -name '*.jar' | wc -l) jars in $((SECONDS - start)) s ($dir)"
}

resolve broker "$cache/broker-$KAFKA_VERSION" broker-pom.xml
resolve spark-kafka "$cache/spark-kafka-$SPARK_KAFKA_VERSION" spark-pom.xml
