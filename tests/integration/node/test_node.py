"""The test bed's real node: pods from stream-autoscaler:dev really run on it (containerd, runc,
kubelet), with CPU limits enforced by the kernel, cluster DNS, Services routed by kube-proxy, the
API server reachable with a ServiceAccount token; and nothing leaves the machine from the pod
network. The image's entrypoint dispatches Spark on Kubernetes' `executor`/`driver` args."""

from __future__ import annotations

import json
import subprocess
import tarfile
import time
from base64 import b64decode
from pathlib import Path

import pytest

from tests.integration.k8s.k8s_tier import Tool
from tests.integration.node.conftest import RealNode, run_pod, unique

IMAGE_JVM_ARCHIVE = "/opt/stream-autoscaler/spark-classes.jsa"
"""The image's class archive (the Dockerfile's ``STREAM_AUTOSCALER_JVM_ARCHIVE``)."""

pytestmark = pytest.mark.k8s


def test_the_real_node_is_ready_beside_the_kwok_nodes(kubectl: Tool, real_node: RealNode) -> None:
    nodes = {n["metadata"]["name"]: n for n in kubectl.json("get", "nodes")["items"]}
    assert {"kwok-node-0", "kwok-node-1", real_node.name} <= set(nodes)
    node = nodes[real_node.name]
    ready = {c["type"]: c["status"] for c in node["status"]["conditions"]}
    assert ready["Ready"] == "True", node["status"]["conditions"]
    info = node["status"]["nodeInfo"]
    assert info["containerRuntimeVersion"].startswith("containerd://")
    assert info["kubeletVersion"] == kubectl.json("version")["serverVersion"]["gitVersion"]
    # Tainted, so the kwok-bound pods of the other tiers never land on it.
    assert {t["key"] for t in node["spec"].get("taints", [])} == {real_node.taint_key}
    addresses = {a["type"]: a["address"] for a in node["status"]["addresses"]}
    assert addresses["InternalIP"] == real_node.ip


def test_a_pod_from_the_image_runs_to_completion(
    kubectl: Tool, real_node: RealNode, image: str, ns: str
) -> None:
    name = unique("cli")
    pod, logs = run_pod(
        kubectl,
        ns,
        real_node.pod(
            name,
            containers=[
                {"name": "cli", "image": image, "imagePullPolicy": "Never", "args": ["--help"]}
            ],
        ),
    )
    assert pod["spec"]["nodeName"] == real_node.name
    assert "usage: stream-autoscaler" in logs, logs
    state = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    assert state["exitCode"] == 0 and state["reason"] == "Completed"


CFS = """
import pathlib
v1 = pathlib.Path('/sys/fs/cgroup/cpu/cpu.cfs_quota_us')
v2 = pathlib.Path('/sys/fs/cgroup/cpu.max')
print(v1.read_text().strip() if v1.exists() else v2.read_text().split()[0])
"""


def test_a_cpu_limit_becomes_a_cfs_quota(
    kubectl: Tool, real_node: RealNode, image: str, ns: str
) -> None:
    container = {
        "name": "c",
        "image": image,
        "imagePullPolicy": "Never",
        "command": ["python", "-c", CFS],
        "resources": {"limits": {"cpu": "250m", "memory": "128Mi"}},
    }
    _, logs = run_pod(kubectl, ns, real_node.pod(unique("cfs"), containers=[container]))
    assert logs.strip() == "25000", logs  # 250m of a 100 ms period


CLIENT = """
import json, os, socket, ssl, urllib.request
ns, outside = os.environ["NS"], os.environ["OUTSIDE"]
sa = "/var/run/secrets/kubernetes.io/serviceaccount"
out = {"kubernetes": socket.gethostbyname("kubernetes.default.svc")}
ctx = ssl.create_default_context(cafile=sa + "/ca.crt")
token = open(sa + "/token").read()
body = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
review = urllib.request.Request(
    "https://kubernetes.default.svc/apis/authentication.k8s.io/v1/selfsubjectreviews",
    data=json.dumps(body).encode(),
    headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"},
)
answer = json.load(urllib.request.urlopen(review, context=ctx, timeout=10))
out["whoami"] = answer["status"]["userInfo"]["username"]
headless = socket.getaddrinfo(f"web-h.{ns}.svc.cluster.local", 8000, socket.AF_INET)
out["headless"] = sorted({a[4][0] for a in headless})
out["service_ip"] = socket.gethostbyname(f"web.{ns}.svc")
out["service_http"] = urllib.request.urlopen(f"http://web.{ns}.svc:8000/", timeout=10).status
try:
    out["external_dns"] = socket.gethostbyname("pypi.org")
except OSError as e:
    out["external_dns"] = "error: " + str(e)
s = socket.socket()
s.settimeout(3)
try:
    s.connect((outside, 443))
    out["outside"] = "connected"
except OSError as e:
    out["outside"] = type(e).__name__
print(json.dumps(out))
"""


