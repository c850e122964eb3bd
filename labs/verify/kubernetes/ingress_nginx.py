"""ingress-nginx: an Ingress (its annotations) and the controller's ConfigMap, translated into the
nginx directives the controller (1.15, its last releases) generates for the route, with its own
defaults where the manifests say nothing. Each line remembers its manifest field or the default.

Only the streaming-relevant keys are translated (KEYS); every other `nginx.ingress.kubernetes.io/`
annotation and ConfigMap key is listed in the notes, never silently dropped. Snippets
(`configuration-snippet`, `server-snippet`) are not applied: their nginx text is said.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable

from labs.findings import UnusableInput
from labs.verify.kubernetes.manifests import Lines, Translation, where
from labs.verify.model import API_PATHS, display_path
from labs.verify.yamlpos import YamlMap

KINDS = ("Ingress",)
PROXY = "nginx"  # what the controller runs: the translation's proxy, and --proxy's
PREFIX = "nginx.ingress.kubernetes.io/"
DOCS = "https://kubernetes.github.io/ingress-nginx/user-guide/nginx-configuration"


def _seconds(value: str) -> str:
    text = str(value).strip()
    if not re.fullmatch(r"\d+[smh]?", text):
        raise ValueError(f"{value!r} is not a number of seconds")
    return text if text[-1] in "smh" else f"{text}s"


def _on_off(value: str) -> str:
    text = str(value).strip().lower()
    if text in ("on", "true"):
        return "on"
    if text in ("off", "false"):
        return "off"
    raise ValueError(f"{value!r} is not on/off")


def _text(value: str) -> str:
    return str(value).strip()


def _annotation(value: object, convert: Callable[[str], str]) -> str:
    """An annotation's value as its directive's; ValueError for an empty one (ingress-nginx's
    `parseString` rejects it as invalid content) or one the converter cannot read."""
    if value is None or not str(value).strip():
        raise ValueError("an empty value")
    return convert(str(value))


# (ConfigMap key, annotation or None, nginx directive, the controller's default, converter, where it goes)
KEYS: tuple[tuple[str, str | None, str, str, Callable[[str], str], str], ...] = (
    ("proxy-buffering", "proxy-buffering", "proxy_buffering", "off", _on_off, "http"),
    ("proxy-request-buffering", "proxy-request-buffering", "proxy_request_buffering", "on", _on_off, "http"),
    ("proxy-http-version", "proxy-http-version", "proxy_http_version", "1.1", _text, "http"),
    ("proxy-read-timeout", "proxy-read-timeout", "proxy_read_timeout", "60", _seconds, "http"),
    ("proxy-send-timeout", "proxy-send-timeout", "proxy_send_timeout", "60", _seconds, "http"),
    ("proxy-connect-timeout", "proxy-connect-timeout", "proxy_connect_timeout", "5", _seconds, "http"),
    ("proxy-body-size", "proxy-body-size", "client_max_body_size", "1m", _text, "http"),
    ("client-header-timeout", None, "client_header_timeout", "60", _seconds, "http"),
    ("client-body-timeout", None, "client_body_timeout", "60", _seconds, "http"),
    ("keep-alive", None, "keepalive_timeout", "75", _seconds, "http"),
    ("use-gzip", None, "gzip", "false", _on_off, "http"),
    ("gzip-types", None, "gzip_types", "application/atom+xml application/javascript application/x-javascript "
     "application/json application/rss+xml application/vnd.ms-fontobject application/x-font-ttf "
     "application/x-web-app-manifest+json application/xhtml+xml application/xml font/opentype image/svg+xml "
     "image/x-icon text/css text/javascript text/plain text/x-component", _text, "http"),
    ("worker-shutdown-timeout", None, "worker_shutdown_timeout", "240s", _text, "main"),
    ("max-worker-connections", None, "worker_connections", "16384", _text, "events"),
    ("upstream-keepalive-connections", None, "keepalive", "320", _text, "upstream"),
    ("upstream-keepalive-timeout", None, "keepalive_timeout", "60", _seconds, "upstream"),
)
# Read, and not nginx directives of their own.
KNOWN_OTHERS = {"kubernetes.io/ingress.class", "ingressclass.kubernetes.io/is-default-class"}
SNIPPETS = ("configuration-snippet", "server-snippet")


def translate(manifest: Path, objects: list[YamlMap], folder: Path) -> Translation:
    ingresses = [o for o in objects if o.get("kind") == "Ingress"]
    configmaps = [o for o in objects if o.get("kind") == "ConfigMap" and _is_controller_map(o)]
    notes: list[str] = []
    ingress, rule_host, path, backend, path_node = _route(manifest, ingresses)
    annotations = ingress.mapping("metadata").mapping("annotations")
    data = configmaps[0].mapping("data") if configmaps else YamlMap()
    if not configmaps:
        notes.append("no ingress-nginx-controller ConfigMap among the manifests: the controller's defaults "
                     f"are used ({DOCS}/configmap/)")
    known_map = {key for key, *_ in KEYS}
    known_annotations = {a for _, a, *_ in KEYS if a}
    left = [k for k in data if k not in known_map]
    if left:
        notes.append(f"ConfigMap keys not translated (not read by verify): {', '.join(sorted(left))}")
    notes += [f"{where(manifest, annotations, k, 'annotation')} {k} is F5 NGINX Ingress Controller's; ingress-nginx "
              "ignores it" for k in annotations if str(k).startswith("nginx.org/")]
    others = [k for k in annotations if k.startswith(PREFIX) and k[len(PREFIX):] not in known_annotations]
    for key in others:
        if key[len(PREFIX):] in SNIPPETS:
            notes.append(f"annotation {key} is not applied (its nginx text: {str(annotations[key]).strip()[:120]!r})")
    if [k for k in others if k[len(PREFIX):] not in SNIPPETS]:
        notes.append("annotations not translated (not read by verify): "
                     + ", ".join(sorted(k for k in others if k[len(PREFIX):] not in SNIPPETS)))
    lines = Lines()
    place: dict[str, list[tuple[str, str]]] = {"main": [], "events": [], "http": [], "upstream": [], "location": []}
    label = f"Ingress {ingress.mapping('metadata').get('name', '?')}"
    for key, annotation, directive, default, convert, level in KEYS:
        value, origin = default, f"ingress-nginx's default for {key} ({DOCS}/configmap/#{key})"
        if key in data:
            value, origin = data[key], where(manifest, data, key, f"ConfigMap data.{key}")
        try:
            text = convert(str(value))
        except ValueError as exc:
            raise UnusableInput(f"{key}: {exc}", file=display_path(manifest)) from None
        chosen_level = level
        if annotation and PREFIX + annotation in annotations:
            named = annotations[PREFIX + annotation]
            try:
                text = _annotation(named, convert)
            except ValueError as exc:
                # ingress-nginx's parsers answer an empty or malformed value with an error, and the
                # annotation is then ignored (the ConfigMap's value or the default stays).
                notes.append(f"annotation {PREFIX}{annotation}: {exc}; ingress-nginx ignores an annotation it "
                             f"cannot parse, and so does verify ({'the ConfigMap' if key in data else 'the default'}"
                             f" stays: {directive} {text})")
            else:
                origin = where(manifest, annotations, PREFIX + annotation,
                               f'{label} metadata.annotations."{PREFIX}{annotation}"')
                chosen_level = "location"
        place[chosen_level].append((f"{directive} {text};" if directive != "gzip_types" else
                                    f"gzip_types {text};", origin))
    keepalive = next(v for v, _ in place["upstream"] if v.startswith("keepalive "))
    connection = '""' if keepalive.split()[1].rstrip(";") != "0" else "close"
    service = backend.mapping("service")
    port = service.mapping("port").get("number") or service.mapping("port").get("name") or 80
    if not isinstance(port, int):
        notes.append(f"the backend port is named ({port!r}): taken as 80 here (the lab's server replaces it)")
        port = 80
    backend_where = where(manifest, backend, "service", f"{label} backend service {service.get('name')}")
    lines.add(f"# ingress-nginx's nginx for {label} ({display_path(manifest)}), as verify translates it")
    for text, origin in place["main"]:
        lines.add(text, origin)
    lines.add("events {")
    for text, origin in place["events"]:
        lines.add(f"    {text}", origin)
    lines.add("}")
    lines.add("http {")
    for text, origin in place["http"]:
        lines.add(f"    {text}", origin)
    lines.add(f'    proxy_set_header Connection {connection};',
              "ingress-nginx's $connection_upgrade map: empty with upstream keepalive, else close")
    lines.add("    upstream upstream_balancer {")
    lines.add(f"        server {service.get('name', 'backend')}:{port};", backend_where)
    for text, origin in place["upstream"]:
        lines.add(f"        {text}", origin)
    lines.add("    }")
    lines.add("    server {")
    lines.add("        listen 80;")
    lines.add(f"        server_name {rule_host or '_'};", where(manifest, path_node, "path", f"{label} rule"))
    lines.add(f"        location {path} {{", where(manifest, path_node, "path", f"{label} path {path}"))
    for text, origin in place["location"]:
        lines.add(f"            {text}", origin)
    lines.add("            proxy_pass http://upstream_balancer;", backend_where)
    lines.add("        }")
    lines.add("    }")
    lines.add("}")
    target = folder / "nginx.conf"
    target.write_text("\n".join(lines.text) + "\n")
    vocabulary = {directive: (f'the annotation {PREFIX}{annotation}: "{{value}}"' if annotation else
                              f'the ConfigMap key {key}: "{{value}}"', _manifest_value if convert is not _on_off
                              or annotation else _boolean)
                  for key, annotation, directive, _, convert, _ in KEYS if level_of(directive) != "upstream"}
    return Translation(manifest, target, PROXY, lines.origins, notes,
                       f"{label} ({display_path(manifest)}:{ingress.line()}) path {path}", vocabulary)


def level_of(directive: str) -> str:
    return next(level for _, _, d, _, _, level in KEYS if d == directive)


def _boolean(value: str) -> str:
    """nginx's on/off as the ConfigMap's booleans ("true"/"false")."""
    return {"on": "true", "off": "false"}.get(value, value)


def _manifest_value(value: str) -> str:
    """nginx's `70s` as ingress-nginx writes it (whole seconds, no unit)."""
    return value[:-1] if re.fullmatch(r"\d+s", value) else value


