"""The rules on the chat route that refuse a request once a counter passes a limit: a stick-table
rate limit (`http-request deny deny_status 429 if { sc_http_req_rate(0) gt 30 }`), a cap on one
address's open connections (`tcp-request content reject if { src_conn_cur ge 20 }`), a cap on a
frontend's connections (`fe_conn`). Every stream verify sends comes from 127.0.0.1 on its own
connection, so each counts once in every counter below.

What each fetch counts is HAProxy 2.6's documentation
(https://docs.haproxy.org/2.6/configuration.html#7.3.3 for the stick counters `sc_*`/`scN_*` and
`src_*`, #7.3.2 for `fe_*`, `be_*`, `dst_conn`); a `sc` counter counts only once a `track-scN`
rule tracks it, and a stick-table counter only when its table `store`s it, else the fetch gives
nothing and the rule never refuses.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from labs.verify.haproxy import acl
from labs.verify.haproxy.acl import Evaluation
from labs.verify.haproxy.config import HaproxyConfig, Section, Statement
from labs.verify.route import Request

# The one table: a fetch's counter (the stick-table data name, or the proxy-wide fetch) -> what it
# counts; "{period}" is the stick-table's period (store http_req_rate(60s)), "{key}" what is tracked.
COUNTERS = {
    "conn_cur": "connections open at once from one {key}",
    "conn_rate": "connections per {period} from one {key}",
    "conn_cnt": "connections from one {key} while its entry lasts",
    "sess_rate": "sessions per {period} from one {key}",
    "sess_cnt": "sessions from one {key} while its entry lasts",
    "http_req_rate": "requests per {period} from one {key}",
    "http_req_cnt": "requests from one {key} while its entry lasts",
    "fe_conn": "connections open at once on the frontend",
    "be_conn": "connections open at once to the backend's servers",
    "dst_conn": "connections open at once on the listener",
    "fe_req_rate": "requests per second on the frontend",
    "fe_sess_rate": "sessions per second on the frontend",
    "be_sess_rate": "sessions per second on the backend",
}
_TRACKED = re.compile(r"sc(?P<n>\d)?_(?P<data>[a-z_]+?)(?:\((?P<args>[^)]*)\))?", re.I)
_SOURCE = re.compile(r"src_(?P<data>[a-z_]+?)(?:\((?P<args>[^)]*)\))?", re.I)
_PROXY_WIDE = re.compile(r"(?P<data>fe_conn|be_conn|dst_conn|fe_req_rate|fe_sess_rate|be_sess_rate)(?:\([^)]*\))?",
                         re.I)
# A comparison's operator -> (its value once the count is past the limit, allowed = bound + offset).
_OPERATORS = {"gt": (True, 0), "ge": (True, -1), "lt": (False, -1), "le": (False, 0)}
# What the refused request gets (https://docs.haproxy.org/2.6/configuration.html#4.2-http-request%20deny):
# deny answers 403 and tarpit 500 unless deny_status/status says otherwise, return 200 unless status does.
REFUSING = {"deny": "403", "tarpit": "500", "return": "200", "reject": "a closed connection",
            "silent-drop": "no answer"}


@dataclass(frozen=True)
class CounterLimit:
    """A rule that refuses the chat request once its counter is past `allowed`."""

    allowed: int
    counts: str  # what the counter counts, in words
    refusal: str  # what a refused request gets

    def __str__(self) -> str:
        return f"{self.allowed} {self.counts}, then {self.refusal}"


def limits(config: HaproxyConfig, sections: list[Section], request: Request) -> list[tuple[CounterLimit, Statement]]:
    """Every refusing rule of the chat route's frontend and backend whose condition is a counter's
    limit and whose other terms hold for the chat request, the lowest limit first."""
    found = []
    for section in sections:
        for statement in section.statements:
            limit = _limit(config, sections, section, statement, request)
            if limit is not None:
                found.append((limit, statement))
    return sorted(found, key=lambda pair: pair[0].allowed)


def _limit(config: HaproxyConfig, sections: list[Section], section: Section, statement: Statement,
           request: Request) -> CounterLimit | None:
    words = statement.words
    start = next((i for i, w in enumerate(words) if w in ("if", "unless")), None)
    refusal = _refusal(words[:start]) if start else None
    if refusal is None:
        return None
    condition = words[start:]
    acls = acl.acls_of(section, config.file)
    counted = []  # each counter term's comparison: (allowed, its value past the limit, what it counts)

    def comparison(criterion: list[str]) -> tuple[int, bool, str] | None:
        """(allowed, the criterion's value past the limit, what it counts), or None."""
        values = [w for w in criterion[1:] if w not in ("-m", "int")]
        if len(values) != 2 or values[0] not in _OPERATORS or not values[1].isdigit():
            return None
        counts = _counts(config, sections, section, criterion[0])
        if counts is None:
            return None
        past, offset = _OPERATORS[values[0]]
        return int(values[1]) + offset, past, counts

    past_terms, small_terms = list(condition), list(condition)
    index = 1
    while index < len(condition):
        term = condition[index]
        if term.lstrip("!") == "{":
            end = condition.index("}", index) if "}" in condition[index:] else len(condition)
            found = comparison(condition[index + 1:end])
            if found is not None:
                counted.append(found)
                past_terms[index:end + 1] = [_term(term, found[1])] + [""] * (end - index)
                small_terms[index:end + 1] = [_term(term, not found[1])] + [""] * (end - index)
            index = end
        elif term.lstrip("!") in acls:
            lines = [comparison(c) for c in acls[term.lstrip("!")]]
            found = next((c for c in lines if c is not None), None)
            if found is not None:
                counted.append(found)
                past_terms[index], small_terms[index] = _term(term, found[1]), _term(term, not found[1])
        index += 1
    if not counted:
        return None
    judged = Evaluation(request, config.file.parent)
    holds = acl.condition([w for w in past_terms if w], acls, judged)
    always = acl.condition([w for w in small_terms if w], acls, judged)
    if not holds or always:  # never refuses the chat request, or refuses it whatever the count
        return None
    allowed, _, counts = min(counted)
    return CounterLimit(allowed, counts, refusal)


def _term(term: str, value: bool) -> str:
    """A counter's term replaced by the builtin ACL it equals (`!{ ... }` keeps its `!`)."""
    return ("!" if term.startswith("!") else "") + ("TRUE" if value else "FALSE")


def _refusal(words: list[str]) -> str | None:
    """What a rule that refuses answers (`http-request deny deny_status 429`), None for other rules."""
    if words[0] == "http-request" and len(words) > 1 and words[1] in REFUSING:
        for keyword in ("deny_status", "status"):
            if keyword in words[2:-1]:  # the action's own words, the condition cut off
                return f"HTTP {words[words.index(keyword) + 1]}"
        code = REFUSING[words[1]]
        return f"HTTP {code}" if code.isdigit() else code
    if words[0] == "tcp-request" and len(words) > 2 and words[2] in ("reject", "silent-drop"):
        return REFUSING[words[2]]
    return None


def _counts(config: HaproxyConfig, sections: list[Section], section: Section, fetch: str) -> str | None:
    """What a fetch counts, in words, when it counts the chat request; None when it does not
    (another fetch, a counter no rule tracks, a table that does not store it)."""
    if (found := _PROXY_WIDE.fullmatch(fetch)) is not None:
        return COUNTERS[found["data"].lower()]
    tracked, source = _TRACKED.fullmatch(fetch), _SOURCE.fullmatch(fetch)
    match = tracked or source
    if match is None or match["data"].lower() not in COUNTERS or _PROXY_WIDE.fullmatch(match["data"]):
        return None
    data = match["data"].lower()
    args = [a.strip() for a in (match["args"] or "").split(",") if a.strip()]
    key, table_name = "client address", None
    if tracked is not None:
        number = tracked["n"] if tracked["n"] is not None else (args.pop(0) if args else None)
        track = _track(sections, number)
        if track is None:
            return None  # never tracked: the fetch gives nothing
        words = track.words
        at = next(i for i, w in enumerate(words) if w == f"track-sc{number}")
        key = "client address" if words[at + 1:at + 2] == ["src"] else f"tracked {' '.join(words[at + 1:at + 2])}"
        table_name = words[words.index("table") + 1] if "table" in words[:-1] else None
        home = next(s for s in sections if track in s.statements)
    else:
        home = section
    table_name = args[0] if args else table_name
    home = next((s for s in config.sections if s.name == table_name), None) if table_name else home
    period = _period(home, data)
    if period is False:
        return None  # the table does not store this counter
    return COUNTERS[data].format(key=key, period=period or "the table's period")


def _track(sections: list[Section], number: str | None) -> Statement | None:
    for section in sections:
        for statement in section.statements:
            if statement.keyword in ("http-request", "tcp-request") and f"track-sc{number}" in statement.words[1:3]:
                return statement
    return None


def _period(section: Section | None, data: str) -> str | None | bool:
    """The period a stick-table stores the counter over ("60s"), None when not read, False when
    the table does not store it."""
    table = section.last("stick-table") if section is not None else None
    if table is None or "store" not in table.words[:-1]:
        return None
    stored = ",".join(table.words[table.words.index("store") + 1:]).split(",")
    for item in stored:
        name, _, argument = item.partition("(")
        if name.strip() == data:
            return argument.rstrip(")") or None
    return False
