"""Validate Kubernetes objects offline: the core types (Ingress, ConfigMap, Service) with
kubernetes-validate's bundled schemas, the custom resources (Gateway API, Envoy Gateway, Traefik)
against the schemas vendored from their CRDs (schemas/SOURCES.md says from where)."""
from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import yaml

SCHEMAS = Path(__file__).resolve().parent / "schemas"
KUBERNETES_VERSION = "1.33"  # the core types' schemas (kubernetes-validate bundles them offline)
CORE_GROUPS = ("v1", "networking.k8s.io/v1", "apps/v1")
# Versions served with the same schema, byte for byte (schemas/SOURCES.md): one file vendored.
SAME_SCHEMA = {"aigateway.envoyproxy.io/v1alpha1": "aigateway.envoyproxy.io/v1beta1"}


class ManifestInvalid(ValueError):
    """An exported object its schema refuses; the message names the object and the field."""


@functools.lru_cache(maxsize=None)
def _schema(api_version: str, kind: str) -> dict[str, Any]:
    group, _, version = SAME_SCHEMA.get(api_version, api_version).partition("/")
    path = SCHEMAS / f"{group}_{version}_{kind}.json"
    if not path.is_file():
        raise ManifestInvalid(f"{api_version} {kind}: no schema vendored for it (proxies/kubernetes/schemas/)")
    return _strict(json.loads(path.read_text()))


def _strict(schema: Any) -> Any:
    """As the API server's strict field validation (kubectl's default since 1.27): an unknown field
    is an error, except where the schema keeps unknown fields (x-kubernetes-preserve-unknown-fields)."""
    if isinstance(schema, dict):
        if ("properties" in schema and "additionalProperties" not in schema
                and not schema.get("x-kubernetes-preserve-unknown-fields")):
            schema["additionalProperties"] = False
        for value in schema.values():
            _strict(value)
    elif isinstance(schema, list):
        for value in schema:
            _strict(value)
    return schema


def validate_object(document: dict[str, Any]) -> None:
    api_version, kind = str(document.get("apiVersion", "")), str(document.get("kind", ""))
    name = f"{kind} {document.get('metadata', {}).get('name', '?')}"
    if api_version in CORE_GROUPS:
        import kubernetes_validate  # a test dependency: loaded only when core types are checked
        try:
            kubernetes_validate.validate(document, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            raise ManifestInvalid(f"{name}: {exc.message} (at {'.'.join(map(str, exc.path))})") from None
        return
    import jsonschema
    try:
        jsonschema.validate(document, _schema(api_version, kind))
    except jsonschema.ValidationError as exc:
        raise ManifestInvalid(f"{name}: {exc.message} (at {'.'.join(map(str, exc.absolute_path))})") from None


def validate_text(text: str) -> list[dict[str, Any]]:
    """Every object of a multi-document YAML text, each validated; the objects."""
    documents = [d for d in yaml.safe_load_all(text) if d]
    for document in documents:
        validate_object(document)
    return documents
