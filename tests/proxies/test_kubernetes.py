"""The Kubernetes exports (proxies/fixed/kubernetes/): equal to a fresh render of the fixed
settings, every object valid against its published schema offline (unknown fields refused, as
kubectl's strict validation does), and the streaming settings carried over from the fixed configs."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from proxies.fixed_mcp import MCP_COOKIE, MCP_PATH, MCP_SERVICE, MCP_SESSION_TTL_S
from proxies.kinds import KINDS
from proxies.kubernetes.export import K8S_DIR, manifests, seconds, stale
from proxies.kubernetes.validate import ManifestInvalid, validate_text
from proxies.variants import variant

REPO = Path(__file__).resolve().parents[2]
# What proxies/fixed/kubernetes/ holds.
FILES = sorted(path.name for path in K8S_DIR.iterdir() if path.is_file())


def objects(name: str) -> dict[str, dict]:
    """Kind -> the file's first object of that kind (the chat route's: the MCP route's come after)."""
    found: dict[str, dict] = {}
    for document in yaml.safe_load_all((K8S_DIR / name).read_text()):
        if document:
            found.setdefault(document["kind"], document)
    return found


def named(name: str, kind: str, object_name: str) -> dict:
    return next(d for d in yaml.safe_load_all((K8S_DIR / name).read_text())
                if d and d["kind"] == kind and d["metadata"]["name"] == object_name)


def test_the_exports_equal_a_fresh_render_and_each_kind_declares_its_own():
    assert stale() == [], "run `python -m proxies export`"
    assert sorted(manifests()) == FILES
    assert sorted(file for kind in KINDS.values() for file, _ in kind.kubernetes) == FILES


@pytest.mark.parametrize("name", FILES)
def test_every_object_is_valid_against_its_schema(name):
    assert [d["kind"] for d in validate_text((K8S_DIR / name).read_text())]


@pytest.mark.parametrize("name, before, after, message", [
    ("envoy-gateway.yaml", "request: 0s", "requst: 0s", "'requst' was unexpected"),
    ("envoy-gateway.yaml", "request: 0s", "request: 10 seconds", "does not match"),
    ("envoy-gateway.yaml", "streamIdleTimeout: 300s", "streamIdleTimeout: [300]", "is not of type"),
    ("envoy-ai-gateway.yaml", "request: 0s", "requestTimeout: 0s", "'requestTimeout' was unexpected"),
    ("envoy-ai-gateway.yaml", "name: OpenAI", "name: OpenAPI", "is not one of"),
    ("traefik.yaml", "flushInterval:", "flushIntervl:", "'flushIntervl' was unexpected"),
    ("ingress-nginx.yaml", "ingressClassName: nginx", "ingressClass: nginx", "'ingressClass' was unexpected"),
    ("nginx-gateway-fabric.yaml", "disable: true", "disabled: true", "'disabled' was unexpected"),
    ("nginx-gateway-fabric.yaml", "read: 300s", "read: 5 minutes", "does not match"),
    ("envoy-gateway.yaml", "type: Cookie", "type: Cookies", "is not one of"),
    ("traefik.yaml", "maxAge:", "maxAges:", "'maxAges' was unexpected"),
    ("nginx-gateway-fabric.yaml", "loadBalancingMethod: hash consistent", "loadBalancingMethod: sticky learn",
     "is not one of"),
])
def test_a_broken_object_is_refused_with_its_field(name, before, after, message):
    text = (K8S_DIR / name).read_text()
    assert before in text
    with pytest.raises(ManifestInvalid, match=message):
        validate_text(text.replace(before, after, 1))


def test_the_streaming_settings_are_the_fixed_configs():
    nginx, envoy, traefik = variant("nginx", "fixed"), variant("envoy", "fixed"), variant("traefik", "fixed")
    data = objects("ingress-nginx.yaml")["ConfigMap"]["data"]
    assert data["proxy-buffering"] == "off" and int(data["proxy-read-timeout"]) == seconds(nginx.proxy_read_timeout)
    assert int(data["upstream-keepalive-timeout"]) < 5  # below uvicorn's keep-alive timeout
    assert seconds(data["worker-shutdown-timeout"]) >= 3600  # a reload waits for long answers
    assert "text/event-stream" not in data["gzip-types"]
    route = objects("envoy-gateway.yaml")
    assert route["HTTPRoute"]["spec"]["rules"][0]["timeouts"]["request"] == "0s"  # not Envoy's 15 s
    assert route["BackendTrafficPolicy"]["spec"]["timeout"]["http"]["streamIdleTimeout"] == envoy.route_idle_timeout
    # Not the 60 s Envoy AI Gateway's controller writes where a rule sets none.
    ai_route = objects("envoy-ai-gateway.yaml")
    assert ai_route["AIGatewayRoute"]["spec"]["rules"][0]["timeouts"]["request"] == "0s"
    assert ai_route["BackendTrafficPolicy"]["spec"]["targetRefs"][0]["name"] == ai_route["AIGatewayRoute"]["metadata"]["name"]
    ingressroute = objects("traefik.yaml")
    assert ingressroute["Middleware"]["spec"]["compress"]["includedContentTypes"] == list(traefik.compress_included_types)
    assert "buffering" not in ingressroute["Middleware"]["spec"]  # it would hold every answer whole
    fabric = objects("nginx-gateway-fabric.yaml")["ProxySettingsPolicy"]["spec"]
    assert fabric["buffering"]["disable"] is True  # NGF renders nginx's `proxy_buffering on` otherwise
    assert seconds(fabric["timeout"]["read"]) == seconds(nginx.proxy_read_timeout)
    f5 = objects("f5-nginx-ingress.yaml")["Ingress"]["metadata"]["annotations"]
    assert f5["nginx.org/proxy-buffering"] == "False" and not any(k.startswith("nginx.ingress") for k in f5)
    assert seconds(f5["nginx.org/proxy-read-timeout"]) == seconds(nginx.proxy_read_timeout)


