"""The Kubernetes manifests' MCP route under `labs verify --mcp` (docs/proxies.md, Kubernetes): verify
translates Traefik's IngressRoute with its `sticky.cookie`, Envoy Gateway's HTTPRoute with its
BackendTrafficPolicy `loadBalancer`, and NGF's HTTPRoute rule with its UpstreamSettingsPolicy
`loadBalancingMethod`, so each route runs in its proxy in front of replicas of the lab's MCP origin.
Traefik's translation has one server per Service, so its test gives the Service two pods; the Gateway
API controllers balance over a Service's pods themselves, and their translation runs as many as the
manifests' Deployment says, else two (labs/verify/kubernetes/pods.py)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from labs.findings import UnusableInput
from labs.verify.kubernetes.translate import translate
from labs.verify.model import RouteWanted, display_path
from labs.verify.run import read_config, verify_config
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


@pytest.mark.parametrize("name", ["ingress-nginx.yaml"])
def test_an_mcp_route_the_translation_does_not_carry_is_verifys_limit_at_the_manifests_line(name: str) -> None:
    """ingress-nginx's translation carries the chat route only (the project is retired): `--mcp` says
    so at the line that names /mcp in the manifest (exit 2, verify's limit), never "no route" in a
    translated temp file."""
    manifest = K8S_DIR / name
    line = next(n for n, text in enumerate(manifest.read_text().splitlines(), 1)
                if re.search(r"\b(path|value): /mcp\b", text))
    # The static reading, and the run's own reading (`labs verify FILE --path /mcp`), say the same.
    for read in (read_config, verify_config):
        with pytest.raises(UnusableInput) as raised:
            read(manifest, wanted=RouteWanted(path="/mcp"))
        said = str(raised.value)
        assert said.startswith(f"{display_path(manifest)}:{line}: the route for POST /mcp is not run"), said
        assert "a limit of verify, not a fault of the manifests" in said and "/tmp/" not in said, said


def test_manifests_with_no_mcp_route_say_so_at_the_manifest() -> None:
    manifest = K8S_DIR / "f5-nginx-ingress.yaml"  # its cookie affinity is NGINX Plus only: no MCP route
    with pytest.raises(UnusableInput) as raised:
        read_config(manifest, wanted=RouteWanted(path="/mcp"))
    assert str(raised.value).startswith(f"{display_path(manifest)}: no route of these manifests serves POST /mcp")


GATEWAYS = {"envoy-gateway.yaml": ("lb_policy: MAGLEV", "hash_policy: [{cookie: {name: mcp_route, ttl: 3600s}}]",
                                   "BackendTrafficPolicy mcp spec.loadBalancer.consistentHash.type"),
            "nginx-gateway-fabric.yaml": ("hash $remote_addr consistent;", "server mcp-1:80;",
                                          "UpstreamSettingsPolicy mcp spec.loadBalancingMethod")}
WITHOUT_AFFINITY = {  # the manifest's affinity taken out: the controller's default balancing
    "envoy-gateway.yaml": ("  loadBalancer:\n    type: ConsistentHash\n    consistentHash:\n      type: Cookie\n"
                           "      cookie:\n        name: mcp_route\n        ttl: 3600s\n", ""),
    "nginx-gateway-fabric.yaml": ("  loadBalancingMethod: hash consistent\n  hashMethodKey: $remote_addr\n",
                                  "  keepAlive:\n    connections: 16\n")}


@pytest.mark.parametrize("name", sorted(GATEWAYS))
def test_the_gateway_translations_carry_the_mcp_route_its_affinity_and_two_pods(name: str) -> None:
    translation = translate(K8S_DIR / name, paths=("/mcp",))
    text = translation.path.read_text()
    assert all(line in text for line in GATEWAYS[name][:2]), text
    assert text.count("mcp-0") == 1 and text.count("mcp-1") == 1, text  # two pods, as none is declared
    assert any("2 are assumed" in note for note in translation.notes), translation.notes
    assert translation.pool_where.endswith(GATEWAYS[name][2]), translation.pool_where
    assert "path /mcp" in translation.route
    # The chat route's translation is as it was: one server, no balancing of pods.
    chat = translate(K8S_DIR / name).path.read_text()
    assert "mcp" not in chat.replace("# ", "").split("\n", 1)[1] and "MAGLEV" not in chat and "hash " not in chat


def test_a_deployment_among_the_manifests_gives_the_pods(tmp_path: Path) -> None:
    manifest = tmp_path / "routes.yaml"
    service = ("---\napiVersion: v1\nkind: Service\nmetadata: {name: mcp}\nspec:\n  selector: {app: mcp}\n"
               "  ports: [{port: 80}]\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: mcp}\n"
               "spec:\n  replicas: REPLICAS\n  selector: {matchLabels: {app: mcp}}\n"
               "  template:\n    metadata: {labels: {app: mcp, tier: tools}}\n    spec: {containers: []}\n")
    base = (K8S_DIR / "envoy-gateway.yaml").read_text()
    manifest.write_text(base + service.replace("REPLICAS", "3"))
    text = translate(manifest, paths=("/mcp",)).path.read_text()
    assert [f"mcp-{i}" in text for i in range(4)] == [True, True, True, False], text
    manifest.write_text(base + service.replace("REPLICAS", "three"))
    with pytest.raises(UnusableInput, match="spec.replicas: 'three' is not a count of pods"):
        translate(manifest, paths=("/mcp",))


def test_a_balancing_open_source_nginx_has_not_is_verifys_limit(tmp_path: Path) -> None:
    manifest = tmp_path / "ngf.yaml"
    manifest.write_text((K8S_DIR / "nginx-gateway-fabric.yaml").read_text().replace(
        "loadBalancingMethod: hash consistent", "loadBalancingMethod: least_time header"))
    with pytest.raises(UnusableInput, match="NGINX Plus's; verify runs open-source nginx"):
        translate(manifest, paths=("/mcp",))


@pytest.mark.slow
@needs_mcp1
@pytest.mark.parametrize("name", sorted(GATEWAYS))
@pytest.mark.parametrize("affinity", [True, False], ids=["its-affinity", "without-it"])
def test_verify_runs_the_gateways_mcp_route_keeps_sessions_only_with_its_affinity(tmp_path: Path, name: str,
                                                                                    affinity: bool) -> None:
    from labs.verify.mcp.run import verify_mcp
    manifest = tmp_path / "routes.yaml"  # a name that says no proxy: the controller's is run
    text = (K8S_DIR / name).read_text()
    if not affinity:
        assert text.count(WITHOUT_AFFINITY[name][0]) == 1
        text = text.replace(*WITHOUT_AFFINITY[name])
    manifest.write_text(text)
    report = verify_mcp(manifest, checks=["session-survives"])
    # The precondition: two replicas behind it, one per pod, each its own loopback port.
    assert any(n.startswith("behind the route: 2 replica(s)") for n in report.notes), report.notes
    assert all(f"-{' ' * 8}server {pod}:80;" in report.rewrites or f"{{address: {pod}, port_value: 80}}" in
               report.rewrites for pod in ("mcp-0", "mcp-1")), report.rewrites
    # nginx's `server` lines; Envoy's socket addresses after its listener's (the file's first; the
    # admin line the rewrite adds starts with `admin:`).
    pods = re.findall(r"^\+ +server 127\.0\.0\.1:(\d+);", report.rewrites, re.M) or re.findall(
        r"^\+ +socket_address: \{address: 127\.0\.0\.1, port_value: (\d+)\}", report.rewrites, re.M)[1:]
    assert len(set(pods)) == 2, report.rewrites
    [check] = mcp_checks(report)
    assert check.skipped is None, check
    if affinity:
        assert check.passed and "4 of 4 sessions kept their Mcp-Session-Id" in check.observed, check
        assert report.exit_status == 0
        return
    assert not check.passed and "sessions lost after initialize" in check.observed, check
    [finding] = report.findings
    assert finding.kind == "session-affinity" and finding.where.startswith(f"{manifest}:"), finding.where
    assert "spec.rules.backendRefs" in finding.where and GATEWAYS[name][2].split()[0] in finding.fix, finding
