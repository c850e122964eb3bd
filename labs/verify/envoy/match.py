"""Whether an Envoy route's match holds for verify's request, and which virtual host a Host selects.

verify's request (labs/verify/route.py `Request`: `POST <path>`, the headers its measured requests
carry and --header's) is seen with the Host it was given (--host) or the one the virtual host
answers for, and Envoy's pseudo-headers (`:method`, `:path`, `:authority`). A route matches when its
path specifier holds (`case_sensitive: false` compares without case) and every `headers`,
`query_parameters` and `grpc` matcher holds for that request, as Envoy evaluates them
(HeaderMatcher: string_match exact/prefix/suffix/contains/safe_regex with ignore_case, the legacy
exact_match/prefix_match/..., present_match, range_match, invert_match,
treat_missing_header_as_empty). A matcher verify does not know is noted and taken as not holding,
so the next route is tried, as a config that needs it would not serve verify's request.
"""
from __future__ import annotations

from typing import Any, Callable

from labs.verify import regex as foreign
from labs.verify.envoy.config import YamlMap
from labs.verify.route import Request

PATH_KEYS = ("prefix", "path", "safe_regex", "path_separated_prefix")
# Keys of a RouteMatch that do not change whether verify's request matches.
NEUTRAL_KEYS = {"case_sensitive", "runtime_fraction"}
LEGACY = {"exact_match": "exact", "prefix_match": "prefix", "suffix_match": "suffix",
          "contains_match": "contains"}


def header_value(request: Request, name: str, authority: str | None) -> str | None:
    """A header as Envoy's route table sees it: the pseudo-headers from the request line and the
    Host (`authority`: the one the virtual host was chosen by), the rest as the request carries them."""
    pseudo = {":method": request.method, ":path": request.path, ":scheme": "http",
              ":authority": authority or "127.0.0.1"}
    return pseudo[name] if name in pseudo else request.header(name)


def route_matches(match: YamlMap, request: Request, authority: str | None, note: Callable[[str], None]) -> bool:
    path = request.path
    if not _path_matches(match, path):
        return False
    for key in match:
        if key in PATH_KEYS or key in NEUTRAL_KEYS:
            continue
        if key == "headers":
            if not all(_header_holds(h, request, authority, note) for h in match.items_list("headers")):
                return False
        elif key == "query_parameters":
            query = _query(path)
            if not all(_query_holds(q, query, note) for q in match.items_list("query_parameters")):
                return False
        elif key == "grpc":
            return False  # only requests with content-type application/grpc: verify's is JSON
        else:
            note(f"route match {key} at line {match.line(key)} is not evaluated by verify: taken as not "
                 "holding, so the next route is tried")
            return False
    return True


def _path_matches(match: YamlMap, path: str) -> bool:
    sensitive = match.get("case_sensitive", True) is not False
    route_path = path.split("?", 1)[0]
    fold: Callable[[str], str] = (lambda s: s) if sensitive else str.lower
    if "prefix" in match:
        return fold(path).startswith(fold(str(match["prefix"])))
    if "path" in match:
        return fold(route_path) == fold(str(match["path"]))
    if "path_separated_prefix" in match:
        prefix = fold(str(match["path_separated_prefix"]))
        return fold(route_path) == prefix or fold(route_path).startswith(prefix + "/")
    if "safe_regex" in match:
        return foreign.fullmatch(str(match.mapping("safe_regex").get("regex", "")), route_path)
    return False


def _query(path: str) -> dict[str, str]:
    if "?" not in path:
        return {}
    pairs = (item.split("=", 1) for item in path.split("?", 1)[1].split("&") if item)
    return {pair[0]: pair[1] if len(pair) > 1 else "" for pair in pairs}


