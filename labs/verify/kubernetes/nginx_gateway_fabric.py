"""Gateway API with NGINX Gateway Fabric (2.6): an HTTPRoute and NGF's policies that target it or
its Gateway (ProxySettingsPolicy, ClientSettingsPolicy, UpstreamSettingsPolicy), translated into the
nginx config NGF renders (read in its source at v2.6.7, internal/controller/nginx/config/):
`proxy_http_version 1.1` in every location, upstream `keepalive 16` with `Connection ""`, and
nginx's own defaults elsewhere: `proxy_buffering on` (NGF could not turn it off before
ProxySettingsPolicy, v2.4.0, nginx/nginx-gateway-fabric#4256), `proxy_read_timeout 60s`.
A policy on the HTTPRoute wins over one on its Gateway (NGF's inherited policies).

Each policy is checked against NGF's CRD schema (labs/verify/kubernetes/schemas.py); fields not
translated are listed in the notes; a SnippetsFilter's nginx text is said, not applied.
"""
from __future__ import annotations

from pathlib import Path

from labs.findings import UnusableInput
from labs.verify.kubernetes import gateway, nginx_conf, schemas
from labs.verify.kubernetes.manifests import Translation, where
from labs.verify.kubernetes.pods import pods_of
from labs.verify.model import API_PATHS, display_path
from labs.verify.yamlpos import YamlMap

POLICIES = ("ProxySettingsPolicy", "ClientSettingsPolicy", "UpstreamSettingsPolicy", "SnippetsFilter")
KINDS = ("HTTPRoute", *POLICIES)
PROXY = "nginx"
ROUTES_BY_PATH = True  # translates the rule serving the path asked (--path, --mcp), not only the chat API's
GROUP = "gateway.nginx.org"
CLASS = "nginx"  # the GatewayClass NGF's Helm chart creates
SOURCE = "https://github.com/nginx/nginx-gateway-fabric/blob/v2.6.7/internal/controller/nginx/config"
NGINX = "https://nginx.org/en/docs/http"
KEEPALIVE_CONNECTIONS = "16"  # http.KeepAliveConnectionDefault, upstreams.go processKeepAliveSettings

# (policy kind, its spec field path, nginx directive, default, where it goes, the default's source)
FIELDS: tuple[tuple[str, tuple[str, ...], str, str | None, str, str], ...] = (
    ("ProxySettingsPolicy", ("buffering", "disable"), "proxy_buffering", "on", "location",
     f"nginx's default, which NGF keeps ({NGINX}/ngx_http_proxy_module.html#proxy_buffering)"),
    ("ProxySettingsPolicy", ("buffering", "bufferSize"), "proxy_buffer_size", None, "location", ""),
    ("ProxySettingsPolicy", ("buffering", "buffers"), "proxy_buffers", None, "location", ""),
    ("ProxySettingsPolicy", ("buffering", "busyBuffersSize"), "proxy_busy_buffers_size", None, "location", ""),
    ("ProxySettingsPolicy", ("timeout", "connect"), "proxy_connect_timeout", "60s", "location",
     f"nginx's default, which NGF keeps ({NGINX}/ngx_http_proxy_module.html#proxy_connect_timeout)"),
    ("ProxySettingsPolicy", ("timeout", "read"), "proxy_read_timeout", "60s", "location",
     f"nginx's default, which NGF keeps ({NGINX}/ngx_http_proxy_module.html#proxy_read_timeout)"),
    ("ProxySettingsPolicy", ("timeout", "send"), "proxy_send_timeout", "60s", "location",
     f"nginx's default, which NGF keeps ({NGINX}/ngx_http_proxy_module.html#proxy_send_timeout)"),
    ("ClientSettingsPolicy", ("body", "maxSize"), "client_max_body_size", "1m", "location",
     f"nginx's default, which NGF keeps ({NGINX}/ngx_http_core_module.html#client_max_body_size)"),
    ("ClientSettingsPolicy", ("body", "timeout"), "client_body_timeout", "60s", "location",
     f"nginx's default, which NGF keeps ({NGINX}/ngx_http_core_module.html#client_body_timeout)"),
    ("ClientSettingsPolicy", ("keepAlive", "timeout", "server"), "keepalive_timeout", "75s", "location",
     f"nginx's default, which NGF keeps ({NGINX}/ngx_http_core_module.html#keepalive_timeout)"),
    ("UpstreamSettingsPolicy", ("keepAlive", "connections"), "keepalive", KEEPALIVE_CONNECTIONS, "upstream",
     f"NGF's default upstream keepalive ({SOURCE}/upstreams.go)"),
    ("UpstreamSettingsPolicy", ("keepAlive", "timeout"), "keepalive_timeout", None, "upstream", ""),
)
# UpstreamSettingsPolicy's balancing: loadBalancingMethod (with hashMethodKey for a hash) is the
# upstream's method directive; NGF's default is `random two least_conn` (the CRD's own words).
BALANCING = ("loadBalancingMethod", "hashMethodKey")
BALANCING_DEFAULT = "random two least_conn"
PLUS_ONLY = "least_time"  # methods NGINX Plus has and open-source nginx, which verify runs, has not
READ = {(kind, keys) for kind, keys, *_ in FIELDS} | {("UpstreamSettingsPolicy", (key,)) for key in BALANCING}
AFFINITY_FIX = ("an UpstreamSettingsPolicy targeting Service {service} with `loadBalancingMethod: hash consistent` "
                "and `hashMethodKey: $remote_addr` (open-source NGF has no cookie affinity and renders no `sticky "
                "learn`: every client behind one address lands on one pod); a hash of $http_mcp_session_id is not "
                "one, `initialize` carries none (docs/mcp.md, proxies/fixed/kubernetes/nginx-gateway-fabric.yaml)")


