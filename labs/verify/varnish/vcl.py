"""The statements of a VCL `sub`, run for verify's request: which `if` branches it takes, what it
`set`s, where it `return`s.

verify's request (labs/verify/route.py): `POST` on the route's path (`req.url`), `Host` from
--host, the --header values, `Accept: text/event-stream`, `Content-Type: application/json`,
`Accept-Encoding: gzip, deflate`; the answer (`beresp`, `resp`): 200, `Content-Type:
text/event-stream`. A header nothing sets is absent. A condition on anything else (`client.ip`,
a vmod function, `std.integer(...)`) cannot be evaluated here: it is noted and taken as holding,
unless its branch answers itself (`return (synth(...))`: a size limit, a redirect), which is not
the proxied route. `call` runs the named sub in place.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from labs.verify.route import Request
from labs.verify.varnish.config import Token, Vcl, block

UNKNOWN = object()
RESPONSE_HEADERS = {"content-type": "text/event-stream; charset=utf-8"}


@dataclass
class Stmt:
    kind: str  # if, set, unset, return, call, other
    first: Token
    tokens: list[Token] = field(default_factory=list)  # set/unset: the statement; return: inside ( )
    branches: list[tuple[list[Token] | None, list["Stmt"], Token]] = field(default_factory=list)


def statements(tokens: list[Token]) -> list[Stmt]:
    out: list[Stmt] = []
    index = 0
    while index < len(tokens):
        token = tokens[index]
        if token.text == "if":
            stmt = Stmt("if", token)
            while True:
                close = _closing(tokens, index + 1)
                condition = tokens[index + 2:close]
                end = block(tokens, close + 1)
                stmt.branches.append((condition, statements(tokens[close + 2:end - 1]), tokens[index]))
                index = end
                nxt = tokens[index].text if index < len(tokens) else ""
                if nxt in ("elsif", "elseif") or (nxt == "else" and index + 1 < len(tokens)
                                                   and tokens[index + 1].text == "if"):
                    index += 1 if nxt == "else" else 0  # at the `if`/`elsif`: its `(` follows
                    continue
                if nxt == "else":
                    end = block(tokens, index + 1)
                    stmt.branches.append((None, statements(tokens[index + 2:end - 1]), tokens[index]))
                    index = end
                break
            out.append(stmt)
        elif token.text == "{":
            end = block(tokens, index)
            out.extend(statements(tokens[index + 1:end - 1]))
            index = end
        else:
            end = index
            while end < len(tokens) and tokens[end].text != ";":
                end += 1
            body = tokens[index:end]
            kind = token.text if token.text in ("set", "unset", "return", "call") else "other"
            if kind == "return":
                body = body[2:-1] if len(body) > 2 and body[1].text == "(" else body[1:]
            out.append(Stmt(kind, token, body))
            index = end + 1
    return out


def _closing(tokens: list[Token], start: int) -> int:
    depth = 0
    for index in range(start, len(tokens)):
        if tokens[index].text == "(":
            depth += 1
        elif tokens[index].text == ")":
            depth -= 1
            if depth == 0:
                return index
    raise ValueError("unbalanced parentheses")


@dataclass
class Outcome:
    """What running one sub (and what it calls) did for verify's request."""

    sets: dict[str, tuple[list[Token], Token, str]] = field(default_factory=dict)  # lhs -> (value, where, scope)
    action: tuple[str, Token] | None = None
    taken: list[str] = field(default_factory=list)  # conditions not evaluated, taken as holding
    skipped: list[str] = field(default_factory=list)  # not evaluated, their branch answers itself: not taken
    scope: str = ""  # the innermost `if` branch the return (or the last set) happened in


def env_for(request: Request) -> dict[str, Any]:
    env: dict[str, Any] = {"req.method": request.method, "req.url": request.path, "req.proto": "HTTP/1.1",
                           "beresp.status": 200, "resp.status": 200, "obj.status": 200}
    sent = dict(request.headers)
    if request.host:
        sent["host"] = request.host
    for name, value in sent.items():
        env[f"req.http.{name}"] = value
    for name, value in RESPONSE_HEADERS.items():
        for side in ("beresp", "resp", "obj"):
            env[f"{side}.http.{name}"] = value
    for name in list(env):
        if name.startswith("req."):
            env["be" + name] = env[name]
    env["bereq.method"] = request.method
    return env


def run(vcl: Vcl, name: str, env: dict[str, Any], outcome: Outcome | None = None, depth: int = 0) -> Outcome:
    outcome = outcome or Outcome()
    for body in vcl.subs.get(name, []):
        if _run(vcl, statements(body), env, outcome, [f"sub {name}"], depth):
            break
    return outcome


