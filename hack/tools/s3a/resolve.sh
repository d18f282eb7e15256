#!/usr/bin/env bash
# Cache outside the work tree what a Spark checkpoint on s3a:// needs against a local S3 server:
#   $cache/hadoop-aws-<HADOOP_AWS_VERSION>/  hadoop-aws, the AWS SDK v2 modules S3A uses, the
#                                            analytics accelerator, wildfly-openssl and
#                                            spark-hadoop-cloud (Spark's object-store checkpoint
#                                            file manager), for spark.jars by local path
#                                            (operators/s3a.py)
#   $cache/moto-<MOTO_VERSION>/              a virtualenv with moto[server] from PyPI, the local
#                                            S3 server of the tests (hack/testbed/testbed_s3.py)
# $cache = $SA_S3A_CACHE or ~/.cache/stream-autoscaler/s3a. Maven does the dependency resolution
# (`dependency:copy-dependencies` on pom.xml) with strict checksums against Central's .sha1 files,
# into its own local repository under $cache/m2 (not the Kafka one: two work trees may resolve
# Kafka and S3A at once, and each cache has its own lock), through hack/tools/kafka/settings.xml
# (every repository is Central). Measured: 38 jars, 13 MB in 2-4 s cold; moto's venv 22 s cold;
# a warm run reads two stamps.
# A group is rebuilt only when its stamp changes: the jars' hashes pom.xml, versions.env's
# KEY=value lines and settings.xml (a comment edit resolves nothing); the venv's hashes
# MOTO_VERSION and the interpreter. `make tools` (hack/tools/build.sh) calls this.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"
settings="$here/../kafka/settings.xml"
cache=${SA_S3A_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/stream-autoscaler/s3a}
python=${PYTHON:-python3}
in_ci() { case "${CI:-}" in 1 | true | TRUE | yes) return 0 ;; esac; return 1; }

mkdir -p "$cache"
exec 8>"$cache/.resolve.lock"
flock 8

# resolve_jars <dir>: hadoop-aws and the SDK modules into <dir>, unless its stamp is current.
resolve_jars() {
  local dir=$1 stamp tmp f start=$SECONDS missing="" leaked=""
  stamp=$(cat "$here/pom.xml" <(grep -v '^[[:space:]]*#' "$here/versions.env") "$settings" |
    sha256sum | cut -c1-16)
  if [[ -f "$dir/.stamp" && "$(cat "$dir/.stamp")" == "$stamp" ]]; then
    echo "s3a: hadoop-aws jars up to date ($dir)"
    return
  fi
  # hack/tools/kafka/resolve.sh (run before this by build.sh) installs Debian's maven if missing.
  command -v java >/dev/null 2>&1 || missing+=" java"
  command -v mvn >/dev/null 2>&1 || missing+=" mvn (Debian: apt-get install maven)"
  if [[ -n "$missing" ]]; then
    echo "s3a: cannot resolve the hadoop-aws jars, missing:$missing" >&2
    in_ci && exit 1
    echo "s3a: skipping the jars; the S3 test tier will be skipped" >&2
    return
  fi
  echo "s3a: resolving hadoop-aws $HADOOP_AWS_VERSION + AWS SDK $AWS_SDK_VERSION from Maven Central ..."
  tmp=$(mktemp -d "$cache/.resolve-jars.XXXXXX")
  MAVEN_OPTS="${MAVEN_OPTS:-} -Djansi.passthrough=false -Dstyle.color=never" mvn -B -q -U --strict-checksums \
    -s "$settings" -f "$here/pom.xml" "-Dmaven.repo.local=$cache/m2" \
    "-Dhadoop.aws.version=$HADOOP_AWS_VERSION" "-Daws.sdk.version=$AWS_SDK_VERSION" \
    "-Danalytics.accelerator.version=$ANALYTICS_ACCELERATOR_VERSION" \
    "-Dspark.hadoop.cloud.version=$SPARK_HADOOP_CLOUD_VERSION" \
    org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies \
    -DoutputDirectory="$tmp" -DincludeScope=runtime
  if ! compgen -G "$tmp/hadoop-aws-$HADOOP_AWS_VERSION.jar" >/dev/null; then
    echo "s3a: Maven copied no hadoop-aws-$HADOOP_AWS_VERSION.jar" >&2
    exit 1
  fi
  # The pom excludes what pyspark ships; a jar of these families here would be a second copy of
  # its classes on the classpath (another version of a transitive dependency slipped through).
  for f in "$tmp"/*.jar; do
    case ${f##*/} in
      netty-nio-client-*) ;; # the SDK's, not io.netty's
      netty-* | httpclient-* | httpcore-* | commons-codec-* | commons-logging-* | slf4j-* | \
        jackson-* | hadoop-common-* | hadoop-client-* | bundle-*) leaked+=" ${f##*/}" ;;
    esac
  done
  if [[ -n "$leaked" ]]; then
    echo "s3a: pom.xml lets through jars pyspark already ships:$leaked" >&2
    exit 1
  fi
  echo "$stamp" >"$tmp/.stamp"
  rm -rf "$dir"
  mv "$tmp" "$dir"
  echo "s3a: hadoop-aws: $(find "$dir" -name '*.jar' | wc -l) jars, $(du -sm "$dir" | cut -f1) MB in $((SECONDS - start)) s ($dir)"
}

