"""Tell Kubernetes manifests apart and hand them to the controller's translation (one module each)."""
from __future__ import annotations

from pathlib import Path

from labs.findings import UnusableInput
from labs.verify.kubernetes import (ai_gateway, f5_nginx_ingress, gateway, ingress_nginx, nginx_gateway_fabric,
                                    traefik_crd)
from labs.verify.kubernetes.manifests import Translation, documents, looks_like, scratch_folder
from labs.verify.model import display_path

# ai_gateway before gateway: a file with an AIGatewayRoute is read as the HTTPRoute it derives.
# A controller with `claims` is asked first (NGF and F5's controller share kinds with ingress-nginx and
# Envoy Gateway: their policies, class or annotation family tell them apart); the others go by kind.
CONTROLLERS = (f5_nginx_ingress, nginx_gateway_fabric, ingress_nginx, ai_gateway, gateway, traefik_crd)


def translate(path: Path, proxy: str | None = None, paths: tuple[str, ...] | None = None) -> Translation | None:
    """The manifests' translation, or None when the file holds no Kubernetes objects. With
    `--proxy`, objects of the controller that runs that proxy are translated as detection does
    (kreatoo-open-webui-ingressroute, tests/data/wild: `--proxy traefik` on an IngressRoute read it
    as a file-provider file, "no HTTP router"); objects verify does not translate go to the proxy's
    own reader, which says what it makes of the file. `paths`: the route asked for (--path, --mcp),
    handed to the controllers that translate any route (`ROUTES_BY_PATH`); the others translate
    the chat API's route, and verify says when the one asked is not among it (labs/verify/run.py)."""
    if not looks_like(path):
        return None
    objects = documents(path)
    if not objects:
        return None
    kinds = {str(o.get("kind")) for o in objects}
    for controller in CONTROLLERS:
        claims = getattr(controller, "claims", None)
        found = sorted(kinds & set(controller.KINDS)) if claims is None or claims(objects, proxy) else []
        if found and proxy not in (None, controller.PROXY):
            raise UnusableInput(f"the file holds {', '.join(found)}, which verify runs as {controller.PROXY} "
                                f"(the controller's proxy), not {proxy}: pass --proxy {controller.PROXY}, or "
                                "leave --proxy out", file=display_path(path))
        if found:
            if paths is not None and getattr(controller, "ROUTES_BY_PATH", False):
                return controller.translate(path, objects, scratch_folder(), paths=paths)
            return controller.translate(path, objects, scratch_folder())
    if proxy is not None:
        return None
    raise UnusableInput(f"no object verify translates (it reads "
                        f"{', '.join(dict.fromkeys(k for c in CONTROLLERS for k in c.KINDS))}); "
                        f"found: {', '.join(sorted(kinds))}", file=display_path(path))
