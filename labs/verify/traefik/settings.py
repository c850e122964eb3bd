"""What is in effect on the Traefik router verify judges (labs/verify/traefik/routes.py finds it): its entry point's responding timeouts, its middlewares (the entry point's
first, `chain`s expanded), its service's flush interval and servers transport. Where nothing sets
a value, Traefik 3.7's default applies (DOCS: the values documented there and in its source).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from labs.findings import UnusableInput
from labs.verify.model import DEFAULT, RouteWanted, Setting, display_path
from labs.verify.reader import InEffect
from labs.verify.route import Chosen
from labs.verify.traefik.config import Item, TraefikConfig, get, line_of
from labs.verify.traefik.routes import entry_points

DOCS = "https://doc.traefik.io/traefik/v3.7/reference"
_GO = re.compile(r"(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)")
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1, "m": 60, "h": 3600}
# (setting, its option, Traefik's default in seconds: None is "no limit")
RESPONDING = (("readTimeout", 60.0), ("writeTimeout", None), ("idleTimeout", 180.0))
FORWARDING = (("dialTimeout", 30.0), ("responseHeaderTimeout", None), ("idleConnTimeout", 90.0))
# (setting, what is in effect without it): a middleware the router does not meet, fastProxy unset.
ABSENT = (("buffering", "no buffering middleware"), ("compress", "no compress middleware"),
          ("inFlightReq", "no inFlightReq middleware"), ("retry", "no retry middleware"),
          ("fastProxy", "experimental.fastProxy off (Go's proxy)"))


def seconds(value: Any) -> float | None:
    """A Traefik duration: a Go duration ("1m30s", "500ms") or a number of seconds; 0 is None."""
    if value is None:
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value) or None
    text = str(value).strip()
    if re.fullmatch(r"-?\d+(\.\d+)?", text):
        return float(text) or None
    parts = _GO.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text.lstrip("-"):
        raise UnusableInput(f"not a Traefik duration: {value!r} (write 60s, 1m30s or a number of seconds)")
    total = sum(float(n) * _UNITS[u] for n, u in parts)
    return -total if text.startswith("-") else (total or None)


def settings(config: TraefikConfig, chosen: Chosen, wanted: RouteWanted) -> InEffect:
    """`wanted`: one set of defaults (Traefik 3.7's), whatever the version asked for."""
    router: Item = chosen.route.handle
    service = config.find("services", str(get(router.body, "service")))
    in_effect = InEffect({}, notes=list(config.notes))
    points = entry_points(config, router)
    if not points and get(config.static, "entryPoints"):
        raise UnusableInput(f"router {router.name} names no entry point the static configuration has",
                            file=display_path(router.file), line=line_of(router.body))
    point = get(get(config.static, "entryPoints"), points[0]) if points else None
    timeouts = get(get(point, "transport"), "respondingTimeouts")
    for option, default in RESPONDING:
        value = get(timeouts, option)
        where = _at(config.file, timeouts, option)
        in_effect.settings[option] = Setting(option, _seconds_at(value, where) if value is not None else default,
                                           f"{option}: {value}" if value is not None else
                                           f"{option} ({_shown(default)}: Traefik's default)", where)
    for name, item in middlewares(config, router, point):
        kind = next(iter(item.body), "") if isinstance(item.body, dict) else ""
        body = get(item.body, kind) or {}
        label = str(kind).lower()
        if label == "buffering" and "buffering" not in in_effect.settings:
            in_effect.settings["buffering"] = Setting("buffering", name, f"middleware {name}: buffering "
                                                    f"{dict(body) if body else '{}'}", item.where())
        elif label == "compress" and "compress" not in in_effect.settings:
            encodings = get(body, "encodings") or ["gzip", "br", "zstd"]
            in_effect.settings["compress"] = Setting("compress", [str(e) for e in encodings],
                                                   f"middleware {name}: compress", item.where())
        elif label == "inflightreq" and "inFlightReq" not in in_effect.settings:
            in_effect.settings["inFlightReq"] = Setting("inFlightReq", get(body, "amount"),
                                                      f"middleware {name}: inFlightReq amount "
                                                      f"{get(body, 'amount')}", item.where())
        elif label == "retry" and "retry" not in in_effect.settings:
            in_effect.settings["retry"] = Setting("retry", get(body, "attempts"),
                                                f"middleware {name}: retry attempts {get(body, 'attempts')}",
                                                item.where())
    experimental = get(config.static, "experimental")
    if get(experimental, "fastProxy") is not None:  # `fastProxy: {}` turns it on
        in_effect.settings["fastProxy"] = Setting("fastProxy", True, "experimental.fastProxy",
                                                _at(config.file, experimental, "fastProxy"))
    for option, said in ABSENT:  # what each rule reads (rules.py), where nothing sets it
        in_effect.settings.setdefault(option, Setting(option, None, said, DEFAULT))
    balancer = get(service.body, "loadBalancer") if service else None
    flush = get(get(balancer, "responseForwarding"), "flushInterval")
    in_effect.settings["flushInterval"] = Setting(
        "flushInterval", _seconds_at(flush, "the service's flushInterval") if flush is not None else 0.1,
        f"responseForwarding.flushInterval: {flush}" if flush is not None else
        "flushInterval (100ms: Traefik's default; event streams and chunked answers are flushed at once)",
        _at(service.file, get(balancer, "responseForwarding"), "flushInterval") if service else DEFAULT)
    transport = _transport(config, balancer)
    for option, default in FORWARDING:
        value = get(get(transport.body if transport else None, "forwardingTimeouts"), option)
        in_effect.settings[option] = Setting(
            option, _seconds_at(value, f"forwardingTimeouts.{option}") if value is not None else default,
            f"forwardingTimeouts.{option}: {value}" if value is not None else
            f"{option} ({_shown(default)}: Traefik's default)",
            _at(transport.file, get(transport.body, "forwardingTimeouts"), option) if transport and value is not None
            else DEFAULT)
    return in_effect


def _seconds_at(value: Any, where: str) -> float | None:
    try:
        return seconds(value)
    except UnusableInput as exc:
        raise UnusableInput(f"{where}: {exc}") from None


def middlewares(config: TraefikConfig, router: Item, point: Any) -> list[tuple[str, Item]]:
    """The middlewares a request meets: the entry point's, then the router's, chains expanded."""
    names = [str(n) for n in (get(get(point, "http"), "middlewares") or [])]
    names += [str(n) for n in (get(router.body, "middlewares") or [])]
    out: list[tuple[str, Item]] = []

    def add(name: str, depth: int) -> None:
        item = config.find("middlewares", name)
        if item is None or depth > 8:
            return
        chain = get(item.body, "chain")
        if chain is not None:
            for inner in get(chain, "middlewares") or []:
                add(str(inner), depth + 1)
            return
        out.append((name, item))
    for name in names:
        add(name, 0)
    return out


def _transport(config: TraefikConfig, balancer: Any) -> Item | None:
    name = get(balancer, "serversTransport")
    if name:
        return config.find("serverstransports", str(name))
    static = get(config.static, "serversTransport")  # the static default for every service
    return Item("serversTransport", static, config.file) if static is not None else None


def _at(file: Path, mapping: Any, option: str) -> str:
    line = line_of(mapping, option)
    return f"{display_path(file)}:{line}" if line else (display_path(file) if get(mapping, option) is not None
                                                        else DEFAULT)


def _shown(value: float | None) -> str:
    return "no limit" if value is None else f"{value:g}s"
