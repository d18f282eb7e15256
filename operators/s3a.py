"""S3A: a checkpoint (or any path) on ``s3a://`` against an S3-compatible endpoint.

pyspark ships Hadoop's shaded client (hadoop-client-api/-runtime 3.5.0 in pyspark 4.3.0) but not
hadoop-aws nor the AWS SDK. ``hack/tools/s3a/resolve.sh`` resolves hadoop-aws of that same
version and the AWS SDK v2 modules S3A uses (~13 MB, instead of the SDK's 686 MB ``bundle``)
into ``~/.cache/stream-autoscaler/s3a/hadoop-aws-<version>/``; :func:`s3a_jars` finds them for
``spark.jars`` (``STREAM_AUTOSCALER_S3A_JARS``, a directory or comma-separated paths, wins;
:mod:`operators.jars`).
:func:`hadoop_s3a_conf` is the Spark conf for one endpoint. Credentials are not in it: S3A's
default provider chain reads ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` from the
environment (of the driver and of every executor), so secrets stay out of Spark's conf and UI.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from operators.jars import JarSet

JARS_ENV = "STREAM_AUTOSCALER_S3A_JARS"
HADOOP_AWS_VERSION = "3.5.0"
"""org.apache.hadoop:hadoop-aws, whose jars :func:`s3a_jars` looks for in the cache. The same
value as ``HADOOP_AWS_VERSION`` in hack/tools/s3a/versions.env, which resolves them (a unit test
holds the two equal). It must equal pyspark's hadoop-client-api version: hadoop-aws is built
against that exact hadoop-common."""
S3A_JARS = JarSet(
    what="hadoop-aws and the AWS SDK jars", env=JARS_ENV, cache_env="SA_S3A_CACHE",
    cache_name="s3a", dirname=f"hadoop-aws-{HADOOP_AWS_VERSION}",
    script="hack/tools/s3a/resolve.sh",
)


def s3a_jars() -> list[str]:
    """Local paths of hadoop-aws and the AWS SDK jars for ``spark.jars``; ValueError if they are
    not resolved."""
    return S3A_JARS.paths()


def hadoop_s3a_conf(
    endpoint: str, *, region: str = "us-east-1", path_style: bool = True
) -> dict[str, str]:
    """The ``spark.hadoop.fs.s3a.*`` settings for an S3 endpoint URL (``http://host:port`` or
    ``https://...``): TLS iff https. ``path_style``: buckets as the URL's first path segment
    (``http://host:port/bucket/key``), what local servers (moto, MinIO) answer without a DNS
    name per bucket. The region is still needed: SDK v2 signs with one and does not guess it
    for an endpoint that is not AWS's."""
    url = urlsplit(endpoint)
    if url.scheme not in ("http", "https") or not url.hostname:
        raise ValueError(f"S3 endpoint {endpoint!r} is not an http:// or https:// URL")
    return {
        "spark.hadoop.fs.s3a.endpoint": endpoint.rstrip("/"),
        "spark.hadoop.fs.s3a.endpoint.region": region,
        "spark.hadoop.fs.s3a.path.style.access": str(path_style).lower(),
        "spark.hadoop.fs.s3a.connection.ssl.enabled": str(url.scheme == "https").lower(),
    }