def _default_gateway() -> str:
    words = subprocess.run(
        ["ip", "-4", "route", "show", "default"], capture_output=True, text=True, check=True
    ).stdout.split()
    assert "via" in words, "the host has no default route: nothing to prove isolation against"
    return words[words.index("via") + 1]


def test_pods_resolve_services_and_reach_the_api_server_but_nothing_outside(
    kubectl: Tool, real_node: RealNode, image: str, ns: str
) -> None:
    server = real_node.pod(
        "web",
        containers=[
            {
                "name": "web",
                "image": image,
                "imagePullPolicy": "Never",
                "command": ["python", "-m", "http.server", "8000"],
                "ports": [{"containerPort": 8000}],
                "readinessProbe": {"tcpSocket": {"port": 8000}, "periodSeconds": 1},
            }
        ],
    )
    server["spec"]["restartPolicy"] = "Always"
    web, _ = run_pod(kubectl, ns, server, phase="Running")
    for svc, cluster_ip in (("web", None), ("web-h", "None")):
        spec = {"selector": {"app": "web"}, "ports": [{"port": 8000, "targetPort": 8000}]}
        if cluster_ip:
            spec["clusterIP"] = cluster_ip
        kubectl(
            "apply",
            "-n",
            ns,
            "-f",
            "-",
            input=json.dumps(
                {"apiVersion": "v1", "kind": "Service", "metadata": {"name": svc}, "spec": spec}
            ),
        )
    service_ip = kubectl.json("get", "service", "web", "-n", ns)["spec"]["clusterIP"]
    # The Service's endpoints exist once the pod is Ready; give the EndpointSlice a moment.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        slices = kubectl.json(
            "get", "endpointslices", "-n", ns, "-l", "kubernetes.io/service-name=web-h"
        )["items"]
        if any(ep.get("addresses") for s in slices for ep in s.get("endpoints") or []):
            break
        time.sleep(0.5)
    outside = _default_gateway()
    client = real_node.pod(
        unique("client"),
        containers=[
            {
                "name": "client",
                "image": image,
                "imagePullPolicy": "Never",
                "command": ["python", "-c", CLIENT],
                "env": [{"name": "NS", "value": ns}, {"name": "OUTSIDE", "value": outside}],
            }
        ],
    )
    _, logs = run_pod(kubectl, ns, client)
    got = json.loads(logs.strip().splitlines()[-1])
    assert got["kubernetes"] == "10.96.0.1"  # the `kubernetes` Service, via CoreDNS
    assert got["whoami"] == f"system:serviceaccount:{ns}:default"  # https + the SA token
    assert got["headless"] == [web["status"]["podIP"]]  # headless name -> the pod's own IP
    assert got["service_ip"] == service_ip
    assert got["service_http"] == 200  # kube-proxy routes the ClusterIP to the pod
    assert got["external_dns"].startswith("error"), "CoreDNS must answer the cluster domain only"
    assert got["outside"] in ("TimeoutError", "OSError", "ConnectionRefusedError"), got
    assert got["outside"] != "connected"


