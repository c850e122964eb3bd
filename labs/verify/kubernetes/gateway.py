"""Gateway API with Envoy Gateway (1.9): an HTTPRoute and the BackendTrafficPolicy /
ClientTrafficPolicy that target it (or its Gateway), translated into the Envoy route, connection
manager and cluster settings Envoy Gateway generates, with its defaults where they say nothing
(read in its source, v1.9.0: a route with no timeout keeps Envoy's 15 s; streamIdleTimeout 5 min
on the listener; connections idle 1 h; connect 10 s). Each line remembers its manifest field.

Policy fields verify does not translate are listed in the notes, never silently dropped. `render`
is the translation of one served rule; ai_gateway.py hands it the HTTPRoute an AIGatewayRoute derives.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from labs.findings import UnusableInput
from labs.verify.kubernetes.manifests import Lines, Translation, where
from labs.verify.kubernetes.pods import Pods, pods_of
from labs.verify.model import API_PATHS, display_path
from labs.verify.yamlpos import YamlMap

KINDS = ("HTTPRoute",)
PROXY = "envoy"  # what the controller runs: the translation's proxy, and --proxy's
ROUTES_BY_PATH = True  # translates the rule serving the path asked (--path, --mcp), not only the chat API's
EG = "https://gateway.envoyproxy.io/docs/api/extension_types"
GW = "https://gateway-api.sigs.k8s.io/reference/spec"
# "gateway-api timeout takes precedence": an HTTPRoute's timeouts.request over a policy's requestTimeout.
EG_ROUTE_PRECEDENCE = ("https://github.com/envoyproxy/gateway/blob/39763b1c07ec30a5526fe70434a2cfe4181de642/"
                       "internal/xds/translator/route.go#L442")
# Read from each policy's spec; everything else in a policy is said to be left out.
BACKEND_READ = {("timeout", "http", "requestTimeout"), ("timeout", "http", "streamIdleTimeout"),
                ("timeout", "http", "connectionIdleTimeout"), ("timeout", "http", "maxStreamDuration"),
                ("timeout", "tcp", "connectTimeout"), ("loadBalancer", "type"),
                ("loadBalancer", "consistentHash", "type"), ("loadBalancer", "consistentHash", "cookie"),
                ("loadBalancer", "consistentHash", "header")}
# BackendTrafficPolicy loadBalancer.type -> the cluster's lb_policy Envoy Gateway writes; with no
# loadBalancer it writes LeastRequest (docs: tasks/traffic/load-balancing), and a consistent hash is
# Maglev ({EG}/#consistenthash: its tableSize is Maglev's).
LB_POLICIES = {"LeastRequest": "LEAST_REQUEST", "RoundRobin": "ROUND_ROBIN", "Random": "RANDOM",
               "ConsistentHash": "MAGLEV"}
LB_DEFAULT = "LeastRequest"
AFFINITY_FIX = ("a BackendTrafficPolicy targeting HTTPRoute {route} with `loadBalancer: {{type: ConsistentHash, "
                "consistentHash: {{type: Cookie, cookie: {{name: mcp_route, ttl: 3600s}}}}}}`: Envoy mints the cookie "
                "on `initialize`'s answer and the official Python SDK's client sends it back (the TypeScript "
                "SDK's fetch keeps no cookie: `type: SourceIP` for it); a hash of the Mcp-Session-Id header "
                "is not one, `initialize` carries none (docs/mcp.md, proxies/fixed/kubernetes/envoy-gateway.yaml)")
CLIENT_READ = {("timeout", "http", "requestReceivedTimeout"), ("timeout", "http", "requestHeadersReceivedTimeout"),
               ("timeout", "http", "idleTimeout"), ("timeout", "http", "streamIdleTimeout")}


@dataclass
class Served:
    """The route object and its rule that serve the chat API, as the Envoy Gateway translation
    reads them: an HTTPRoute's own, or the one a controller derives (ai_gateway.py)."""

    kind: str  # the manifest's object: HTTPRoute, AIGatewayRoute
    route: YamlMap
    rule: YamlMap
    path: str
    exact: bool
    match_origin: str
    backend: tuple[str, int]  # host, port
    backend_origin: str
    # A controller that always writes timeouts.request on the HTTPRoute it derives: (value, why).
    implicit_request: tuple[str, str] | None = None
    pods: Pods = Pods(1, "the backend")  # the Service's pods: one server each (pods.py)


