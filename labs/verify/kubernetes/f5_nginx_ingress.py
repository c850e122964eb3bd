"""F5 NGINX Ingress Controller (5.5): an Ingress with its `nginx.org/*` annotations, or a
VirtualServer (its upstreams' buffering and timeouts), translated into the nginx its templates
render (read at v5.5.4: internal/configs/version1/nginx.ingress.tmpl, version2/
nginx.virtualserver.tmpl; defaults in internal/configs/config_params.go): `proxy_http_version 1.1`,
`proxy_buffering on`, connect/read/send timeouts 60s, `client_max_body_size 1m`, no upstream
keepalive unless set (then `Connection ""`).

This controller reads `nginx.org/*`, not ingress-nginx's `nginx.ingress.kubernetes.io/*`: an
annotation of the other family is told as ignored, at its line. An `nginx.org/` annotation the
controller does not know is named; snippets are said, not applied. The VirtualServer is checked
against the controller's CRD schema (labs/verify/kubernetes/schemas.py).
"""
from __future__ import annotations

from pathlib import Path

from labs.findings import UnusableInput
from labs.verify.kubernetes import ingress_nginx, nginx_conf, schemas
from labs.verify.kubernetes.manifests import Translation, where
from labs.verify.model import API_PATHS, display_path
from labs.verify.yamlpos import YamlMap

VIRTUAL = ("VirtualServer", "VirtualServerRoute")
KINDS = ("Ingress", *VIRTUAL)
PROXY = "nginx"
PREFIX = "nginx.org/"
OTHER_FAMILY = ingress_nginx.PREFIX
GROUP = "k8s.nginx.org"
SOURCE = "https://github.com/nginx/kubernetes-ingress/blob/v5.5.4/internal/configs"
DOCS = "https://docs.nginx.com/nginx-ingress-controller/configuration/ingress-resources/advanced-configuration-with-annotations/"

# (annotation after nginx.org/, VirtualServer upstream field, directive, default, where it goes)
FIELDS: tuple[tuple[str, str | None, str, str | None, str], ...] = (
    ("proxy-buffering", "buffering", "proxy_buffering", "on", "location"),
    ("proxy-buffers", "buffers", "proxy_buffers", None, "location"),
    ("proxy-buffer-size", "buffer-size", "proxy_buffer_size", None, "location"),
    ("proxy-busy-buffers-size", None, "proxy_busy_buffers_size", None, "location"),
    ("proxy-max-temp-file-size", None, "proxy_max_temp_file_size", None, "location"),
    ("proxy-connect-timeout", "connect-timeout", "proxy_connect_timeout", "60s", "location"),
    ("proxy-read-timeout", "read-timeout", "proxy_read_timeout", "60s", "location"),
    ("proxy-send-timeout", "send-timeout", "proxy_send_timeout", "60s", "location"),
    ("client-max-body-size", "client-max-body-size", "client_max_body_size", "1m", "location"),
    ("keepalive", "keepalive", "keepalive", None, "upstream"),
)
# Every annotation the controller reads (git grep '"nginx.org/' internal/ at v5.5.4): known, not translated.
KNOWN = frozenset((
    "add-header add-header-inherit apikey app-root basic-auth-realm basic-auth-secret ca client-body-buffer-size "
    "fail-timeout grpc-services hsts hsts-behind-proxy hsts-include-subdomains hsts-max-age htpasswd "
    "http-redirect-code ingress-controller jwk lb-method limit-req-burst limit-req-delay limit-req-dry-run "
    "limit-req-key limit-req-log-level limit-req-no-delay limit-req-rate limit-req-reject-code limit-req-scale "
    "limit-req-zone-size listen-ports listen-ports-ssl location-snippets max-conns max-fails mergeable-ingress-type "
    "oidc path-regex policies proxy-hide-headers proxy-next-upstream proxy-next-upstream-timeout "
    "proxy-next-upstream-tries proxy-pass-headers proxy-redirect-from proxy-redirect-to proxy-set-headers "
    "redirect-to-https rewrite-target rewrites server-snippets server-tokens ssl-ciphers ssl-prefer-server-ciphers "
    "ssl-redirect ssl-services sticky-cookie-services upstream-zone-size use-cluster-ip websocket-services").split())
SNIPPETS = ("server-snippets", "location-snippets")
# Go's strconv.ParseBool, which the controller's GetMapKeyAsBool uses.
BOOLEANS = {**dict.fromkeys(("1", "t", "T", "TRUE", "true", "True"), "on"),
            **dict.fromkeys(("0", "f", "F", "FALSE", "false", "False"), "off")}


