"""The CRDs and JSON Schemas are generated from the models; stale copies fail here."""

from __future__ import annotations

from contracts import crds


def test_generated_files_are_fresh() -> None:
    stale = crds.stale()
    assert stale == [], f"run `python -m contracts.crds` ({[p.name for p in stale]})"


def test_streamjob_crd_has_the_contract_columns_and_subresource() -> None:
    crd = crds.crds()["streamjobs.yaml"]
    version = crd["spec"]["versions"][0]
    names = [c["name"].upper() for c in version["additionalPrinterColumns"]]
    for col in ("PHASE", "EXECUTORS", "PARTITIONS", "INPUT/S", "PROCESSED/S", "LAG", "BOTTLENECK"):
        assert col in names
    assert names[-1] == "AGE"
    assert version["subresources"] == {"status": {}}
    assert crd["spec"]["names"]["shortNames"] == ["sj"]


def test_policy_crd_carries_cel_for_cross_field_rules() -> None:
    spec = crds.crds()["scalingpolicies.yaml"]["spec"]["versions"][0]["schema"]
    executors = spec["openAPIV3Schema"]["properties"]["spec"]["properties"]["executors"]
    rules = [r["rule"] for r in executors["x-kubernetes-validations"]]
    assert "self.min <= self.max" in rules
