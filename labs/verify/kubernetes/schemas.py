"""A controller's custom resources checked against the schema vendored from its own CRD
(proxies/kubernetes/schemas/, SOURCES.md): a field the controller does not know is one line naming
it, as the API server's strict field validation would refuse the object."""
from __future__ import annotations

from pathlib import Path

from labs.findings import UnusableInput
from labs.verify.model import display_path
from labs.verify.yamlpos import YamlMap
from proxies.kubernetes.validate import ManifestInvalid, validate_object


def plain(value):
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def check(manifest: Path, objects: list[YamlMap], groups: tuple[str, ...]) -> None:
    """Each object of the controller's API groups against its schema; UnusableInput on the first refused."""
    for item in objects:
        if str(item.get("apiVersion", "")).split("/")[0] not in groups:
            continue
        document = plain(item)
        document.pop("status", None)
        try:
            validate_object(document)
        except ManifestInvalid as exc:
            raise UnusableInput(f"{exc}: the controller's schema refuses it "
                                "(proxies/kubernetes/schemas/SOURCES.md)",
                                file=display_path(manifest), line=item.line()) from None
