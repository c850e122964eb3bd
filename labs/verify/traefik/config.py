"""Traefik configs as Traefik reads them: the static file, and the dynamic configuration its file
provider loads (`providers.file.filename`, or every file of `providers.file.directory`).

Traefik matches option names without regard to case (`entryPoints` and `entrypoints` are one),
so every lookup here does too (`get`). YAML keeps each value's line (labs/verify/yamlpos.py);
TOML is read with the standard library, without lines. Relative file-provider paths are taken
from the folder that holds the static file (Traefik takes them from its working folder: the
output says so when that matters).
"""
from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labs.findings import UnusableInput
from labs.verify import yamlpos
from labs.verify.model import display_path
from labs.verify.yamlpos import YamlMap

DYNAMIC_SECTIONS = ("routers", "middlewares", "services", "serverstransports")
STATIC_KEYS = ("entryPoints", "providers", "global", "log", "accessLog", "api", "serversTransport",
               "certificatesResolvers", "metrics", "tracing", "experimental", "ping")
OTHER_PROVIDERS = ("docker", "swarm", "kubernetescrd", "kubernetesingress", "kubernetesgateway",
                   "kubernetesingressnginx", "consulcatalog", "nomad", "ecs", "consul", "etcd",
                   "zookeeper", "redis", "http")


def get(mapping: Any, name: str, default: Any = None) -> Any:
    """`mapping[name]`, the name matched without case, as Traefik matches option names."""
    if not isinstance(mapping, dict):
        return default
    for key, value in mapping.items():
        if str(key).lower() == name.lower():
            return value
    return default


def key_of(mapping: Any, name: str) -> str | None:
    """The key as the user spelt it."""
    if isinstance(mapping, dict):
        for key in mapping:
            if str(key).lower() == name.lower():
                return str(key)
    return None


def entry_point_names(router: Any) -> list[str]:
    """The entry points a router names (`entryPoints`, any case): a list, or a scalar, which
    Traefik's file provider splits on commas (`entrypoints: websecure` is `[websecure]`)."""
    named = get(router, "entryPoints") or []
    items = named.split(",") if isinstance(named, str) else named if isinstance(named, list) else []
    return [str(name).strip() for name in items if str(name).strip()]


def line_of(mapping: Any, name: str | None = None) -> int | None:
    if not isinstance(mapping, YamlMap):
        return None
    if name is None:
        return mapping.line()
    key = key_of(mapping, name)
    return mapping.line(key) if key is not None else None


@dataclass
class Item:
    """A router, middleware, service or servers transport, and the file that declares it."""

    name: str
    body: Any
    file: Path

    def where(self, option: str | None = None) -> str:
        line = line_of(self.body, option) if option else line_of(self.body)
        return f"{display_path(self.file)}:{line}" if line else display_path(self.file)


@dataclass
class TraefikConfig:
    file: Path
    text: str
    static: dict[str, Any]
    dynamic_files: list[tuple[Path, str, dict[str, Any]]] = field(default_factory=list)
    items: dict[str, dict[str, Item]] = field(default_factory=dict)  # section -> name -> item
    notes: list[str] = field(default_factory=list)

    def section(self, name: str) -> dict[str, Item]:
        return self.items.get(name.lower(), {})

    def find(self, section: str, reference: str) -> Item | None:
        """`name` or `name@file` (other providers' objects are not in these files)."""
        name, _, provider = reference.partition("@")
        if provider and provider != "file":
            return None
        return self.section(section).get(name)


def load(path: Path) -> tuple[str, dict[str, Any]]:
    if not path.is_file():
        raise UnusableInput("no such file", file=str(path))
    if path.suffix.lower() == ".toml":
        text = path.read_text()
        try:
            return text, tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise UnusableInput(f"not valid TOML: {exc}", file=str(path)) from None
    return yamlpos.load(path, "a Traefik configuration")


def parse(path: Path) -> TraefikConfig:
    text, static = load(path)
    config = TraefikConfig(path, text, static)
    file_provider = get(get(static, "providers"), "file")
    providers = {str(k).lower() for k in (get(static, "providers") or {})}
    if file_provider is None and not any(get(static, k) is not None for k in STATIC_KEYS):
        # A dynamic file alone (routers, services): Traefik would read it through a file provider.
        config.dynamic_files.append((path, text, static))
        config.notes.append("a dynamic configuration without its static part: run with the entry points "
                            "its routers name (web where they name none), as a file provider would load it")
    elif file_provider is None:
        if get(static, "http") is not None:
            config.notes.append("the file's `http:` section is dynamic configuration, which Traefik reads "
                                "only through a file provider naming this file; none does, so Traefik "
                                "ignores it: verify reads it as if one did")
            config.dynamic_files.append((path, text, static))
        elif providers & set(OTHER_PROVIDERS):
            found = sorted(providers & set(OTHER_PROVIDERS))
            raise UnusableInput(f"the routers come from the {', '.join(found)} provider (labels, objects "
                                "or keys outside this file): verify reads routers from the file provider; "
                                "pass the dynamic file (with `http:` routers and services) instead",
                                file=display_path(path))
    else:
        for dynamic in _provider_files(path, file_provider):
            if dynamic.resolve() == path.resolve():
                config.dynamic_files.append((path, text, static))
            else:
                config.dynamic_files.append((dynamic, *load(dynamic)))
    for file, _, data in config.dynamic_files:
        for section in DYNAMIC_SECTIONS:
            for name, body in (get(get(data, "http"), section) or {}).items():
                config.items.setdefault(section, {})[str(name)] = Item(str(name), body, file)
    if not config.section("routers"):
        raise UnusableInput("no HTTP router in the dynamic configuration (http.routers): nothing to judge",
                            file=display_path(path))
    return config


def _provider_files(path: Path, provider: Any) -> list[Path]:
    base = path.parent
    filename, directory = get(provider, "filename"), get(provider, "directory")
    if filename:
        found = [base / str(filename) if not Path(str(filename)).is_absolute() else Path(str(filename))]
        if not found[0].is_file() and (base / Path(str(filename)).name).is_file():
            found = [base / Path(str(filename)).name]  # an absolute path of the user's machine
        if not found[0].is_file():
            raise UnusableInput(f"providers.file.filename {filename} is not here (looked beside the config)",
                                file=display_path(path))
        return found
    if directory:
        folder = base / str(directory) if not Path(str(directory)).is_absolute() else Path(str(directory))
        if not folder.is_dir():
            folder = base / Path(str(directory)).name
        if not folder.is_dir():
            raise UnusableInput(f"providers.file.directory {directory} is not here (looked beside the config)",
                                file=display_path(path))
        return sorted(p for p in folder.iterdir() if p.suffix.lower() in (".yml", ".yaml", ".toml"))
    raise UnusableInput("providers.file names neither a filename nor a directory (Traefik refuses it too)",
                        file=display_path(path))
