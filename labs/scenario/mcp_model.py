"""What an MCP scenario is: an MCP origin's replicas behind one proxy, the official SDK client's
sessions through it, a broken variant and the fixes on top of it, each judged by checks.

It is the chat scenario's shape (labs/scenario/model.py) for another origin and another client:
the origin is `python -m server.mcp` run as several replicas (server/mcp/), the client an official
SDK's own (labs/scenario/mcp_clients.py: Python, TypeScript on Node or in Chromium), and what a
check reads is the sessions' records and every request each replica recorded, not a token stream. Declared in labs/catalogue/mcp.py; guarded by
tests/test_mcp_scenarios.py; run by labs/scenario/mcp_runner.py, which `labs run` picks for it
(labs/scenario/play.py).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping

from labs.scenario.mcp_clients import CHROMIUM, DEFAULT_CLIENT, McpClientName
from labs.scenario.model import Check, CheckResult, Scaled, Since

if TYPE_CHECKING:  # the SDK (the [mcp] extra) is imported where a session runs, not by the catalogue
    from labs.client.mcp_get_stream import GetStream
    from labs.client.mcp_session import McpResult


@dataclass(frozen=True)
class McpVariant:
    """One side. For a fix, every field is applied on top of the broken variant.

    proxy: settings overrides per proxy kind (only the proxy a run goes through reads its own).
    origin: `server.mcp.knobs.OriginKnobs` fields every replica runs with.
    replicas: how many origin processes (None: the broken variant's).
    client: the measuring client's keyword arguments (labs.client.mcp_session.measure_session's: mode,
        calls, hold_s; the TypeScript SDK's also body_timeout_s, labs.client.mcp_node); `lone_get_s`:
        after the sessions, one GET stream alone on its connection, read up to that long
        (labs/client/mcp_get_stream.py, over HTTP/2 when `http2` is set).
    sessions: how many sessions (None: the workload's), for a variant whose outcome is by chance.
    sdk: the SDK line the replicas run (a key of server.mcp.sdks.SDK_LINES; None: the lab's own).
    client_sdk: the official SDK whose client opens the sessions (labs.scenario.mcp_clients.MCP_CLIENTS;
        None: the broken variant's, else the Python SDK's).
    """

    proxy: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    origin: Mapping[str, Any] = field(default_factory=dict)
    replicas: int | None = None
    client: Mapping[str, Any] = field(default_factory=dict)
    sessions: int | None = None
    sdk: str | None = None
    client_sdk: McpClientName | None = None

    def then(self, fix: "McpVariant") -> "McpVariant":
        proxies = {name: {**self.proxy.get(name, {}), **fix.proxy.get(name, {})} for name in {*self.proxy, *fix.proxy}}
        return McpVariant(proxy=proxies, origin={**self.origin, **fix.origin},
                          replicas=fix.replicas if fix.replicas is not None else self.replicas,
                          client={**self.client, **fix.client},
                          sessions=fix.sessions if fix.sessions is not None else self.sessions,
                          sdk=fix.sdk if fix.sdk is not None else self.sdk,
                          client_sdk=fix.client_sdk if fix.client_sdk is not None else self.client_sdk)


@dataclass
class McpRun:
    """What one variant produced on one proxy: each session as the client saw it, every request
    as the replicas recorded it."""

    proxy: str
    variant: str
    sessions: list[McpResult]
    requests: list[dict[str, Any]]
    replicas: int
    config: str = ""
    wall_s: float = 0.0
    release: str = ""  # the proxy's series that ran (proxies.kinds.choose_releases)
    lone_gets: list[GetStream] = field(default_factory=list)  # the variant's `lone_get_s` GET, read byte by byte
    client_sdk: McpClientName = "python-sdk"  # whose client opened the sessions

    def replica_of(self, session: str | None, method: str = "initialize") -> int | None:
        """The replica that answered `method` for a session id, or None."""
        return next((r["replica"] for r in self.requests if r["session"] == session and r["method"] == method), None)

    def counts(self) -> dict[str, int]:
        """Requests per replica and status, e.g. {'replica 0 -> 200': 9, 'replica 1 -> 404': 4}, and
        the server notifications a replica sent of its own ('replica 0 sent notifications/...')."""
        counted = Counter(f"replica {r['replica']} -> {r['status']}" if r["status"] is not None
                          else f"replica {r['replica']} sent {r['method']}" for r in self.requests)
        return dict(sorted(counted.items()))


@dataclass(frozen=True)
class McpCheck(Check):
    """A predicate on an MCP run (the chat scenario's `Check`, reading an `McpRun`): `measure`
    returns (what was observed, as text; passed); one that cannot compute has failed, visibly."""

    measure: Callable[[McpRun], tuple[str, bool]]  # type: ignore[assignment]

    def __call__(self, run: McpRun) -> CheckResult:  # type: ignore[override]
        return super().__call__(run)  # type: ignore[arg-type]  # Check's judging, on an McpRun


@dataclass(frozen=True)
class McpFix:
    """One fix: its variant (on top of the broken one), on which proxies it applies, and what its
    cure looks like beyond every session completing."""

    name: str  # kebab-case; the guard's id ends with it
    variant: McpVariant
    proxies: tuple[str, ...]  # the path proxies it is measured on
    cure_checks: tuple[McpCheck, ...]
    summary: str  # the fix in one line of config or code
    # False: a look-alike that is often given as the fix and measured not to be one; its checks
    # say what it does instead (its guard fails if it ever becomes a cure).
    cures: bool = True
    # A workaround rather than a fix (one replica: no redundancy left): measured and guarded, but
    # not offered in the README's fix column.
    workaround: bool = False


@dataclass(frozen=True)
class McpWorkload:
    """What the client does: `sessions` sessions one after another, each `calls` tool calls."""

    sessions: int = 4
    calls: int = 2
    replicas: int = 2
    timeout_s: float = 30.0


@dataclass(frozen=True)
class McpScenario:
    name: str  # kebab-case mcp-<failure>
    symptom: str  # one line, as a user would report it
    proxies: tuple[str, ...]  # each run goes through one of these proxy kinds, client -> proxy -> replicas
    workload: McpWorkload
    broken: McpVariant
    fixes: tuple[McpFix, ...]
    symptom_checks: tuple[McpCheck, ...]
    explanation: str
    sources: tuple[str, ...] = ()
    finding: str | None = None
    scaled: tuple[Scaled, ...] = ()
    # Where a proxy's releases differ here (Scenario.since); empty: measured alike on each (docs/mcp.md).
    since: tuple[Since, ...] = ()

    def fix(self, name: str) -> McpFix:
        return next(fix for fix in self.fixes if fix.name == name)

    def variant(self, name: str) -> McpVariant:
        """`broken`, or a fix's name: that fix on top of the broken variant."""
        return self.broken if name == "broken" else self.broken.then(self.fix(name).variant)

    def checks(self, name: str) -> tuple[McpCheck, ...]:
        return self.symptom_checks if name == "broken" else self.fix(name).cure_checks

    # The layer the failure is in, as `labs list` shows it: the balancer's (a proxy's) choice of replica.
    layer = "proxy"

    @property
    def shown_hops(self) -> tuple[str, ...]:
        """The path as the listing and the README show it (Scenario.shown_hops): the proxies it is
        measured through, one at a time, then the replicas."""
        count = self.workload.replicas
        return (" or ".join(self.proxies), f"{count} MCP replica{'' if count == 1 else 's'}")

    def symptom_ended(self, releases: Mapping[str, str | None]) -> bool:
        """Scenario.symptom_ended: whether a release on the path carries a fix for the symptom."""
        return any(change.ends_symptom and releases.get(change.proxy)
                   and change.reached_by(str(releases[change.proxy])) for change in self.since)

    @property
    def fix_summary(self) -> str:
        """The fixes that cure, in one line (the README's fix column); a row that only changes the
        client shows a fix already named through another client."""
        return "; or ".join(fix.summary for fix in self.fixes
                            if fix.cures and not fix.workaround and fix.variant.client_sdk is None)

    @property
    def clients(self) -> list[McpClientName]:
        """The official SDKs' clients its variants are measured with (labs.scenario.mcp_clients)."""
        named = [variant.client_sdk for variant in (self.broken, *(self.variant(fix.name) for fix in self.fixes))]
        return list(dict.fromkeys(name or DEFAULT_CLIENT for name in named))

    def runs(self) -> list[tuple[str, str]]:
        """Every (proxy, variant name) this scenario is measured as: the broken variant on each
        proxy, each fix on the proxies it names."""
        return [*((proxy, "broken") for proxy in self.proxies),
                *((proxy, fix.name) for fix in self.fixes for proxy in fix.proxies)]

    @property
    def in_a_browser(self) -> bool:
        """Whether a variant's sessions run in Chromium (the TypeScript SDK bundled for a page)."""
        return CHROMIUM in self.clients
