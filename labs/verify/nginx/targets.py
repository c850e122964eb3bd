"""Where a user's nginx config sends requests, rewritten to the lab's server; the addresses a
rewritten config still names; dynamic modules found on this machine.

`proxy_pass` takes many forms in published configs, and each must keep its meaning with only the
address changed: a named upstream (its servers are rewritten, the name stays), a URL with a URI
part (kept: it decides the path the server sees), a variable holding the whole URL (`set $u
http://vllm:8000; proxy_pass $u;`), a variable scheme (`$scheme://backend`), a host or port in a
variable (`http://$backend:8000`), a unix socket (`http://unix:/run/vllm.sock:/v1/`), TLS to the
upstream (`https://...`: the lab's server speaks plain HTTP, so the scheme becomes http).
"""
from __future__ import annotations

import functools
import io
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from crossplane.lexer import _lex_file_object  # the lexer of a text, not a file: crossplane<0.6 (pyproject)

from labs.verify.rewrite import Rewritten
from proxies.needs import CannotInstall, install_missing
from proxies.nginx.kind import MODULE_EXTRAS
from proxies.unpack import CannotUnpack

PASS_DIRECTIVES = ("proxy_pass", "grpc_pass", "fastcgi_pass", "uwsgi_pass", "scgi_pass", "memcached_pass")
URL_PASSES = ("proxy_pass", "grpc_pass")  # the others take host:port or unix:/path, no scheme
PLAIN = {"https": "http", "grpcs": "grpc"}
_VARIABLE = r"\$\{?\w+\}?"
_URL = re.compile(rf"^(?P<scheme>[a-z]+|{_VARIABLE})://(?P<host>unix:[^:]*|\[[^\]]*\]|(?:{_VARIABLE}|[^/$:?])+)"
                  rf"(?::(?P<port>\d+|{_VARIABLE}))?(?P<rest>.*)$")


def pass_target(name: str, arg: str, lab_port: int, upstreams: set[str], stream: bool) -> str:
    """The target that sends what `name arg` sends to the lab's server (or `arg` when it only
    names an upstream whose servers are rewritten)."""
    lab = f"127.0.0.1:{lab_port}"
    if stream or name not in URL_PASSES:  # stream proxy_pass, fastcgi_pass & co: host:port or a name
        return arg if arg in upstreams else lab
    match = _URL.match(arg)
    if match is None:  # the whole URL is in a variable: the request's own URI is passed
        return f"http://{lab}"
    scheme = match["scheme"]
    scheme = "http" if scheme.startswith("$") else PLAIN.get(scheme, scheme)
    host, rest = match["host"], match["rest"]
    if host.startswith("unix:"):
        # http://unix:/path.sock:/uri -> the URI follows the socket path after a colon
        rest = rest[1:] if rest.startswith(":") else rest
        uri = rest if rest.startswith("/") else ""
        return f"{scheme}://{lab}{uri}"
    if host in upstreams and match["port"] is None:
        return f"{scheme}://{host}{rest}"
    return f"{scheme}://{lab}{rest}"


def names_upstream(arg: str, upstreams: set[str]) -> str | None:
    """The upstream block a pass target names, when it names one."""
    match = _URL.match(arg)
    host = match["host"] if match else arg
    return host if host in upstreams else None


@functools.lru_cache(maxsize=None)
def compiled_prefix(binary: str) -> str | None:
    """nginx's --prefix (what a relative load_module path means to the nginx that was packaged)."""
    try:
        output = subprocess.run([binary, "-V"], capture_output=True, text=True, timeout=10).stderr
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(r"--prefix=(\S+)", output)
    return found[1] if found else None