def claims(objects: list[YamlMap], proxy: str | None = None) -> bool:
    """F5's: a VirtualServer, or an Ingress written in its family (more `nginx.org/` annotations than
    ingress-nginx's; a tie stays with ingress-nginx, the older reader)."""
    if any(o.get("kind") in VIRTUAL for o in objects):
        return True
    for ingress in (o for o in objects if o.get("kind") == "Ingress"):
        keys = [str(k) for k in ingress.mapping("metadata").mapping("annotations")]
        if sum(k.startswith(PREFIX) for k in keys) > sum(k.startswith(OTHER_FAMILY) for k in keys):
            return True
    return False


def _value(key: str, value: object) -> str:
    text = str(value).strip()
    if key == "proxy-buffering":
        if text not in BOOLEANS:
            raise ValueError(f"{text!r} is not a boolean (Go's ParseBool)")
        return BOOLEANS[text]
    if not text:
        raise ValueError("an empty value")
    return text


def translate(manifest: Path, objects: list[YamlMap], folder: Path) -> Translation:
    schemas.check(manifest, objects, (GROUP,))
    if any(o.get("kind") in VIRTUAL for o in objects):
        return _virtual_server(manifest, [o for o in objects if o.get("kind") in VIRTUAL], folder)
    notes: list[str] = []
    ingresses = [o for o in objects if o.get("kind") == "Ingress"]
    ingress, host, path, backend, path_node = ingress_nginx._route(manifest, ingresses)
    label = f"Ingress {ingress.mapping('metadata').get('name', '?')}"
    annotations = ingress.mapping("metadata").mapping("annotations")
    for key in annotations:
        if str(key).startswith(OTHER_FAMILY):
            notes.append(f"{where(manifest, annotations, key, label)}: annotation {key} is ingress-nginx's; "
                         f"F5 NGINX Ingress Controller ignores it (it reads nginx.org/*, {DOCS})")
    translated = {name for name, *_ in FIELDS}
    ours = [str(k)[len(PREFIX):] for k in annotations if str(k).startswith(PREFIX)]
    for name in ours:
        if name in SNIPPETS:
            notes.append(f"annotation {PREFIX}{name} is not applied (its nginx text: "
                         f"{str(annotations[PREFIX + name]).strip()[:120]!r})")
    unknown = [n for n in ours if n not in translated and n not in KNOWN]
    if unknown:
        notes.append("annotations F5 NGINX Ingress Controller does not know (ignored): "
                     + ", ".join(PREFIX + n for n in unknown))
    left = [n for n in ours if n in KNOWN and n not in SNIPPETS]
    if left:
        notes.append("annotations not translated (not read by verify): " + ", ".join(PREFIX + n for n in left))
    placed: dict[str, list[nginx_conf.Directive]] = {"upstream": [], "location": []}
    for name, _, directive, default, level in FIELDS:
        key = PREFIX + name
        fallback = f"F5 NGINX Ingress Controller's default ({SOURCE}/config_params.go)"
        if key in annotations:
            try:
                text = _value(name, annotations[key])
            except ValueError as exc:
                # The controller validates its annotations before it configures anything
                # (internal/k8s/validation.go: proxy-buffering is validateBoolAnnotation) and rejects
                # the whole Ingress ("Warning Rejected", every path 404 at the default backend), so
                # there is no stream to measure: the user's error, said at its line.
                raise UnusableInput(f"{label}: annotation {key}: {exc}: F5 NGINX Ingress Controller rejects "
                                    f"the whole Ingress (nothing of it is served); write \"true\" or \"false\"",
                                    file=display_path(manifest), line=annotations.line(key)) from None
            else:
                placed[level].append((f"{directive} {text};", where(manifest, annotations, key,
                                                                     f'{label} metadata.annotations."{key}"')))
                continue
        if default is not None:
            placed[level].append((f"{directive} {default};", fallback))
    service = backend.mapping("service")
    port = service.mapping("port").get("number") or 80
    if not isinstance(port, int):
        notes.append(f"the backend port is named ({port!r}): taken as 80 here (the lab's server replaces it)")
        port = 80
    backend_origin = where(manifest, backend, "service", f"{label} backend service {service.get('name')}")
    return _written(manifest, folder, label, ingress, placed, notes, (f"{service.get('name', 'backend')}:{port}",
                                                                     backend_origin),
                    host, (path, where(manifest, path_node, "path", f"{label} path {path}")), _ingress_words)


