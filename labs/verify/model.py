"""What verify works with: the settings read from a config, the suspicions they raise, the options.

A `Setting` is one streaming-relevant value in effect for the route that serves
`POST /v1/chat/completions`, with where it comes from (`file:line`, or `default` when the proxy's
own default applies). A `Suspicion` is what the static reading alone says about one finding kind;
the dynamic checks then confirm it (a `failure`) or not (a `warning` with the reason).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from labs.client.apis import DEFAULT_API, client_api
from labs.findings import FindingKind, PathReport, UnusableInput

ROUTE_METHOD, ROUTE_PATH = "POST", "/v1/chat/completions"
# The headers of the request verify sends, as a config's header matchers see them. Its JSON body
# is a few hundred bytes, always sent with a Content-Length (a guard on large bodies lets it by,
# a matcher for bodies with a length takes it).
REQUEST_HEADERS = {"accept": "text/event-stream", "content-type": "application/json",
                   "accept-encoding": "gzip, deflate", "content-length": "300"}
DEFAULT = "default"
# A heartbeat exists to keep idle limits from firing, and the defaults are 60 s (nginx's
# proxy_read_timeout, Apache's Timeout, Varnish's between_bytes_timeout): an interval above them
# keeps nothing alive, and the disconnect check's silence lasts one or two intervals.
MAX_HEARTBEAT_S = 60.0
# Where published configs serve an OpenAI-style chat API, in the order verify looks for one when
# no --path is given: the API itself, then the prefixes chat front ends and gateways put in
# front of it (Open WebUI's /api/ and /openai/, LiteLLM's /v1/ under a gateway path...).
API_PATHS = ("/v1/chat/completions", "/api/chat/completions", "/api/v1/chat/completions",
             "/openai/v1/chat/completions", "/openai/chat/completions", "/chat/completions")


def read_text(path: str | Path) -> str:
    """A file of the user's config, or UnusableInput naming it (a folder, no permission, not text)."""
    try:
        return Path(path).read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise UnusableInput(f"cannot read it: {exc}", file=display_path(path)) from None


@dataclass(frozen=True)
class RouteWanted:
    """The route the user asked verify to judge (`--path`, `--host`); unset: verify finds the
    proxied route that serves the chat API and says which and why."""

    path: str | None = None
    host: str | None = None
    main: str | None = None  # a site file: the main config it is read inside (nginx's --main)
    version: str | None = None  # the proxy version the config is written for (--proxy-version)
    # The series of the proxy's release that runs it (labs/verify/releases.py chooses it from
    # `version`; None: the current one): its binary's defaults are the reading's when none is asked.
    series: str | None = None
    # --header: what routing may look at (an Envoy header matcher, an HAProxy hdr() ACL); the
    # values are credentials: never in a repr, a report or the output.
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False, compare=False)
    api: str = DEFAULT_API  # the wire protocol the trials speak (--api): its path is the route's

    def at(self, path: str, host: str | None) -> "RouteWanted":
        """The same request, at the route the reading chose (what the rewrite must keep reachable)."""
        return replace(self, path=path, host=host)

    def __post_init__(self) -> None:
        if self.path is not None and not self.path.startswith("/"):
            raise UnusableInput(f"--path must start with '/': {self.path!r}")
        if self.host is not None and (not self.host or any(c in self.host for c in "/ \t")):
            raise UnusableInput(f"--host must be a host name, without scheme or path: {self.host!r}")

    @property
    def paths(self) -> tuple[str, ...]:
        """The paths to try, in order: the one asked for, else the usual API paths, each with the
        protocol's own route in place of `/chat/completions` (`/api/v1/messages`, ...)."""
        tail = client_api(self.api).path.removeprefix("/v1")
        return (self.path,) if self.path else tuple(
            dict.fromkeys(p.removesuffix("/chat/completions") + tail for p in API_PATHS))


def display_path(file: str | Path) -> str:
    """A file as the user can open it: relative to the working folder when inside it."""
    relative = os.path.relpath(os.path.abspath(file))
    return str(file) if relative.startswith("..") else relative