# build_moto <dir>: a virtualenv with moto[server]==MOTO_VERSION, unless its stamp is current.
build_moto() {
  local dir=$1 stamp tmp f start=$SECONDS
  if ! "$python" -c 'import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 9))' 2>/dev/null; then
    echo "s3a: $python cannot make a virtualenv for moto (needs >= 3.9 with venv and ensurepip;" \
      "Debian: apt-get install python3-venv)" >&2
    in_ci && exit 1
    echo "s3a: skipping moto; the S3 test tier will be skipped" >&2
    return
  fi
  stamp=$({ echo "moto[server]==$MOTO_VERSION"; "$python" -c 'import sys; print(sys.executable, sys.version)'; } |
    sha256sum | cut -c1-16)
  if [[ -f "$dir/.stamp" && "$(cat "$dir/.stamp")" == "$stamp" ]]; then
    echo "s3a: moto $MOTO_VERSION up to date ($dir)"
    return
  fi
  echo "s3a: installing moto[server]==$MOTO_VERSION from PyPI into a virtualenv ..."
  tmp=$(mktemp -d "$cache/.build-moto.XXXXXX")
  "$python" -m venv "$tmp"
  "$tmp/bin/python" -m pip install -q --disable-pip-version-check --no-input "moto[server]==$MOTO_VERSION"
  # pip writes the venv's absolute path into the scripts' #! lines (and activate): point them at
  # where the venv will live, so the rename below leaves a working moto_server. The interpreter
  # itself finds its prefix from pyvenv.cfg next to it, wherever the directory is.
  for f in "$tmp"/bin/* "$tmp/pyvenv.cfg"; do
    if [[ -f "$f" && ! -L "$f" ]] && grep -qIF "$tmp" "$f"; then
      sed -i "s|$tmp|$dir|g" "$f"
    fi
  done
  echo "$stamp" >"$tmp/.stamp"
  rm -rf "$dir"
  mv "$tmp" "$dir"
  if ! "$dir/bin/moto_server" --help >/dev/null; then
    echo "s3a: $dir/bin/moto_server does not run" >&2
    rm -rf "$dir"
    exit 1
  fi
  echo "s3a: moto $MOTO_VERSION in $((SECONDS - start)) s ($dir)"
}

resolve_jars "$cache/hadoop-aws-$HADOOP_AWS_VERSION"
build_moto "$cache/moto-$MOTO_VERSION"