def string_matches(matcher: Any, value: str, note: Callable[[str], None], what: str) -> bool:
    """An Envoy StringMatcher (exact, prefix, suffix, contains, safe_regex; ignore_case)."""
    if not isinstance(matcher, dict):
        note(f"{what}: a string matcher verify cannot read ({matcher!r}): taken as not holding")
        return False
    fold: Callable[[str], str] = str.lower if matcher.get("ignore_case") else (lambda s: s)
    for kind in ("exact", "prefix", "suffix", "contains"):
        if kind in matcher:
            wanted, have = fold(str(matcher[kind])), fold(value)
            return {"exact": have == wanted, "prefix": have.startswith(wanted),
                    "suffix": have.endswith(wanted), "contains": wanted in have}[kind]
    if "safe_regex" in matcher:
        regex = str((matcher.get("safe_regex") or {}).get("regex", ""))
        return foreign.fullmatch(regex, value, bool(matcher.get("ignore_case")))
    unknown = ", ".join(k for k in matcher if k != "ignore_case") or "(empty)"
    note(f"{what}: string matcher {unknown} is not evaluated by verify: taken as not holding")
    return False


def _header_holds(header: Any, request: Request, authority: str | None, note: Callable[[str], None]) -> bool:
    if not isinstance(header, YamlMap) or "name" not in header:
        note(f"a header matcher without a name ({header!r}): taken as not holding")
        return False
    name = str(header["name"]).lower()
    what = f"header matcher {name} (line {header.line()})"
    invert = bool(header.get("invert_match", False))
    value = header_value(request, name, authority)
    if value is None and header.get("treat_missing_header_as_empty"):
        value = ""
    specifiers = [k for k in header if k not in ("name", "invert_match", "treat_missing_header_as_empty")]
    if value is None:  # Envoy: a missing header fails every value matcher, inverted or not
        if not specifiers or specifiers == ["present_match"]:
            present = bool(header.get("present_match", True))
            return (not present) != invert
        return False
    if not specifiers:
        held = True
    elif specifiers[0] == "present_match":
        held = bool(header["present_match"])
    elif specifiers[0] == "string_match":
        held = string_matches(header["string_match"], value, note, what)
    elif specifiers[0] in LEGACY:
        held = string_matches({LEGACY[specifiers[0]]: header[specifiers[0]]}, value, note, what)
    elif specifiers[0] == "safe_regex_match":
        held = string_matches({"safe_regex": header["safe_regex_match"]}, value, note, what)
    elif specifiers[0] == "range_match":
        span = header.mapping("range_match")
        held = value.lstrip("-").isdigit() and int(span.get("start", 0)) <= int(value) < int(span.get("end", 0))
    else:
        note(f"{what}: {specifiers[0]} is not evaluated by verify: taken as not holding, so the next route "
             "is tried")
        return False
    return held != invert


def _query_holds(param: Any, query: dict[str, str], note: Callable[[str], None]) -> bool:
    if not isinstance(param, YamlMap) or "name" not in param:
        return False
    value = query.get(str(param["name"]))
    if value is None:
        return False  # verify's request carries no query string
    if "string_match" in param:
        return string_matches(param["string_match"], value, note, f"query parameter {param['name']}")
    return bool(param.get("present_match", True))


def domain_rank(domain: str, host: str) -> tuple[int, int] | None:
    """How well one of a virtual host's domains matches a Host (higher is chosen), None: not at all.

    Envoy: an exact domain first, then the longest suffix wildcard (*.example.com), then the
    longest prefix wildcard (api.*), then *."""
    domain, host = domain.lower(), host.lower()
    if domain == "*":
        return (0, 0)
    if domain == host:
        return (3, len(domain))
    if domain.startswith("*") and host.endswith(domain[1:]) and len(host) > len(domain) - 1:
        return (2, len(domain))
    if domain.endswith("*") and host.startswith(domain[:-1]) and len(host) > len(domain) - 1:
        return (1, len(domain))
    return None


def select_vhost(vhosts: list[Any], host: str) -> YamlMap | None:
    """The virtual host Envoy routes a request with this Host to, None when none matches."""
    best, best_rank = None, None
    for vhost in vhosts:
        if not isinstance(vhost, YamlMap):
            continue
        for domain in vhost.get("domains", []) or []:
            rank = domain_rank(str(domain), host)
            if rank is not None and (best_rank is None or rank > best_rank):
                best, best_rank = vhost, rank
    return best