@dataclass(frozen=True)
class Options:
    """The user's expectations of the path (the defaults are documented in docs/verify.md).

    max_silence_s: the longest silence the model may keep (prefill, queue, tool call) with no
        heartbeat; the path must carry it before the first token and in mid-stream.
    max_stream_s: the longest answer in seconds; the long-stream check runs a little past it.
    streams: concurrent streams the path must carry at once.
    heartbeat_s: the interval of the user's origin's `: ping` heartbeats through a silence (None:
        it sends none, or the user did not say). Only the disconnect check reads it: its silence
        then carries heartbeats at that interval, and the departure must be noticed by the one the
        proxy needs (plus a margin). The silence checks keep theirs without a heartbeat.
    """

    max_silence_s: float = 20.0
    max_stream_s: float = 20.0
    streams: int = 100
    heartbeat_s: float | None = None

    def __post_init__(self) -> None:
        if self.max_silence_s <= 0 or self.max_stream_s <= 0:
            raise UnusableInput("--max-silence and --max-stream must be positive seconds")
        if self.heartbeat_s is not None and not 0 < self.heartbeat_s <= MAX_HEARTBEAT_S:
            raise UnusableInput(f"--heartbeat must be seconds above 0 and at most {MAX_HEARTBEAT_S:g} (the "
                                "disconnect check's silence lasts one or two of them, plus 2.5 s)")
        if not 1 <= self.streams <= 2000:
            raise UnusableInput("--streams must be between 1 and 2000 (load tests stay bounded)")


@dataclass(frozen=True)
class Setting:
    """One value in effect: `text` as written (or the default spelled as a directive)."""

    name: str
    value: Any
    text: str
    where: str = DEFAULT

    @property
    def is_default(self) -> bool:
        return self.where == DEFAULT


@dataclass
class Reading:
    """The static reading of one config: the route found and every streaming setting in effect."""

    proxy: str
    file: Path
    route: str  # e.g. "server nginx.conf:12 > location /v1/ (conf.d/api.conf:5)"
    settings: dict[str, Setting] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    path: str = ROUTE_PATH  # the request path the route is judged (and measured) on
    host: str | None = None  # the Host header that reaches it, when the config selects by name
    why: str = ""  # why this route: asked for with --path / --host, or found serving the API
    routes: list[str] = field(default_factory=list)  # every proxied route seen, the judged one too
    main: str | None = None  # a site file's main config (--main), as asked
    scope: str = ""  # where a fix for this route goes ("location /v1/ (nginx.conf:40)"), not the whole server
    version: str | None = None  # the proxy version whose defaults the reading used
    wanted: RouteWanted = field(default_factory=RouteWanted, repr=False)  # as asked, headers included
    # The parsed config and the chosen route it was read from (labs/verify/run.py's `Parsed`): the
    # rewrite works from the same parse, never a second one.
    parsed: Any = field(default=None, repr=False, compare=False)

    def get(self, name: str) -> Setting:
        return self.settings[name]

    def value(self, name: str) -> Any:
        return self.settings[name].value


@dataclass(frozen=True)
class Suspicion:
    """What the settings alone suggest: a kind, the directive behind it, the fix, the check to run."""

    kind: FindingKind
    where: str
    evidence: str
    fix: str
    checks: tuple[str, ...]  # the trials (labs.verify.trials) that can show it
    limit_s: float | None = None


@dataclass
class VerifyReport(PathReport):
    """A verify run: findings and checks (PathReport), plus what was verified and how it ran."""

    proxy: str = ""
    file: str = ""
    rewrites: str = ""  # unified diff of every change made so the config runs here
    route: str = ""
    path: str = ROUTE_PATH
    why: str = ""
    routes: list[str] = field(default_factory=list)
    version: str | None = None
    settings: dict[str, Setting] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # The release whose binary ran the config (labs/verify/releases.py's RunsOn.to_json): its
    # exact version and source, what --proxy-version asked, and whether it stood in for it.
    measured_on: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0
    # The checks left out of this run and by what (--quick, --check): never part of its "ok".
    not_selected: list[str] = field(default_factory=list)
    selected_by: str = ""
    measured_with: str = "the lab's client, in front of the lab's server"  # the checks table's title

    def to_json(self) -> dict[str, Any]:
        return {
            "proxy": self.proxy, "file": self.file, "ok": self.ok, "verdict": self.verdict,
            "findings": [f.to_json() for f in self.findings],
            "checks": [c.to_json() for c in self.checks],
            "rewrites": self.rewrites,
            "route": self.route, "path": self.path, "why": self.why, "routes": self.routes, "proxy_version": self.version,
            "settings": {name: {"value": s.text, "where": s.where} for name, s in self.settings.items()},
            "notes": self.notes, "measured_on": self.measured_on,
            "wall_s": round(self.wall_s, 2),
        }
