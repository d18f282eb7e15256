#!/usr/bin/env bash
# What `make tools` fetches besides its Go builds: the Kafka broker's and Spark's Kafka
# connector's jars, the S3A jars and moto (each cached; seconds when nothing changed).
# hack/prepare.sh runs it beside the compile (SA_TOOLS_JARS=0 there).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
"$here/kafka/resolve.sh"
# after Kafka's: that one installs Maven when missing
"$here/s3a/resolve.sh"