def claims(objects: list[YamlMap], proxy: str | None = None) -> bool:
    """NGF's: one of its policies is among the objects, an HTTPRoute's Gateway is of NGF's class, or
    an HTTPRoute named with `--proxy nginx` (NGF is the Gateway API controller verify runs on nginx;
    inference-extension-ngf-httproute, tests/data/wild: an HTTPRoute alone, its Gateway in another
    file, was taken for Envoy Gateway's and --proxy nginx refused)."""
    kinds = {str(o.get("kind")) for o in objects}
    if proxy == PROXY and "HTTPRoute" in kinds:
        return True
    nginx_gateways = {str(o.mapping("metadata").get("name")) for o in objects
                      if o.get("kind") == "Gateway" and o.mapping("spec").get("gatewayClassName") == CLASS}
    parents = {str(p.get("name")) for o in objects if o.get("kind") == "HTTPRoute"
               for p in o.mapping("spec").items_list("parentRefs") if isinstance(p, YamlMap)}
    return "HTTPRoute" in kinds and (bool(kinds & set(POLICIES)) or bool(parents & nginx_gateways))


def _converted(kind: str, keys: tuple[str, ...], value: object) -> str:
    if keys == ("buffering", "disable"):
        return "off" if value is True or str(value).lower() == "true" else "on"
    if keys == ("buffering", "buffers") and isinstance(value, YamlMap):
        return f"{value.get('number')} {value.get('size')}"
    return str(value)


def translate(manifest: Path, objects: list[YamlMap], folder: Path,
              paths: tuple[str, ...] | None = None) -> Translation:
    schemas.check(manifest, objects, (GROUP,))
    notes: list[str] = []
    route, rule, match, path, exact = gateway._route(manifest, [o for o in objects if o.get("kind") == "HTTPRoute"],
                                                     notes, paths or API_PATHS)
    name = str(route.mapping("metadata").get("name", "?"))
    label = f"HTTPRoute {name}"
    parents = {str(p.get("name")) for p in route.mapping("spec").items_list("parentRefs") if isinstance(p, YamlMap)}
    backend = rule.items_list("backendRefs")[0] if rule.items_list("backendRefs") else None
    if backend is None:
        raise UnusableInput(f"{label}: the rule serving {path} has no backendRefs", file=display_path(manifest))
    service = str(backend.get("name", "backend"))
    # The route's own policy first, then its Gateway's (inherited); UpstreamSettingsPolicy targets the Service.
    targets = {"UpstreamSettingsPolicy": [("Service", service)]}
    chosen: dict[str, list[YamlMap]] = {
        kind: [p for target in targets.get(kind, [("HTTPRoute", name), *(("Gateway", g) for g in sorted(parents))])
               for p in _targeting(objects, kind, target)] for kind in POLICIES[:3]}
    placed: dict[str, list[nginx_conf.Directive]] = {"http": [], "upstream": [], "location": []}
    for kind, keys, directive, default, level, source in FIELDS:
        found = next(((p, owner) for p in chosen[kind] for owner in [_owner(p, keys)]
                      if owner is not None and keys[-1] in owner), None)
        if found is not None:
            policy, owner = found
            origin = where(manifest, owner, keys[-1],
                           f"{kind} {policy.mapping('metadata').get('name')} spec.{'.'.join(keys)}")
            placed[level].append((f"{directive} {_converted(kind, keys, owner[keys[-1]])};", origin))
        elif default is not None:
            placed[level].append((f"{directive} {default};", source))
    for kind in POLICIES[:3]:
        notes += _left_out(kind, chosen[kind])
    notes += [f"SnippetsFilter {f.mapping('metadata').get('name')} is not applied (its nginx text: "
              f"{str(s.get('value', '')).strip()[:120]!r})"
              for f in objects if f.get("kind") == "SnippetsFilter" for s in f.mapping("spec").items_list("snippets")
              if isinstance(s, YamlMap)]
    pods = pods_of(manifest, objects, service, asked=paths is not None)
    balancing, set_by_policy = _balancing(manifest, chosen["UpstreamSettingsPolicy"], pods.count)
    if balancing is not None:
        placed["upstream"].insert(0, balancing)
    if pods.count > 1 and "assumed" in pods.origin:
        notes.append(pods.origin)
    keepalive = next(t for t, _ in placed["upstream"] if t.startswith("keepalive "))
    connection = '""' if keepalive != "keepalive 0;" else "close"
    template = f"NGF's location template ({SOURCE}/servers_template.go)"
    location = [("proxy_http_version 1.1;", template),
                (f"proxy_set_header Connection {connection};",
                 f"NGF's $connection_keepalive map: empty with upstream keepalive, else close ({template})"),
                *placed["location"]]
    if keepalive == "keepalive 0;":
        placed["upstream"] = [d for d in placed["upstream"] if not d[0].startswith("keepalive ")]
    backend_origin = where(manifest, rule, "backendRefs", f"{label} spec.rules.backendRefs")
    hosts = [str(h) for h in route.mapping("spec").items_list("hostnames")]
    target, origins = nginx_conf.write(
        folder, f"NGINX Gateway Fabric's nginx for {label}", manifest, http=placed["http"],
        upstream=placed["upstream"], location=location,
        server=(f"{service}:{int(backend.get('port', 80))}", backend_origin), host=hosts[0] if hosts else None,
        pods=pods.servers(service, int(backend.get("port", 80))) if pods.count > 1 else None,
        path=(f"= {path}" if exact else path, where(manifest, match, "path", f"{label} spec.rules.matches.path")))
    vocabulary = {"proxy_buffering": ("ProxySettingsPolicy spec.buffering.disable: {value}",
                                      lambda value: {"on": "false", "off": "true"}.get(value, value)),
                  "proxy_read_timeout": ("ProxySettingsPolicy spec.timeout.read: {value}", str),
                  "proxy_send_timeout": ("ProxySettingsPolicy spec.timeout.send: {value}", str)}
    return Translation(manifest, target, PROXY, origins, notes,
                       f"{label} ({display_path(manifest)}:{route.line()}) path {path}", vocabulary,
                       pool_where=balancing[1] if balancing and set_by_policy else backend_origin,
                       affinity_fix=AFFINITY_FIX.format(service=service))