def _is_controller_map(configmap: YamlMap) -> bool:
    meta = configmap.mapping("metadata")
    return "ingress-nginx" in str(meta.get("name", "")) or str(meta.get("namespace", "")) == "ingress-nginx"


def _route(manifest: Path, ingresses: list[YamlMap]) -> tuple[YamlMap, str | None, str, YamlMap, YamlMap]:
    """(ingress, host, nginx location path, backend, the path's node) serving the chat API."""
    best: tuple[int, Any] | None = None
    for chat in API_PATHS:
        for ingress in ingresses:
            spec = ingress.mapping("spec")
            for rule in spec.items_list("rules"):
                for item in rule.mapping("http").items_list("paths"):
                    path, kind = str(item.get("path", "/")), str(item.get("pathType", "ImplementationSpecific"))
                    matched = chat == path if kind == "Exact" else \
                        chat.startswith(path.rstrip("/") + "/") or chat == path or path == "/"
                    if matched and (best is None or len(path) > best[0]):
                        location = f"= {path}" if kind == "Exact" else path
                        best = (len(path), (ingress, rule.get("host"), location, item.mapping("backend"), item))
        if best is not None:
            return best[1]
    for ingress in ingresses:
        default = ingress.mapping("spec").mapping("defaultBackend")
        if default:
            return ingress, None, "/", default, ingress.mapping("spec")
    raise UnusableInput(f"no Ingress path serves POST {' or '.join(API_PATHS[:2])}", file=display_path(manifest))
