"""Kubernetes manifests, translated into the proxy config their controller would run (ingress-nginx,
F5 NGINX Ingress Controller, NGINX Gateway Fabric: nginx; Gateway API with Envoy Gateway: Envoy), then judged and measured like any config, with every
finding pointed back at the manifest's field (labs/verify/kubernetes/manifests.py)."""
from labs.verify.kubernetes.manifests import Translation
from labs.verify.kubernetes.translate import translate

__all__ = ["Translation", "translate"]