def _run(vcl: Vcl, stmts: list[Stmt], env: dict[str, Any], outcome: Outcome, scope: list[str], depth: int) -> bool:
    """True when a `return` ended the sub."""
    for stmt in stmts:
        if stmt.kind == "if":
            for condition, body, keyword in stmt.branches:
                label = "else" if condition is None else f"if ({text(condition)})"
                if condition is not None:
                    held = evaluate(condition, env)
                    if held is UNKNOWN and _answers_itself(vcl, body, env, scope, depth):
                        outcome.skipped.append(f"{label} ({keyword.where()})")
                        continue
                    if held is UNKNOWN:
                        outcome.taken.append(f"{label} ({keyword.where()})")
                    elif not held:
                        continue
                if _run(vcl, body, env, outcome, [*scope, f"{label} ({keyword.where()})"], depth):
                    return True
                break
        elif stmt.kind == "set" and len(stmt.tokens) > 3:
            lhs, value = stmt.tokens[1].text.lower(), stmt.tokens[3:]
            outcome.sets[lhs] = (value, stmt.first, " > ".join(scope))
            env[lhs] = value[0].value if len(value) == 1 and value[0].kind == "str" else (
                value[0].text == "true" if len(value) == 1 and value[0].text in ("true", "false") else UNKNOWN)
        elif stmt.kind == "unset" and len(stmt.tokens) > 1:
            env[stmt.tokens[1].text.lower()] = None
        elif stmt.kind == "call" and len(stmt.tokens) > 1 and depth < 20:
            called = stmt.tokens[1].text
            for body in vcl.subs.get(called, []):
                if _run(vcl, statements(body), env, outcome, [*scope, f"call {called}"], depth + 1):
                    return True
        elif stmt.kind == "return":
            word = stmt.tokens[0].text if stmt.tokens else "return"
            outcome.action, outcome.scope = (word, stmt.first), " > ".join(scope)
            return True
    return False


def _answers_itself(vcl: Vcl, body: list[Stmt], env: dict[str, Any], scope: list[str], depth: int) -> bool:
    """A branch that ends in `return (synth(...))` (an error page, a redirect): not the proxied route."""
    trial = Outcome()
    _run(vcl, body, dict(env), trial, scope, depth)
    return bool(trial.action and trial.action[0] == "synth")


def text(tokens: list[Token]) -> str:
    out = ""
    for token in tokens:
        glue = token.text in (")", ",", ".") or out.endswith(("(", "!", ".")) or not out \
            or (token.text == "(" and out[-1:].isalnum())
        out += ("" if glue else " ") + token.text
    return out


def evaluate(tokens: list[Token], env: dict[str, Any]) -> Any:
    """True, False or UNKNOWN (three-valued: an unknown part decides only when it must)."""
    try:
        value, index = _or(tokens, 0, env)
    except (IndexError, ValueError, re.error):
        return UNKNOWN
    return value if index == len(tokens) else UNKNOWN


def _or(tokens, index, env):
    value, index = _and(tokens, index, env)
    while index < len(tokens) and tokens[index].text == "||":
        right, index = _and(tokens, index + 1, env)
        value = True if value is True or right is True else (UNKNOWN if UNKNOWN in (value, right) else False)
    return value, index


def _and(tokens, index, env):
    value, index = _not(tokens, index, env)
    while index < len(tokens) and tokens[index].text == "&&":
        right, index = _not(tokens, index + 1, env)
        value = False if value is False or right is False else (UNKNOWN if UNKNOWN in (value, right) else True)
    return value, index


def _not(tokens, index, env):
    if tokens[index].text == "!":
        value, index = _not(tokens, index + 1, env)
        return (UNKNOWN if value is UNKNOWN else not value), index
    if tokens[index].text == "(":
        value, index = _or(tokens, index + 1, env)
        if tokens[index].text != ")":
            raise ValueError("expected )")
        return value, index + 1
    left, index = _operand(tokens, index, env)
    if index < len(tokens) and tokens[index].text in ("~", "!~", "==", "!=", "<", ">", "<=", ">="):
        op = tokens[index].text
        right, index = _operand(tokens, index + 1, env)
        return _compare(op, left, right), index
    if left is UNKNOWN:
        return UNKNOWN, index
    return bool(left), index


def _operand(tokens, index, env):
    token = tokens[index]
    if token.kind == "str":
        value, index = token.value, index + 1
        while index + 1 < len(tokens) and tokens[index].text == "+" and tokens[index + 1].kind == "str":
            value, index = value + tokens[index + 1].value, index + 2
        return value, index
    if token.kind == "num":
        return token.text, index + 1
    if token.kind == "word":
        if index + 1 < len(tokens) and tokens[index + 1].text == "(":
            return UNKNOWN, _closing(tokens, index + 1) + 1  # a function: not evaluated here
        name = token.text.lower()
        if name in ("true", "false"):
            return name == "true", index + 1
        if name in env:
            return env[name], index + 1
        if re.match(r"^(be)?(req|resp)\.http\.|^(obj|resp)\.http\.", name):
            return None, index + 1  # a header nothing sent nor set: absent
        return UNKNOWN, index + 1
    raise ValueError(f"unexpected {token.text!r}")


def _compare(op: str, left: Any, right: Any) -> Any:
    if UNKNOWN in (left, right):
        return UNKNOWN
    if op in ("~", "!~"):
        matched = left is not None and re.search(str(right), str(left)) is not None
        return matched if op == "~" else not matched
    if op in ("==", "!="):
        same = str(left) == str(right) if None not in (left, right) else left is right
        return same if op == "==" else not same
    try:
        a, b = float(left), float(right)
    except (TypeError, ValueError):
        return UNKNOWN
    return {"<": a < b, ">": a > b, "<=": a <= b, ">=": a >= b}[op]