def translate(manifest: Path, objects: list[YamlMap], folder: Path,
              paths: tuple[str, ...] | None = None) -> Translation:
    notes: list[str] = []
    route, rule, match, path, exact = _route(manifest, [o for o in objects if o.get("kind") == "HTTPRoute"],
                                             notes, paths or API_PATHS)
    label = f"HTTPRoute {route.mapping('metadata').get('name', '?')}"
    backend = rule.items_list("backendRefs")[0] if rule.items_list("backendRefs") else None
    if backend is None:
        raise UnusableInput(f"{label}: the rule serving {path} has no backendRefs", file=display_path(manifest))
    served = Served("HTTPRoute", route, rule, path, exact,
                    where(manifest, match, "path", f"{label} spec.rules.matches.path"),
                    (str(backend.get("name", "backend")), int(backend.get("port", 80))),
                    where(manifest, rule, "backendRefs", f"{label} spec.rules.backendRefs"),
                    pods=pods_of(manifest, objects, str(backend.get("name", "backend")), asked=paths is not None))
    return render(manifest, objects, folder, served, notes)


def render(manifest: Path, objects: list[YamlMap], folder: Path, served: Served, notes: list[str]) -> Translation:
    """The Envoy config Envoy Gateway generates for the served rule and the policies beside it."""
    route, rule, path, exact = served.route, served.rule, served.path, served.exact
    name = str(route.mapping("metadata").get("name", "?"))
    parents = {str(p.get("name")) for p in route.mapping("spec").items_list("parentRefs")}
    # A derived HTTPRoute keeps its source's name (ai-gateway's controller), so a policy names it so.
    backend_policy = _policy(objects, "BackendTrafficPolicy", {("HTTPRoute", name)})
    client_policy = _policy(objects, "ClientTrafficPolicy", {("Gateway", p) for p in parents})
    notes += _left_out(manifest, backend_policy, BACKEND_READ) + _left_out(manifest, client_policy, CLIENT_READ)
    label = f"{served.kind} {name}"

    def value(policy: YamlMap | None, keys: tuple[str, ...], default: str | None, said: str,
              fallback: str) -> tuple[str | None, str]:
        owner = policy.mapping("spec") if policy is not None else YamlMap()
        for key in keys[:-1]:
            owner = owner.mapping(key)
        if policy is not None and keys[-1] in owner:
            kind = policy.get("kind")
            return str(owner[keys[-1]]), where(manifest, owner, keys[-1],
                                               f"{kind} {policy.mapping('metadata').get('name')} spec.{'.'.join(keys)}")
        return default, f"{said} ({fallback})"

    timeouts = rule.mapping("timeouts")
    if "request" in timeouts:
        route_timeout, route_origin = str(timeouts["request"]), where(manifest, timeouts, "request",
                                                                       f"{label} spec.rules.timeouts.request")
    elif served.implicit_request is not None:
        route_timeout, route_origin = served.implicit_request[0], f"{label} {served.implicit_request[1]}"
    else:
        route_timeout, route_origin = value(backend_policy, ("timeout", "http", "requestTimeout"), "15s",
                                            "Envoy's route timeout, which Envoy Gateway keeps when nothing is set",
                                            f"{EG}/#httptimeout")
    idle, idle_origin = value(backend_policy, ("timeout", "http", "streamIdleTimeout"), None, "", "")
    max_stream, max_origin = value(backend_policy, ("timeout", "http", "maxStreamDuration"), None, "", "")
    connect, connect_origin = value(backend_policy, ("timeout", "tcp", "connectTimeout"), "10s",
                                    "Envoy Gateway's default connect timeout", f"{EG}/#tcptimeout")
    pool_idle, pool_origin = value(backend_policy, ("timeout", "http", "connectionIdleTimeout"), "3600s",
                                   "Envoy Gateway's default upstream connection idle timeout", f"{EG}/#httptimeout")
    stream_idle, stream_origin = value(client_policy, ("timeout", "http", "streamIdleTimeout"), "300s",
                                       "Envoy Gateway's default stream idle timeout (5 min)", f"{EG}/#httpclienttimeout")
    client_idle, client_origin = value(client_policy, ("timeout", "http", "idleTimeout"), "3600s",
                                       "Envoy Gateway's default connection idle timeout (1 h)", f"{EG}/#httpclienttimeout")
    received, received_origin = value(client_policy, ("timeout", "http", "requestReceivedTimeout"), None, "", "")
    headers, headers_origin = value(client_policy, ("timeout", "http", "requestHeadersReceivedTimeout"), None, "", "")
    route_sets_it = "request" in timeouts or served.implicit_request is not None
    if route_sets_it and "requestTimeout" in _spec(backend_policy).mapping("timeout").mapping("http"):
        notes.append(f"BackendTrafficPolicy {backend_policy.mapping('metadata').get('name')} "
                     "spec.timeout.http.requestTimeout is not applied: the route's timeouts.request takes "
                     f"precedence in Envoy Gateway ({EG_ROUTE_PRECEDENCE})")
    backend_origin = served.backend_origin
    balancing = _balancing(manifest, backend_policy, served.pods)
    if served.pods.count > 1 and "assumed" in served.pods.origin:
        notes.append(served.pods.origin)

    lines = Lines()
    lines.add(f"# Envoy Gateway's Envoy for {label} ({display_path(manifest)}), as verify translates it")
    lines.add("static_resources:")
    lines.add("  listeners:")
    lines.add("  - name: gateway")
    lines.add("    address:")
    lines.add("      socket_address: {address: 0.0.0.0, port_value: 8080}")
    lines.add("    filter_chains:")
    lines.add("    - filters:")
    lines.add("      - name: envoy.filters.network.http_connection_manager")
    lines.add("        typed_config:")
    lines.add('          "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3'
              '.HttpConnectionManager')
    lines.add("          stat_prefix: gateway")
    lines.add(f"          stream_idle_timeout: {stream_idle}", stream_origin)
    if received:
        lines.add(f"          request_timeout: {received}", received_origin)
    if headers:
        lines.add(f"          request_headers_timeout: {headers}", headers_origin)
    lines.add(f"          common_http_protocol_options: {{idle_timeout: {client_idle}}}", client_origin)
    lines.add("          route_config:")
    lines.add("            virtual_hosts:")
    hosts = [str(h) for h in route.mapping("spec").items_list("hostnames")] or ["*"]
    lines.add("            - name: route")
    lines.add(f"              domains: [{', '.join(repr(h) for h in hosts)}]",
              where(manifest, route.mapping("spec"), "hostnames", f"{label} spec.hostnames"))
    lines.add("              routes:")
    lines.add(f"              - match: {{{'path' if exact else 'prefix'}: {path!r}}}", served.match_origin)
    lines.add("                route:")
    lines.add("                  cluster: backend", backend_origin)
    if balancing and balancing.hash_policy:
        lines.add(f"                  hash_policy: [{balancing.hash_policy}]", balancing.origin)
    lines.add(f"                  timeout: {route_timeout}", route_origin)
    if idle:
        lines.add(f"                  idle_timeout: {idle}", idle_origin)
    if max_stream:
        lines.add(f"                  max_stream_duration: {{max_stream_duration: {max_stream}}}", max_origin)
    lines.add("          http_filters:")
    lines.add("          - name: envoy.filters.http.router")
    lines.add("            typed_config:")
    lines.add('              "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router')
    lines.add("  clusters:")
    lines.add("  - name: backend")
    lines.add("    type: STRICT_DNS")
    lines.add(f"    connect_timeout: {connect}", connect_origin)
    if balancing:
        lines.add(f"    lb_policy: {balancing.lb_policy}", balancing.origin)
    lines.add(f"    typed_extension_protocol_options:")
    lines.add("      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:")
    lines.add('        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions')
    lines.add(f"        common_http_protocol_options: {{idle_timeout: {pool_idle}}}", pool_origin)
    lines.add("        explicit_http_config: {http_protocol_options: {}}")
    lines.add("    load_assignment:")
    lines.add("      cluster_name: backend")
    lines.add("      endpoints:")
    lines.add("      - lb_endpoints:")
    for server in served.pods.servers(*served.backend):
        host, port = server.rsplit(":", 1)
        lines.add("        - endpoint:")
        lines.add("            address:")
        lines.add(f"              socket_address: {{address: {host}, port_value: {port}}}",
                  backend_origin if served.pods.count == 1 else f"{backend_origin}; {served.pods.origin}")
    target = folder / "envoy.yaml"
    target.write_text("\n".join(lines.text) + "\n")
    vocabulary = {"timeout:": (f"{label} spec.rules.timeouts.request: {{value}}", str),
                  "idle_timeout:": ("BackendTrafficPolicy spec.timeout.http.streamIdleTimeout: {value}", str),
                  "stream_idle_timeout:": ("ClientTrafficPolicy spec.timeout.http.streamIdleTimeout: {value}", str)}
    return Translation(manifest, target, PROXY, lines.origins, notes,
                       f"{label} ({display_path(manifest)}:{route.line()}) path {path}", vocabulary,
                       pool_where=balancing.origin if balancing and backend_policy is not None and
                       _spec(backend_policy).mapping("loadBalancer") else backend_origin,
                       affinity_fix=AFFINITY_FIX.format(route=name))