def test_nothing_is_masqueraded_or_forwarded_off_the_machine(real_node: RealNode) -> None:
    nat = subprocess.run(
        ["iptables", "-w", "-t", "nat", "-S"], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    for rule in nat:
        assert not (real_node.pod_cidr in rule and "MASQUERADE" in rule), rule
    # Our chain runs first, in mangle (before filter, where kube-proxy prepends its own jumps).
    forward = subprocess.run(
        ["iptables", "-w", "-t", "mangle", "-S", "FORWARD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    jumps = [r for r in forward if r.startswith("-A FORWARD")]
    assert jumps and jumps[0] == "-A FORWARD -j SA-TESTBED-FWD", forward
    chain = subprocess.run(
        ["iptables", "-w", "-t", "mangle", "-S", "SA-TESTBED-FWD"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    bridge = real_node.env["TESTBED_BRIDGE"]
    assert f"-A SA-TESTBED-FWD -i {bridge} -j DROP" in chain
    assert f"-A SA-TESTBED-FWD -o {bridge} -j DROP" in chain


def test_executor_args_go_to_spark_not_to_the_cli(
    kubectl: Tool, real_node: RealNode, image: str, ns: str
) -> None:
    bare = {"name": "exec", "image": image, "imagePullPolicy": "Never", "args": ["executor"]}
    pod, logs = run_pod(
        kubectl, ns, real_node.pod(unique("exec"), containers=[bare]), phase="Failed"
    )
    assert "invalid choice" not in logs, logs
    assert "'executor' needs the environment Spark on Kubernetes sets" in logs, logs
    assert "SPARK_DRIVER_URL" in logs
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 64


def test_executor_env_starts_sparks_executor_backend(
    kubectl: Tool, real_node: RealNode, image: str, ns: str
) -> None:
    """With the env Spark sets, the JVM runs KubernetesExecutorBackend from pyspark's jars: it
    starts, tries the (absent) driver and gives up — no class or classpath error. It maps the
    image's class archive (the flag the runner sends, with ``-Xshare:on``, which makes a JVM that
    cannot map it fail) on the class path the entrypoint builds, with a conf directory that
    holds files, as the one Spark on Kubernetes mounts does."""
    env = {
        "SPARK_DRIVER_URL": "spark://CoarseGrainedScheduler@127.0.0.1:1",
        "SPARK_EXECUTOR_ID": "1",
        "SPARK_EXECUTOR_CORES": "1",
        "SPARK_APPLICATION_ID": "spark-test",
        "SPARK_EXECUTOR_MEMORY": "256m",
        "SPARK_RESOURCE_PROFILE_ID": "0",
        "SPARK_JAVA_OPT_0": "-Dspark.rpc.numRetries=1",
        "SPARK_JAVA_OPT_1": "-Dspark.rpc.retry.wait=100ms",
        "SPARK_JAVA_OPT_2": f"-XX:SharedArchiveFile={IMAGE_JVM_ARCHIVE}",
        "SPARK_JAVA_OPT_3": "-Xshare:on",
        "SPARK_CONF_DIR": "/opt/stream-autoscaler/policies",
    }
    container = {
        "name": "exec",
        "image": image,
        "imagePullPolicy": "Never",
        "args": ["executor"],
        "env": [{"name": k, "value": v} for k, v in env.items()]
        + [
            {
                "name": "SPARK_EXECUTOR_POD_IP",
                "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}},
            },
            {
                "name": "SPARK_EXECUTOR_POD_NAME",
                "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
            },
        ],
    }
    _, logs = run_pod(
        kubectl,
        ns,
        real_node.pod(unique("exec"), containers=[container]),
        phase="Failed",
        timeout=180,
    )
    assert "shared archive file" not in logs and "class paths mismatch" not in logs, logs
    assert "Could not find or load main class" not in logs, logs
    assert "ClassNotFoundException" not in logs, logs
    assert "KubernetesExecutorBackend" in logs or "CoarseGrainedExecutorBackend" in logs, logs
    assert "127.0.0.1:1" in logs, logs  # it did try the driver it was given
    assert "spark.rpc.numRetries" in logs, logs  # SPARK_JAVA_OPT_* reached the JVM (SparkConf)


def test_the_image_does_not_contain_the_build_proxy_ca(
    docker_env: dict[str, str], image: str
) -> None:
    """The TLS proxy's CA reaches the build only as a BuildKit secret: no file in any layer of
    the final image holds it (PEM or DER)."""
    cas = sorted(Path("/usr/local/share/ca-certificates").glob("*.crt"))
    if not cas:
        pytest.skip("this machine has no local CA to look for")
    needles = []
    for ca in cas:
        body = [line for line in ca.read_text().splitlines() if line and "-----" not in line]
        needles += [body[1].encode(), b64decode("".join(body))[:64]]
    cid = subprocess.run(
        ["/usr/bin/docker", "create", image],
        env=docker_env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    try:
        export = subprocess.Popen(
            ["/usr/bin/docker", "export", cid], env=docker_env, stdout=subprocess.PIPE
        )
        found, files = [], 0
        with tarfile.open(fileobj=export.stdout, mode="r|") as tar:
            for member in tar:
                if not member.isfile():
                    continue
                files += 1
                data = tar.extractfile(member).read()  # type: ignore[union-attr]
                if any(n in data for n in needles):
                    found.append(member.name)
        assert export.wait() == 0
        export.stdout.close()  # type: ignore[union-attr]  # the pipe (tarfile leaves it open)
    finally:
        subprocess.run(["/usr/bin/docker", "rm", cid], env=docker_env, capture_output=True)
    assert files > 1000, files
    assert not found, f"the proxy CA is in the image: {found}"