def module_here(arg: str, binary: str | None) -> str | None:
    """A dynamic module's file on this machine: a relative path means the packaged prefix (the
    run's own prefix would break it), an absolute one from elsewhere is looked for by name. For an
    unpacked release (proxies.releases) only its own root is searched: a module built for another
    nginx refuses to load ("version 1022001 instead of 1030006", measured)."""
    root = release_root(binary)
    candidates = [arg] if os.path.isabs(arg) and root is None else []
    prefix = compiled_prefix(binary) if binary else None
    if prefix and not os.path.isabs(arg):
        candidates.append(os.path.join(prefix, arg))
    name = os.path.basename(arg)
    candidates += [os.path.join(folder, name) for folder in
                   ("/usr/lib/nginx/modules", "/usr/share/nginx/modules", "/etc/nginx/modules")]
    if root is not None:
        candidates = [str(root / candidate.lstrip("/")) for candidate in candidates]
    return next((c for c in candidates if os.path.isfile(c)), None)


def add_module(arg: str, binary: str | None) -> str | None:
    """Add a module the lab knows (proxies.nginx.kind.MODULE_EXTRAS) to the unpacked release that
    runs the config, by need as `labs setup` would: None when it was added, else why not."""
    extra = MODULE_EXTRAS.get(os.path.basename(arg))
    if extra is None or release_root(binary) is None:
        return "the lab does not add it to this nginx"
    try:
        install_missing([extra])
    except (CannotInstall, CannotUnpack) as exc:
        return str(exc)
    return None


def release_root(binary: str | None) -> Path | None:
    """The unpacked release a binary belongs to: its patched copy lies in `<release>/bin/`, the
    release's own files in `<release>/root/` (proxies.releases.Release)."""
    if binary is None:
        return None
    folder = Path(binary).resolve().parent
    root = folder.parent / "root"
    return root if folder.name == "bin" and (root / "usr").is_dir() else None


def addresses(rewritten: Rewritten) -> list[tuple[str, str]]:
    """Every address the rewritten config names, read from its text: listens, upstream servers,
    passes, resolvers, binds, syslog targets; `where` is the user's file and line."""
    statements = [(path, s) for _, new, path in rewritten.files.values() for s in _statements(new)]
    upstreams = {s.args[0] for _, s in statements if s.name == "upstream" and s.opens and s.args}
    found: list[tuple[str, str]] = []
    for path, s in statements:
        if not s.args:
            continue
        file, line = rewritten.user_location(str(path), s.line)
        where = f"{file}:{line}"
        # A `server` that opens no block is an upstream's, also in a file the upstream includes.
        if s.name == "listen" or (s.name == "server" and not s.opens):
            found.append((where, host_of(s.args[0])))
        elif s.name in PASS_DIRECTIVES and names_upstream(s.args[0], upstreams) is None:
            found.append((where, host_of(s.args[0])))
        elif s.name in ("resolver", "proxy_bind"):
            found.extend((where, a) for a in s.args if not a.startswith(("valid=", "ipv6=", "status_zone=")))
        elif s.name in ("error_log", "access_log") and s.args[0].startswith("syslog:"):
            found.append((where, host_of(s.args[0].split("server=", 1)[-1].split(",")[0])))
    return found


@dataclass(frozen=True)
class _Statement:
    name: str
    args: list[str]
    line: int
    opens: bool  # it opens a block (`server {`), not ends with `;`


def _statements(text: str) -> Iterator[_Statement]:
    """Each statement of one file's text, blocks' own included. crossplane's lexer reads the text
    in memory (its parser opens files, and nothing is written before the loopback check)."""
    words: list[str] = []
    line = 0
    for token, at, quoted in _lex_file_object(io.StringIO(text)):
        if not quoted and token.startswith("#"):
            continue
        if not quoted and token in (";", "{", "}"):
            if words and token != "}":
                yield _Statement(words[0], words[1:], line, token == "{")
            words = []
            continue
        if not words:
            line = at
        words.append(token)


def host_of(arg: str) -> str:
    match = _URL.match(arg)
    if match:
        arg = match["host"]
    if arg.startswith("unix:"):
        return "unix-socket"  # never loopback: a rewritten config must not keep one
    arg = arg.split("/", 1)[0]
    if arg.startswith("["):
        return arg[1:arg.index("]")] if "]" in arg else arg
    if re.fullmatch(r"\d+", arg) or arg == "*" or arg.startswith("*:"):
        return "*"  # a bare port listens on every address
    return arg.rsplit(":", 1)[0] if ":" in arg else arg
