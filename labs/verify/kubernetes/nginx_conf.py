"""The nginx config a controller built on nginx renders for one route (NGINX Gateway Fabric, F5
NGINX Ingress Controller): one upstream, one server, one location, each directive with the manifest
field or the controller's default it stands for. The controllers' own readers say which directives."""
from __future__ import annotations

from pathlib import Path

from labs.verify.kubernetes.manifests import Lines
from labs.verify.model import display_path

Directive = tuple[str, str]  # ("proxy_buffering on;", its origin)


def write(folder: Path, title: str, manifest: Path, *, http: list[Directive], upstream: list[Directive],
          location: list[Directive], server: tuple[str, str], host: str | None, path: tuple[str, str],
          snippets: list[Directive] = (), pods: list[str] | None = None) -> tuple[Path, dict[int, str]]:
    """nginx.conf in `folder` and the origin of each of its lines. `server` is the backend
    ("name:port", origin), `path` the location's (nginx location text, origin); `pods`: the
    backend's servers when they are several pods (labs/verify/kubernetes/pods.py)."""
    lines = Lines()
    lines.add(f"# {title} ({display_path(manifest)}), as verify translates it")
    lines.add("events {")
    lines.add("}")
    lines.add("http {")
    for text, origin in http:
        lines.add(f"    {text}", origin)
    lines.add("    upstream backend {")
    for address in pods or [server[0]]:
        lines.add(f"        server {address};", server[1])
    for text, origin in upstream:
        lines.add(f"        {text}", origin)
    lines.add("    }")
    lines.add("    server {")
    lines.add("        listen 80;")
    lines.add(f"        server_name {host or '_'};", path[1])
    lines.add(f"        location {path[0]} {{", path[1])
    for text, origin in [*location, *snippets]:
        lines.add(f"            {text}", origin)
    lines.add("            proxy_pass http://backend;", server[1])
    lines.add("        }")
    lines.add("    }")
    lines.add("}")
    target = folder / "nginx.conf"
    target.write_text("\n".join(lines.text) + "\n")
    return target, lines.origins