def test_the_mcp_route_keeps_sessions_on_one_replica_by_the_controllers_own_objects():
    """Each manifest with an MCP route sends /mcp to its own Service, with the controller's affinity and
    the chat route's silence limit; the chat route keeps its balancing (docs/proxies.md, Kubernetes)."""
    nginx, envoy = variant("nginx", "fixed"), variant("envoy", "fixed")
    mcp_ingress = named("ingress-nginx.yaml", "Ingress", MCP_SERVICE)
    notes = mcp_ingress["metadata"]["annotations"]
    assert notes["nginx.ingress.kubernetes.io/affinity"] == "cookie"
    assert notes["nginx.ingress.kubernetes.io/session-cookie-name"] == MCP_COOKIE
    assert int(notes["nginx.ingress.kubernetes.io/session-cookie-max-age"]) == MCP_SESSION_TTL_S
    assert int(notes["nginx.ingress.kubernetes.io/proxy-read-timeout"]) == seconds(nginx.proxy_read_timeout)
    assert "upstream-hash-by" not in str(notes)  # initialize carries no Mcp-Session-Id
    path = mcp_ingress["spec"]["rules"][0]["http"]["paths"][0]
    assert (path["path"], path["backend"]["service"]["name"]) == (MCP_PATH, MCP_SERVICE)
    chat_notes = named("ingress-nginx.yaml", "Ingress", "llm")["metadata"]["annotations"]
    assert not any("affinity" in key for key in chat_notes)

    route = named("envoy-gateway.yaml", "HTTPRoute", MCP_SERVICE)["spec"]["rules"][0]
    assert route["matches"][0]["path"]["value"] == MCP_PATH and route["timeouts"]["request"] == "0s"
    policy = named("envoy-gateway.yaml", "BackendTrafficPolicy", MCP_SERVICE)["spec"]
    assert policy["targetRefs"][0]["name"] == MCP_SERVICE
    assert policy["loadBalancer"]["consistentHash"]["cookie"]["name"] == MCP_COOKIE
    assert seconds(policy["loadBalancer"]["consistentHash"]["cookie"]["ttl"]) == MCP_SESSION_TTL_S
    assert policy["timeout"]["http"]["streamIdleTimeout"] == envoy.route_idle_timeout
    assert "loadBalancer" not in named("envoy-gateway.yaml", "BackendTrafficPolicy", "llm")["spec"]

    chat, mcp_route = objects("traefik.yaml")["IngressRoute"]["spec"]["routes"]
    assert MCP_PATH in mcp_route["match"] and "sticky" not in chat["services"][0]
    assert mcp_route["services"][0]["sticky"]["cookie"]["name"] == MCP_COOKIE

    fabric = objects("nginx-gateway-fabric.yaml")["HTTPRoute"]["spec"]["rules"]
    assert [rule["backendRefs"][0]["name"] for rule in fabric] == ["llm", MCP_SERVICE]
    upstream = named("nginx-gateway-fabric.yaml", "UpstreamSettingsPolicy", MCP_SERVICE)["spec"]
    assert upstream["loadBalancingMethod"] == "hash consistent" and upstream["hashMethodKey"] == "$remote_addr"
    # F5's open-source controller has no cookie affinity: no route, said in the file.
    assert "Ingress" in objects("f5-nginx-ingress.yaml") and MCP_PATH not in str(objects("f5-nginx-ingress.yaml"))
    assert "NGINX Plus only" in (K8S_DIR / "f5-nginx-ingress.yaml").read_text()


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "proxies", "export", *args], cwd=REPO,
                          capture_output=True, text=True, timeout=120)


def test_export_k8s_writes_a_folder_and_refuses_a_file(tmp_path):
    done = run("--k8s", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == sorted(FILES)
    (tmp_path / "file").write_text("x")
    refused = run("--k8s", str(tmp_path / "file"))
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "not a folder" in refused.stderr
