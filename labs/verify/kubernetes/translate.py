"""Tell Kubernetes manifests apart and hand them to the controller's translation (one module each)."""
from __future__ import annotations

from pathlib import Path

from labs.findings import UnusableInput
from labs.verify.kubernetes import gateway, ingress_nginx, traefik_crd
from labs.verify.kubernetes.manifests import Translation, documents, looks_like, scratch_folder
from labs.verify.model import display_path

CONTROLLERS = (ingress_nginx, gateway, traefik_crd)


def translate(path: Path) -> Translation | None:
    """The manifests' translation, or None when the file holds no Kubernetes objects."""
    if not looks_like(path):
        return None
    objects = documents(path)
    if not objects:
        return None
    kinds = {str(o.get("kind")) for o in objects}
    for controller in CONTROLLERS:
        if kinds & set(controller.KINDS):
            return controller.translate(path, objects, scratch_folder())
    raise UnusableInput(f"no object verify translates (it reads "
                        f"{', '.join(ingress_nginx.KINDS + gateway.KINDS + traefik_crd.KINDS)}); "
                        f"found: {', '.join(sorted(kinds))}", file=display_path(path))
