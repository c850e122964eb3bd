"""What is in effect for verify's request through a VCL config (labs/verify/varnish/vcl.py runs its
subs): the backend routes.py found it reaches, what `vcl_recv` returns (no return: the built-in
VCL passes a POST), and for a fetch what `vcl_backend_response` sets. Where nothing sets
a value, Varnish 7.1's default (its runtime parameters, DOCS) applies.
"""
from __future__ import annotations

import re

from labs.verify.model import Setting
from labs.verify.reader import InEffect
from labs.verify.varnish import vcl as run_vcl
from labs.verify.varnish.config import Backend, Vcl
from labs.verify.varnish.routes import Found, address

DOCS = {
    "backend": "https://varnish-cache.org/docs/7.1/reference/vcl-backend.html",
    "variables": "https://varnish-cache.org/docs/7.1/reference/vcl-var.html",
    "parameters": "https://varnish-cache.org/docs/7.1/reference/varnishd.html#list-of-parameters",
    "builtin": "https://varnish-cache.org/docs/7.1/users-guide/vcl-built-in-code.html",
}
# (setting, default seconds): backend attributes, whose defaults are the parameters of that name
BACKEND_TIMEOUTS = (("first_byte_timeout", 60.0), ("between_bytes_timeout", 60.0), ("connect_timeout", 3.5))
# (setting, default seconds): sess.* in vcl_recv, defaults the parameters of that name
SESSION = (("send_timeout", 600.0), ("idle_send_timeout", 60.0), ("timeout_idle", 5.0))
UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}


def seconds(text: str) -> float | None:
    match = re.fullmatch(r"(-?\d+(?:\.\d+)?)(ms|s|m|h|d|w|y)", text.strip())
    return float(match[1]) * UNITS[match[2]] if match else None


def settings(vcl: Vcl, found: Found) -> InEffect:
    """Every streaming setting in effect for the request `found` follows (routes.follow's)."""
    recv, fetch, action, backend, picked_at = found.recv, found.fetch, found.action, found.backend, found.picked_at
    in_effect: dict[str, Setting] = {}
    notes: list[str] = []
    in_effect["backend"] = Setting("backend", backend.name, f"backend {backend.name} {address(backend)}",
                                   picked_at.where() if picked_at else backend.token.where())
    if action != "pass" or recv.action:
        word, token = recv.action if recv.action else ("pass", None)
        in_effect["vcl_recv"] = Setting("vcl_recv", word, f"return ({word})", token.where() if token else "default")
    else:
        in_effect["vcl_recv"] = Setting("vcl_recv", "pass", "return (pass) (built-in vcl_recv: a POST is passed)")
    for name, default in BACKEND_TIMEOUTS:
        in_effect[name] = _timeout(backend, fetch, name, default)
    limit = backend.attrs.get("max_connections")
    in_effect["max_connections"] = (
        Setting("max_connections", int(limit[0][0].text), f".max_connections = {limit[0][0].text}",
                limit[1].where()) if limit and limit[0] and limit[0][0].text.isdigit()
        else Setting("max_connections", None, ".max_connections (unset: no limit)"))
    for name, default in SESSION:
        in_effect[name] = _set(recv, f"sess.{name}", name, default, "s", seconds)
    in_effect["pipe_timeout"] = Setting("pipe_timeout", 60.0, "pipe_timeout 60s (parameter default)")
    in_effect["thread_pool_max"] = Setting("thread_pool_max", 5000, "thread_pool_max 5000 x thread_pools 2 "
                                           "(parameter defaults; a streamed pass holds two threads)")
    response = run_vcl.Outcome()
    if action == "pipe":
        notes.append("vcl_recv pipes the request: bytes are copied both ways as they come; "
                     "vcl_backend_response does not run, pipe_timeout bounds each silence")
    else:
        response = run_vcl.run(vcl, "vcl_backend_response", found.env)
    flags = lambda text: text == "true"  # noqa: E731
    in_effect["do_stream"] = _set(response, "beresp.do_stream", "do_stream", True, "", flags, word=True)
    in_effect["do_gzip"] = _set(response, "beresp.do_gzip", "do_gzip", False, "", flags, word=True)
    in_effect["uncacheable"] = _set(response, "beresp.uncacheable", "uncacheable", action == "pass", "", flags,
                                    word=True)
    if "beresp.ttl" in response.sets:
        in_effect["ttl"] = _set(response, "beresp.ttl", "ttl", None, "", seconds)
    if action == "hash":
        notes.append("vcl_recv returns (hash) for a POST: it is looked up in the cache, the backend "
                     "request is a GET without its body unless the VCL keeps it (std.cache_req_body), "
                     "and requests for the same URL wait on one fetch")
    if len(found.backends) > 1:
        notes.append(f"a director spreads the route over {', '.join(b.name for b in found.backends)}: the "
                     f"first ({backend.name}) is judged")
    taken = recv.taken + fetch.taken + response.taken
    if taken:
        notes.append("conditions not evaluated here, taken as holding: " + "; ".join(dict.fromkeys(taken)))
    skipped = recv.skipped + fetch.skipped + response.skipped
    if skipped:
        notes.append("conditions not evaluated here, taken as not holding (their branch answers "
                     "itself with synth): " + "; ".join(dict.fromkeys(skipped)))
    notes.append("Varnish 7.1's defaults: " + ", ".join(DOCS.values()))
    return InEffect(in_effect, notes)


def _timeout(backend: Backend, fetch: run_vcl.Outcome, name: str, default: float) -> Setting:
    override = fetch.sets.get(f"bereq.{name}")
    if override and override[0] and seconds(override[0][0].text) is not None:
        value, token, _ = override
        return Setting(name, seconds(value[0].text), f"set bereq.{name} = {value[0].text}", token.where())
    attr = backend.attrs.get(name)
    if attr and attr[0] and seconds(attr[0][0].text) is not None:
        return Setting(name, seconds(attr[0][0].text), f".{name} = {attr[0][0].text}", attr[1].where())
    return Setting(name, default, f"{name} {default:g}s (parameter default)")


def _set(outcome: run_vcl.Outcome, variable: str, name: str, default, unit: str, convert, word: bool = False) -> Setting:
    found = outcome.sets.get(variable)
    if found and len(found[0]) == 1 and convert(found[0][0].text) is not None:
        value, token, _ = found
        return Setting(name, convert(value[0].text), f"set {variable} = {value[0].text}", token.where())
    if word:
        return Setting(name, default, f"{variable} {str(default).lower()} (default)")
    return Setting(name, default, f"{name} {default:g}{unit} (parameter default)" if default is not None
                   else f"{name} (default)")