def _redirect(rule: YamlMap) -> YamlMap | None:
    """The rule's RequestRedirect (it answers with a redirect and sends nothing to a backend)."""
    for item in rule.items_list("filters"):
        if isinstance(item, YamlMap) and item.get("type") == "RequestRedirect":
            return item.mapping("requestRedirect")
    return None


def _route(manifest: Path, routes: list[YamlMap], notes: list[str],
           paths: tuple[str, ...] = API_PATHS) -> tuple[YamlMap, YamlMap, YamlMap, str, bool]:
    """(route, rule, match, path, exact) of the rule that serves the first of `paths` served (the
    chat API's by default), longest match first.
    A rule that redirects (an HTTP listener's RequestRedirect to HTTPS) is followed: the route that
    serves is the one judged, and a note says so."""
    redirects: list[str] = []
    for chat in paths:
        best = None
        for route in routes:
            for rule in route.mapping("spec").items_list("rules"):
                redirect = _redirect(rule)
                for match in rule.items_list("matches") or [YamlMap()]:
                    path = match.mapping("path") if isinstance(match, YamlMap) else YamlMap()
                    kind, value = str(path.get("type", "PathPrefix")), str(path.get("value", "/"))
                    ok = chat == value if kind == "Exact" else (
                        value == "/" or chat == value or chat.startswith(value.rstrip("/") + "/"))
                    if kind == "RegularExpression":
                        ok = False
                    if ok and redirect is not None:
                        target = ", ".join(f"{k} {redirect[k]}" for k in ("scheme", "hostname", "port", "statusCode")
                                           if k in redirect) or "the same URL"
                        redirects.append(f"HTTPRoute {route.mapping('metadata').get('name', '?')} "
                                         f"({display_path(manifest)}:{rule.line()}) answers {value} with a "
                                         f"RequestRedirect ({target})")
                    elif ok and (best is None or len(value) > len(best[3])):
                        best = (route, rule, path, value, kind == "Exact")
        if best is not None:
            if redirects:
                notes.append(f"{'; '.join(dict.fromkeys(redirects))}: followed to HTTPRoute "
                             f"{best[0].mapping('metadata').get('name', '?')}, the route that serves it")
            return best
    said = f" ({'; '.join(dict.fromkeys(redirects))}, and no route serves what it redirects to)" if redirects else ""
    raise UnusableInput(f"no HTTPRoute rule serves POST {paths[0]}{said}", file=display_path(manifest))