def _virtual_server(manifest: Path, objects: list[YamlMap], folder: Path) -> Translation:
    """The VirtualServer route (or a VirtualServerRoute's subroute it delegates to) that serves the
    chat path, longest first, with the upstream its action passes to."""
    candidates = []  # (path, route node, its owner's upstreams by name, label of the owner)
    for owner in objects:
        spec = owner.mapping("spec")
        upstreams = {str(u.get("name")): u for u in spec.items_list("upstreams") if isinstance(u, YamlMap)}
        label = f"{owner.get('kind')} {owner.mapping('metadata').get('name', '?')}"
        routes = "routes" if owner.get("kind") == "VirtualServer" else "subroutes"
        candidates += [(str(r.get("path", "/")), r, upstreams, label, owner, routes)
                       for r in spec.items_list(routes) if isinstance(r, YamlMap) and "action" in r]
    for chat in API_PATHS:
        best = None
        for candidate in candidates:
            prefix = candidate[0]
            bare = prefix.lstrip("= ")
            ok = chat == bare if prefix.startswith("=") else (
                bare == "/" or chat == bare or chat.startswith(bare.rstrip("/") + "/"))
            if ok and (best is None or len(bare) > len(best[0].lstrip("= "))):
                best = candidate
        if best is None:
            continue
        prefix, route, upstreams, label, owner, routes = best
        name = str(route.mapping("action").get("pass", ""))
        if name not in upstreams:
            raise UnusableInput(f"{label}: the route for {prefix} does not pass to an upstream of its own "
                                f"(action.pass {name!r}; verify reads action.pass only)",
                                file=display_path(manifest), line=route.line())
        upstream = upstreams[name]
        placed: dict[str, list[nginx_conf.Directive]] = {"upstream": [], "location": []}
        for _, field, directive, default, level in FIELDS:
            fallback = f"F5 NGINX Ingress Controller's default ({SOURCE}/config_params.go)"
            if field and field in upstream:
                value = upstream[field]
                text = ("on" if value is True else "off") if field == "buffering" else (
                    f"{value.get('number')} {value.get('size')}" if isinstance(value, YamlMap) else str(value))
                placed[level].append((f"{directive} {text};", where(
                    manifest, upstream, field, f"{label} spec.upstreams[{name}].{field}")))
            elif default is not None:
                placed[level].append((f"{directive} {default};", fallback))
        origin = where(manifest, upstream, "service", f"{label} spec.upstreams[{name}].service")
        return _written(manifest, folder, label, owner, placed, [],
                        (f"{upstream.get('service', 'backend')}:{int(upstream.get('port', 80))}", origin),
                        owner.mapping("spec").get("host"),
                        (prefix, where(manifest, route, "path", f"{label} spec.{routes}.path")),
                        _virtual_server_words(label, name))
    raise UnusableInput(f"no VirtualServer route serves POST {API_PATHS[0]}", file=display_path(manifest))


def _written(manifest: Path, folder: Path, label: str, owner: YamlMap, placed, notes, server, host, path,
             vocabulary) -> Translation:
    keepalive = [d for d in placed["upstream"] if d[0].startswith("keepalive ") and d[0] != "keepalive 0;"]
    placed["upstream"] = [d for d in placed["upstream"] if d[0] != "keepalive 0;"]
    template = f"F5 NGINX Ingress Controller's location template ({SOURCE}/version1/nginx.ingress.tmpl)"
    location = [("proxy_http_version 1.1;", template), *placed["location"]]
    if keepalive:
        location.insert(1, ('proxy_set_header Connection "";', f"{template}: with upstream keepalive"))
    target, origins = nginx_conf.write(folder, f"F5 NGINX Ingress Controller's nginx for {label}", manifest,
                                       http=[], upstream=placed["upstream"], location=location, server=server,
                                       host=host, path=path)
    return Translation(manifest, target, PROXY, origins, notes,
                       f"{label} ({display_path(manifest)}:{owner.line()}) path {path[0]}", vocabulary)




_ingress_words = {"proxy_buffering": (f'the annotation {PREFIX}proxy-buffering: "{{value}}"',
                                      lambda value: {"on": "True", "off": "False"}.get(value, value)),
                  "proxy_read_timeout": (f'the annotation {PREFIX}proxy-read-timeout: "{{value}}"', str),
                  "proxy_send_timeout": (f'the annotation {PREFIX}proxy-send-timeout: "{{value}}"', str)}


def _virtual_server_words(label: str, upstream: str) -> dict:
    kind = label.split()[0]
    return {"proxy_buffering": (f"{kind} spec.upstreams[{upstream}].buffering: {{value}}",
                                lambda value: {"on": "true", "off": "false"}.get(value, value)),
            "proxy_read_timeout": (f"{kind} spec.upstreams[{upstream}].read-timeout: {{value}}", str),
            "proxy_send_timeout": (f"{kind} spec.upstreams[{upstream}].send-timeout: {{value}}", str)}
