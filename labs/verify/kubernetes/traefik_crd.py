"""Traefik's Kubernetes CRDs: an IngressRoute and the Middlewares it names, translated into the
file provider's dynamic configuration Traefik builds from them (a router per route, a middleware
per Middleware, a load balancer per service), judged with one entry point (`web`) at Traefik's
defaults: the entry point's own timeouts are static configuration (Helm values), outside the
manifests, and said so. Each line remembers its manifest field."""
from __future__ import annotations

import json
from pathlib import Path

from labs.findings import UnusableInput
from labs.verify.kubernetes.manifests import Lines, Translation, where
from labs.verify.kubernetes.schemas import plain as _plain
from labs.verify.model import display_path
from labs.verify.yamlpos import YamlMap

KINDS = ("IngressRoute",)
PROXY = "traefik"  # what the controller runs: the translation's proxy, and --proxy's
TRANSLATED = "traefik.yml"  # the translation's file name, which its file provider names too


def translate(manifest: Path, objects: list[YamlMap], folder: Path) -> Translation:
    routes = [o for o in objects if o.get("kind") == "IngressRoute"]
    middlewares = {str(o.mapping("metadata").get("name")): o for o in objects if o.get("kind") == "Middleware"}
    lines = Lines()
    notes = ["the entry point's timeouts (readTimeout, writeTimeout, idleTimeout) and experimental.fastProxy "
             "are Traefik's static configuration, not in these manifests: judged at Traefik's defaults "
             "(Go's proxy, which cuts a stream now and then: docs/field-notes.md#traefiks-early-cut)"]
    lines.add(f"# Traefik's dynamic configuration for {display_path(manifest)}, as verify translates it")
    lines.add("entryPoints:")
    lines.add("  web:")
    lines.add('    address: ":80"')
    # In the cluster the kubernetescrd provider turns the objects into this dynamic configuration;
    # a file provider naming this file stands for it, so Traefik reads the `http:` part as it would.
    lines.add("providers:")
    lines.add("  file:")
    lines.add(f"    filename: {TRANSLATED}")
    lines.add("http:")
    lines.add("  routers:")
    services: list[tuple[str, YamlMap, YamlMap]] = []
    used: set[str] = set()
    for route in routes:
        name = str(route.mapping("metadata").get("name", "route"))
        for index, rule in enumerate(route.mapping("spec").items_list("routes")):
            label = f"IngressRoute {name} spec.routes[{index}]"
            router = f"{name}-{index}"
            lines.add(f"    {router}:")
            lines.add("      entryPoints: [web]")
            lines.add(f"      rule: {json.dumps(str(rule.get('match', '')))}", where(manifest, rule, "match", f"{label}.match"))
            if "priority" in rule:
                lines.add(f"      priority: {int(rule['priority'])}", where(manifest, rule, "priority", f"{label}.priority"))
            names = [str(m.get("name")) for m in rule.items_list("middlewares") if isinstance(m, YamlMap)]
            if names:
                used.update(names)
                lines.add(f"      middlewares: [{', '.join(names)}]", where(manifest, rule, "middlewares",
                                                                             f"{label}.middlewares"))
            backends = [s for s in rule.items_list("services") if isinstance(s, YamlMap)]
            if not backends:
                raise UnusableInput(f"{label} has no services", file=display_path(manifest))
            lines.add(f"      service: {router}", where(manifest, rule, "services", f"{label}.services"))
            services.append((router, backends[0], rule))
    missing = sorted(used - set(middlewares))
    if missing:
        notes.append(f"Middlewares not among the manifests (left out): {', '.join(missing)}")
    lines.add("  middlewares:" if used - set(missing) else "  middlewares: {}")
    for name in sorted(used - set(missing)):
        spec = middlewares[name].mapping("spec")
        lines.add(f"    {name}:", where(manifest, middlewares[name], "spec", f"Middleware {name} spec"))
        for key, value in spec.items():
            lines.add(f"      {key}: {json.dumps(_plain(value))}",
                      where(manifest, spec, key, f"Middleware {name} spec.{key}"))
    lines.add("  services:")
    for router, backend, rule in services:
        port = backend.get("port", 80)
        lines.add(f"    {router}:")
        lines.add("      loadBalancer:")
        lines.add(f"        servers: [{{url: 'http://{backend.get('name', 'backend')}:{port if isinstance(port, int) else 80}'}}]",
                  where(manifest, backend, "name", f"service {backend.get('name')}"))
        if "sticky" in backend:  # session affinity (an MCP route's): the same field in the file provider
            lines.add(f"        sticky: {json.dumps(_plain(backend['sticky']))}",
                      where(manifest, backend, "sticky", f"service {backend.get('name')} sticky"))
        flush = backend.mapping("responseForwarding").get("flushInterval")
        if flush is not None:
            lines.add(f"        responseForwarding: {{flushInterval: {json.dumps(str(flush))}}}",
                      where(manifest, backend.mapping("responseForwarding"), "flushInterval",
                            f"service {backend.get('name')} responseForwarding.flushInterval"))
    target = folder / TRANSLATED
    target.write_text("\n".join(lines.text) + "\n")
    first = routes[0] if routes else None
    if first is None:
        raise UnusableInput("no IngressRoute among the manifests", file=display_path(manifest))
    return Translation(manifest, target, PROXY, lines.origins, notes,
                       f"IngressRoute {first.mapping('metadata').get('name')} ({display_path(manifest)}:{first.line()})")