def _balancing(manifest: Path, policies: list[YamlMap], pods: int) -> tuple[nginx_conf.Directive | None, bool]:
    """(the upstream's method directive, whether a policy set it): the Service's
    UpstreamSettingsPolicy's, or NGF's default where there are pods to balance (None with one pod
    and no method: the chat route as before)."""
    policy = next((p for p in policies if "loadBalancingMethod" in p.mapping("spec")), None)
    if policy is None:
        if pods == 1:
            return None, False
        return (f"{BALANCING_DEFAULT};", f"NGF's default load-balancing method (the UpstreamSettingsPolicy CRD: "
                                         f"{SOURCE}/upstreams.go)"), False
    spec, name = policy.mapping("spec"), f"UpstreamSettingsPolicy {policy.mapping('metadata').get('name')}"
    method = str(spec["loadBalancingMethod"])
    origin = where(manifest, spec, "loadBalancingMethod", f"{name} spec.loadBalancingMethod")
    if PLUS_ONLY in method:
        raise UnusableInput(f"{name} spec.loadBalancingMethod: {method!r} is NGINX Plus's; verify runs open-source "
                            "nginx, which has no least_time (a limit of verify, not a fault of the manifest)",
                            file=display_path(manifest), line=policy.line())
    if method == "round_robin":
        return ("# round robin: nginx's default method", origin), True
    if method.startswith("hash") and not spec.get("hashMethodKey"):
        raise UnusableInput(f"{name}: hashMethodKey is required when loadBalancingMethod is 'hash' or 'hash "
                            "consistent' (the CRD's validation rule)", file=display_path(manifest), line=policy.line())
    if method.startswith("hash"):
        consistent = " consistent" if method.endswith("consistent") else ""
        return (f"hash {spec.get('hashMethodKey')}{consistent};", origin), True
    return (f"{method};", origin), True


def _targeting(objects: list[YamlMap], kind: str, target: tuple[str, str]) -> list[YamlMap]:
    found = []
    for policy in (o for o in objects if o.get("kind") == kind):
        spec = policy.mapping("spec")
        refs = spec.items_list("targetRefs") or ([spec.mapping("targetRef")] if "targetRef" in spec else [])
        if any((str(r.get("kind")), str(r.get("name"))) == target for r in refs if isinstance(r, YamlMap)):
            found.append(policy)
    return found


def _owner(policy: YamlMap, keys: tuple[str, ...]) -> YamlMap | None:
    owner = policy.mapping("spec")
    for key in keys[:-1]:
        owner = owner.mapping(key)
    return owner if isinstance(owner, YamlMap) else None


def _left_out(kind: str, policies: list[YamlMap]) -> list[str]:
    notes = []
    for policy in policies:
        found: list[str] = []

        def walk(node: YamlMap, trail: tuple[str, ...]) -> None:
            for key, value in node.items():
                here = (*trail, str(key))
                if (kind, here) in READ or key in ("targetRef", "targetRefs"):
                    continue
                if isinstance(value, YamlMap) and any(k == kind and r[:len(here)] == here for k, r in READ):
                    walk(value, here)
                else:
                    found.append(".".join(here))
        walk(policy.mapping("spec"), ())
        if found:
            notes.append(f"{kind} {policy.mapping('metadata').get('name')}: not translated (not read by verify): "
                         f"{', '.join(found)}")
    return notes
