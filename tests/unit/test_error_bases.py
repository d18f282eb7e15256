"""One exception base per package (docs/architecture.md): every error class a package defines
derives from its base, so a caller can catch a whole layer's failures at once."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

from app.errors import AppError
from contracts.errors import ContractError
from controller.errors import ControllerError
from operators.errors import OperatorsError

BASES = {"app": AppError, "contracts": ContractError, "controller": ControllerError,
         "operators": OperatorsError}


def _modules(package: str) -> list[object]:
    pkg = importlib.import_module(package)
    out = [pkg]
    for info in pkgutil.walk_packages(pkg.__path__, prefix=f"{package}."):
        try:
            out.append(importlib.import_module(info.name))
        except ImportError as e:  # a module needing pyspark/kafka when they are absent
            if e.name and e.name.split(".")[0] in ("pyspark", "pyarrow", "confluent_kafka"):
                continue
            raise
    return out


@pytest.mark.parametrize("package", sorted(BASES))
def test_every_error_class_derives_from_its_package_base(package: str) -> None:
    base = BASES[package]
    strays = sorted(
        f"{obj.__module__}.{name}"
        for module in _modules(package)
        for name, obj in vars(module).items()
        if inspect.isclass(obj) and issubclass(obj, Exception)
        and obj.__module__.split(".")[0] == package and not issubclass(obj, base)
    )
    assert strays == [], f"{package}: derive these from {base.__name__}: {strays}"


def test_the_demo_defaults_are_files_of_this_repository() -> None:
    """`make demo` runs with no arguments: its defaults must resolve from app/ to the repo."""
    from app.demo import DEFAULT_JOB, DEFAULT_POLICY, DEFAULT_TRACE

    assert DEFAULT_JOB.is_file() and DEFAULT_POLICY.is_file() and DEFAULT_TRACE.is_file()
