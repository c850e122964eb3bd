"""Envoy AI Gateway (v1.1): an AIGatewayRoute, read as the HTTPRoute its controller derives from it
and handed to the Envoy Gateway translation (gateway.py), which is what runs: Envoy Gateway's
Envoy, with the AI Gateway's external processor in front (not run here: it picks the rule from the
request body's model; verify judges the first rule, and says so).

What the controller writes, read in its source at v1.1.0 (c217da8a5395):
- each rule's `timeouts` is copied to the derived HTTPRoute's rule, and where `timeouts.request` is
  not set the controller writes 60s (GetTimeoutsOrDefault, api/v1beta1/ai_gateway_route_helper.go,
  unchanged since #796, v0.3): a stream longer than 60 s is cut ("at exactly 61 s, three-for-three",
  nicolerenee/infra#2078);
- since the derived rule always has `timeouts.request`, a BackendTrafficPolicy's
  `timeout.http.requestTimeout` never applies (Envoy Gateway: the route's timeout takes precedence);
- the rule matches PathPrefix / (the controller's root prefix) and the model header.
Every AIGatewayRoute and AIServiceBackend field is checked against the vendored CRD schemas
(proxies/kubernetes/schemas/); what they refuse is said in the notes.
"""
from __future__ import annotations

from pathlib import Path

from labs.findings import UnusableInput
from labs.verify.kubernetes import gateway
from labs.verify.kubernetes.manifests import Translation, where
from labs.verify.model import display_path
from labs.verify.traefik.rewrite import as_plain  # a manifest's node as plain dicts and lists
from labs.verify.yamlpos import YamlMap

KINDS = ("AIGatewayRoute",)
PROXY = "envoy"  # what the controller's data plane runs: Envoy Gateway's Envoy
COMMIT = "c217da8a539570ba3f6014a60c2687c29a945f1f"  # envoyproxy/ai-gateway v1.1.0
DEFAULT_REQUEST_TIMEOUT = "60s"
DEFAULT_SOURCE = (f"https://github.com/envoyproxy/ai-gateway/blob/{COMMIT}/api/v1beta1/"
                  "ai_gateway_route_helper.go#L17")
ROOT_PREFIX = "/"  # the controller's default rootPrefix: every derived rule matches it
GROUP = "aigateway.envoyproxy.io"


def translate(manifest: Path, objects: list[YamlMap], folder: Path) -> Translation:
    routes = [o for o in objects if o.get("kind") == "AIGatewayRoute" and o.mapping("spec").items_list("rules")]
    if not routes:
        raise UnusableInput("no AIGatewayRoute with rules among the manifests", file=display_path(manifest))
    route = routes[0]
    name = str(route.mapping("metadata").get("name", "?"))
    label = f"AIGatewayRoute {name}"
    rules = route.mapping("spec").items_list("rules")
    rule = rules[0]
    notes = [f"{label}: the AI Gateway's external processor (not run by verify) picks a rule by the "
             f"x-ai-eg-model header it sets from the request body's model; verify judges the first rule "
             f"({display_path(manifest)}:{rule.line()})" + (f" of {len(rules)}" if len(rules) > 1 else "")]
    notes += schema_notes(objects)
    if "streamIdleTimeout" in rule:
        notes.append(f"{label} spec.rules.streamIdleTimeout ({rule['streamIdleTimeout']}): not translated "
                     "(the extension server sets it as the route's retry_policy.per_try_idle_timeout)")
    refs = [r for r in rule.items_list("backendRefs") if isinstance(r, YamlMap)]
    if not refs:
        raise UnusableInput(f"{label}: its first rule has no backendRefs", file=display_path(manifest))
    backend, backend_origin = _backend(manifest, objects, refs[0], label)
    implicit = None
    if "request" not in rule.mapping("timeouts"):
        implicit = (DEFAULT_REQUEST_TIMEOUT, f"spec.rules.timeouts.request not set "
                    f"({display_path(manifest)}:{rule.line()}): the controller writes "
                    f"{DEFAULT_REQUEST_TIMEOUT} on the HTTPRoute it derives ({DEFAULT_SOURCE})")
    served = gateway.Served("AIGatewayRoute", route, rule, ROOT_PREFIX, False,
                            where(manifest, rule, "matches", f"{label} spec.rules.matches (the derived HTTPRoute: "
                                  f"PathPrefix {ROOT_PREFIX} and the model header)"),
                            backend, backend_origin, implicit)
    return gateway.render(manifest, objects, folder, served, notes)


def _backend(manifest: Path, objects: list[YamlMap], ref: YamlMap, label: str) -> tuple[tuple[str, int], str]:
    """host, port of the AIServiceBackend's backendRef: an Envoy Gateway Backend's first endpoint,
    or a Service (name, port)."""
    wanted = str(ref.get("name"))
    found = next((o for o in objects if o.get("kind") == "AIServiceBackend"
                  and str(o.mapping("metadata").get("name")) == wanted), None)
    if found is None:
        raise UnusableInput(f"{label}: AIServiceBackend {wanted} is not among the manifests",
                            file=display_path(manifest))
    target = found.mapping("spec").mapping("backendRef")
    origin = where(manifest, found.mapping("spec"), "backendRef", f"AIServiceBackend {wanted} spec.backendRef")
    if str(target.get("kind", "Service")) == "Backend":
        backend = next((o for o in objects if o.get("kind") == "Backend"
                        and str(o.mapping("metadata").get("name")) == str(target.get("name"))), None)
        endpoints = backend.mapping("spec").items_list("endpoints") if backend is not None else []
        for endpoint in (e for e in endpoints if isinstance(e, YamlMap)):
            address = endpoint.mapping("fqdn") if "fqdn" in endpoint else endpoint.mapping("ip")
            host = address.get("hostname", address.get("address"))
            if host:
                return (str(host), int(address.get("port", 80))), where(
                    manifest, endpoint, "fqdn" if "fqdn" in endpoint else "ip",
                    f"Backend {target.get('name')} spec.endpoints (for AIServiceBackend {wanted})")
        raise UnusableInput(f"AIServiceBackend {wanted}: Backend {target.get('name')} with an fqdn or ip "
                            "endpoint is not among the manifests", file=display_path(manifest))
    return (str(target.get("name", wanted)), int(target.get("port", 80))), origin


def schema_notes(objects: list[YamlMap]) -> list[str]:
    """What the vendored CRD schemas refuse in the AI Gateway's objects (the API server would too)."""
    from proxies.kubernetes.validate import ManifestInvalid, validate_object
    said = []
    for obj in (o for o in objects if str(o.get("apiVersion", "")).startswith(GROUP + "/")):
        try:
            validate_object(as_plain(obj))
        except ManifestInvalid as exc:
            said.append(f"{exc} (the CRD's schema, envoyproxy/ai-gateway v1.1.0, refuses it; "
                        "the API server would not accept the object)")
    return said
