"""Fixtures of the S3 tier: a local S3-compatible server (moto, hack/testbed/testbed_s3.py) for
the whole folder; the runners the tests start put hadoop-aws and the AWS SDK jars `make tools`
resolved on spark.jars themselves (operators.query.session.s3a_jars_for).

Without Java, pyspark, the moto virtualenv or the jars the tests skip locally (naming the command
that installs them) and FAIL in CI (``CI=true``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.realcomponents import require_spark, unavailable


@pytest.fixture(scope="package")
def s3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The running server (a ``testbed_s3.S3Server``). Its test keys are in the environment for
    the whole tier: S3A's default credential chain reads AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY,
    and the Spark drivers the tests start inherit them."""
    require_spark()
    import testbed_s3

    from operators.s3a import s3a_jars

    try:
        s3a_jars()
        testbed_s3.moto_server()
    except (ValueError, testbed_s3.S3Missing) as e:
        unavailable(str(e))
    logs = tmp_path_factory.mktemp("s3")
    with testbed_s3.s3_server(log_dir=logs) as server, pytest.MonkeyPatch.context() as env:
        for key, value in server.env.items():
            env.setenv(key, value)
        yield server
