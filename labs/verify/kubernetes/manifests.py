"""Kubernetes manifests read with positions, and what a translation is: the translated config,
and a way to point what the proxy's reading found back at the manifest: each line of the translated config remembers the
manifest field it came from (or the controller's default it stands for)."""
from __future__ import annotations

import atexit
import re
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from labs.verify.model import Reading, display_path
from labs.verify.yamlpos import YamlMap, load_all

_MADE: list[Path] = []
atexit.register(lambda: [shutil.rmtree(p, ignore_errors=True) for p in _MADE])


def scratch_folder() -> Path:
    """A folder for one translation, removed when the process ends (a reading outlives its call)."""
    folder = Path(tempfile.mkdtemp(prefix="streamlab-k8s-"))
    _MADE.append(folder)
    return folder


@dataclass
class Lines:
    """The translated config, line by line, each with its origin ("manifest.yaml:12 field")."""

    text: list[str] = field(default_factory=list)
    origins: dict[int, str] = field(default_factory=dict)

    def add(self, line: str, origin: str | None = None) -> None:
        self.text.append(line)
        if origin:
            self.origins[len(self.text)] = origin


@dataclass
class Translation:
    manifest: Path
    path: Path  # the translated config, in a folder of its own
    proxy: str
    origins: dict[int, str]
    notes: list[str]
    route: str  # the manifest object that serves the route judged (the chat API's, or the one asked)
    # directive -> how the manifest says it ("{value}": the directive's value as the manifest writes it)
    vocabulary: dict[str, tuple[str, Any]] = field(default_factory=dict)
    # Where the translated pool's balancing comes from in the manifest, and the affinity a stateful
    # MCP route needs in the controller's own objects (verify --mcp names both; None: not said).
    pool_where: str | None = None
    affinity_fix: str | None = None

    def refix(self, text: str | None) -> str | None:
        """A fix written in the proxy's words, in the manifest's: `proxy_read_timeout 70s;` becomes
        the annotation that produces it."""
        if not text:
            return text
        for directive, (template, convert) in self.vocabulary.items():
            # As a directive is written: nginx's `name value;`, Envoy's `name: value`.
            pattern = (rf"\b{re.escape(directive)} ([^\s;,)]+)" if directive.endswith(":")
                       else rf"\b{re.escape(directive)} ([^\s;`]+)(?=;)")
            text = re.sub(pattern, lambda found: template.format(value=convert(found[1])), text)
        return text

    def relabel(self, reading: Reading) -> Reading:
        """The reading with every `where` in the translated file replaced by its manifest field."""
        shown = display_path(self.path)
        settings = {}
        for name, setting in reading.settings.items():
            found = re.fullmatch(re.escape(shown) + r":(\d+)", setting.where) or \
                re.fullmatch(re.escape(str(self.path)) + r":(\d+)", setting.where)
            origin = self.origins.get(int(found[1])) if found else None
            settings[name] = replace(setting, where=origin or setting.where)
        reading.settings = settings
        reading.notes = [*self.notes, *reading.notes]
        reading.route = f"{self.route} -> {reading.route}"
        reading.scope = self.route
        return reading


def looks_like(path: Path) -> bool:
    try:
        head = path.read_text(errors="replace")[:20000]
    except OSError:
        return False
    return bool(re.search(r"^apiVersion:\s*\S+", head, re.M) and re.search(r"^kind:\s*\S+", head, re.M))


def documents(path: Path) -> list[YamlMap]:
    _, docs = load_all(path)
    objects = [d for d in docs if isinstance(d, YamlMap) and "apiVersion" in d and "kind" in d]
    for doc in docs:  # a List of objects, as `kubectl get -o yaml` writes
        if isinstance(doc, YamlMap) and doc.get("kind") == "List":
            objects += [i for i in doc.items_list("items") if isinstance(i, YamlMap)]
    return objects


def where(manifest: Path, mapping: Any, key: str, label: str) -> str:
    line = mapping.line(key) if isinstance(mapping, YamlMap) and key in mapping.key_nodes else None
    return f"{display_path(manifest)}:{line} {label}" if line else f"{display_path(manifest)} {label}"


__all__ = ["Lines", "Translation", "documents", "looks_like", "scratch_folder", "where"]