def _policy(objects: list[YamlMap], kind: str, targets: set[tuple[str, str]]) -> YamlMap | None:
    for policy in (o for o in objects if o.get("kind") == kind):
        spec = policy.mapping("spec")
        refs = spec.items_list("targetRefs") or ([spec.mapping("targetRef")] if "targetRef" in spec else [])
        if any((str(r.get("kind")), str(r.get("name"))) in targets for r in refs if isinstance(r, YamlMap)):
            return policy
    return None


def _spec(policy: YamlMap | None) -> YamlMap:
    return policy.mapping("spec") if policy is not None else YamlMap()


def _left_out(manifest: Path, policy: YamlMap | None, read: set[tuple[str, ...]]) -> list[str]:
    if policy is None:
        return []
    found: list[str] = []

    def walk(node: YamlMap, trail: tuple[str, ...]) -> None:
        for key, value in node.items():
            here = (*trail, str(key))
            if here in read:
                continue
            if isinstance(value, YamlMap) and any(r[:len(here)] == here for r in read):
                walk(value, here)
            elif key not in ("targetRef", "targetRefs"):
                found.append(".".join(here))
    walk(policy.mapping("spec"), ())
    return [f"{policy.get('kind')} {policy.mapping('metadata').get('name')}: not translated (not read by verify): "
            f"{', '.join(found)}"] if found else []


