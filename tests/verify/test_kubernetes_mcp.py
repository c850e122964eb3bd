"""The Kubernetes manifests' MCP route under `labs verify --mcp` (docs/proxies.md, Kubernetes): verify
translates Traefik's IngressRoute with its `sticky.cookie`, so the route runs in Traefik in front of two
replicas of the lab's MCP origin. A Service is one server in the translation (its pods are the
cluster's), so the test gives the route's Service two pods, as the cluster's endpoints would; the
other controllers' affinity has no translation here (said in each manifest)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from labs.findings import UnusableInput
from labs.verify.kubernetes.translate import translate
from labs.verify.model import RouteWanted, display_path
from labs.verify.run import read_config
from proxies.fixed_mcp import MCP_COOKIE, MCP_SERVICE, MCP_SERVICE_PORT
from proxies.kubernetes.export import K8S_DIR
from tests.verify.test_mcp import EARLY_CUT_TRIES, TRAEFIK_EARLY_CUT, mcp_checks, needs_mcp1, pool_ports

ONE_SERVER = f"servers: [{{url: 'http://{MCP_SERVICE}:{MCP_SERVICE_PORT}'}}]"
TWO_PODS = f"servers: [{{url: 'http://{MCP_SERVICE}-0:{MCP_SERVICE_PORT}'}}, {{url: 'http://{MCP_SERVICE}-1:{MCP_SERVICE_PORT}'}}]"


def translated_with_two_pods(folder: Path, sticky: bool) -> Path:
    text = translate(K8S_DIR / "traefik.yaml").path.read_text()
    assert text.count(ONE_SERVER) == 1 and f'"name": "{MCP_COOKIE}"' in text, text
    text = text.replace(ONE_SERVER, TWO_PODS)
    if not sticky:
        text = re.sub(r"\n *sticky: .*", "", text)
    (folder / "traefik.yml").write_text(text)  # the name its file provider reads
    return folder / "traefik.yml"


def test_the_translation_carries_the_ingressroutes_sticky_cookie():
    text = translate(K8S_DIR / "traefik.yaml").path.read_text()
    [sticky] = [line for line in text.splitlines() if "sticky:" in line]
    assert f'"cookie": {{"name": "{MCP_COOKIE}"' in sticky


@pytest.mark.slow
@needs_mcp1
@pytest.mark.parametrize("sticky", [True, False], ids=["sticky-cookie", "without-it"])
def test_the_translated_mcp_route_keeps_sessions_only_with_its_sticky_cookie(tmp_path: Path, sticky: bool) -> None:
    from labs.verify.mcp.run import verify_mcp
    for _ in range(EARLY_CUT_TRIES):  # Traefik's early cut: tests/verify/test_mcp.py
        report = verify_mcp(translated_with_two_pods(tmp_path, sticky), checks=["session-survives"])
        assert len(pool_ports(report)) == 2, report.rewrites  # the precondition: two replicas behind it
        [check] = mcp_checks(report)
        if not (check.skipped and TRAEFIK_EARLY_CUT in check.skipped):
            break
    assert check.name == "session-survives" and check.skipped is None, check
    if sticky:
        assert check.passed and "4 of 4 sessions kept their Mcp-Session-Id" in check.observed, check
    else:  # Traefik's round-robin: at least one session of four lost (docs/proxies.md)
        assert not check.passed and "sessions lost after initialize" in check.observed, check


@pytest.mark.parametrize("name", ["ingress-nginx.yaml", "envoy-gateway.yaml", "nginx-gateway-fabric.yaml"])
def test_an_mcp_route_the_translation_does_not_carry_is_verifys_limit_at_the_manifests_line(name: str) -> None:
    """These controllers' translations carry the chat route only: `--mcp` says so at the line that
    names /mcp in the manifest (exit 2, verify's limit), never "no route" in a translated temp file."""
    manifest = K8S_DIR / name
    with pytest.raises(UnusableInput) as raised:
        read_config(manifest, wanted=RouteWanted(path="/mcp"))
    said = str(raised.value)
    line = next(n for n, text in enumerate(manifest.read_text().splitlines(), 1)
                if re.search(r"\b(path|value): /mcp\b", text))
    assert said.startswith(f"{display_path(manifest)}:{line}: the route for POST /mcp is not run"), said
    assert "a limit of verify, not a fault of the manifests" in said and "/tmp/" not in said, said


def test_manifests_with_no_mcp_route_say_so_at_the_manifest() -> None:
    manifest = K8S_DIR / "f5-nginx-ingress.yaml"  # its cookie affinity is NGINX Plus only: no MCP route
    with pytest.raises(UnusableInput) as raised:
        read_config(manifest, wanted=RouteWanted(path="/mcp"))
    assert str(raised.value).startswith(f"{display_path(manifest)}: no route of these manifests serves POST /mcp")