@dataclass(frozen=True)
class Balancing:
    lb_policy: str
    hash_policy: str | None  # the route's hash_policy entry, for a consistent hash
    origin: str


def _balancing(manifest: Path, policy: YamlMap | None, pods: Pods) -> Balancing | None:
    """How Envoy Gateway balances the route's pods (BackendTrafficPolicy loadBalancer); None with
    one pod and no loadBalancer (nothing to balance: the chat route's translation as before)."""
    balancer = _spec(policy).mapping("loadBalancer")
    if not balancer:
        if pods.count == 1:
            return None
        return Balancing(LB_POLICIES[LB_DEFAULT], None, f"Envoy Gateway's default load balancer ({LB_DEFAULT}) "
                                                         f"when no BackendTrafficPolicy sets one ({EG}/#loadbalancer)")
    name = f"BackendTrafficPolicy {policy.mapping('metadata').get('name')}"
    kind = str(balancer.get("type", ""))
    if kind not in LB_POLICIES:
        raise UnusableInput(f"{name} spec.loadBalancer.type: {kind!r} is not one of {', '.join(LB_POLICIES)}",
                            file=display_path(manifest), line=balancer.line())
    origin = where(manifest, balancer, "type", f"{name} spec.loadBalancer.type")
    if kind != "ConsistentHash":
        return Balancing(LB_POLICIES[kind], None, origin)
    hashed = balancer.mapping("consistentHash")
    by = str(hashed.get("type", ""))
    origin = where(manifest, hashed, "type", f"{name} spec.loadBalancer.consistentHash.type")
    if by == "SourceIP":
        return Balancing("MAGLEV", "{connection_properties: {source_ip: true}}", origin)
    if by == "Header" and hashed.mapping("header").get("name"):
        return Balancing("MAGLEV", f"{{header: {{header_name: {hashed.mapping('header')['name']}}}}}", origin)
    if by == "Cookie" and hashed.mapping("cookie").get("name"):
        cookie = hashed.mapping("cookie")
        ttl = f", ttl: {cookie['ttl']}" if "ttl" in cookie else ""
        return Balancing("MAGLEV", f"{{cookie: {{name: {cookie['name']}{ttl}}}}}", origin)
    raise UnusableInput(f"{name} spec.loadBalancer.consistentHash: type {by!r} with its field "
                        "(SourceIP, Header with header.name, Cookie with cookie.name) is what Envoy Gateway reads",
                        file=display_path(manifest), line=hashed.line())
