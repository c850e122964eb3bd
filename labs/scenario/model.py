"""What a scenario is: declared once, read by the runner, the pytest guards, `make labs` and the README.

A scenario names a path (the proxies between client and server, possibly none), a workload, a
broken variant and the fix applied on top of it. The fix is a delta, so the config diff a learner
sees is exactly what the fix changes. Symptom and cure are checks: predicates on the measurements
whose margins come from the workload's own pacing, never from tight absolute numbers.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Literal, Mapping, Sequence

from labs.client.apis import DEFAULT_API
from labs.findings import FindingKind
from labs.client.results import StreamResult
from labs.lab.server import DEFAULT_SCRIPT, DEFAULT_TOKENS_PER_S

Layer = Literal["proxy", "chain", "gateway", "app", "server", "client", "load"]
VariantName = Literal["broken", "fixed"]
VARIANTS: tuple[VariantName, ...] = ("broken", "fixed")


@dataclass(frozen=True)
class Variant:
    """One side of a scenario. For `fix`, every field is applied on top of the broken variant.

    proxy: settings overrides per hop name, a proxy or an app (on its own defaults, then broken's).
    lab: `lab` request fields (docs/contract.md), merged over the workload's.
    server_args: flags for `python -m server` (a variant with other flags gets its own server).
    client: measuring-client options (labs.client.measure_stream keyword arguments).
    request: other chat-completion body fields (stop, max_tokens, ...).
    server_nofile: the soft open-file limit the server process starts under (`ulimit -Sn N` in
        the shell that launches it; the hard limit is kept); None = inherited. Like server_args,
        a variant with another value gets its own server.
    manifest: Kubernetes manifests (YAML) whose controller translation (labs/verify/kubernetes,
        as `labs verify` reads them) is the config the path's one proxy runs, instead of its
        templates (labs/scenario/manifest_hop.py); a fix's manifest replaces the broken one.
    """

    proxy: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    lab: Mapping[str, Any] = field(default_factory=dict)
    server_args: Sequence[str] = ()
    client: Mapping[str, Any] = field(default_factory=dict)
    request: Mapping[str, Any] = field(default_factory=dict)
    server_nofile: int | None = None
    manifest: str | None = None

    def then(self, fix: "Variant") -> "Variant":
        """This variant with `fix` applied on top (dicts merged, server args replaced when given)."""
        proxies = {name: {**self.proxy.get(name, {}), **fix.proxy.get(name, {})}
                   for name in {*self.proxy, *fix.proxy}}
        return Variant(
            proxy=proxies,
            lab={**self.lab, **fix.lab},
            server_args=tuple(fix.server_args) if fix.server_args else tuple(self.server_args),
            client={**self.client, **fix.client},
            request={**self.request, **fix.request},
            server_nofile=fix.server_nofile if fix.server_nofile is not None else self.server_nofile,
            manifest=fix.manifest if fix.manifest is not None else self.manifest,
        )


@dataclass(frozen=True)
class Workload:
    """What the client does: one paced stream by default.

    streams / concurrency: how many requests in all, and how many at once.
    sequential: one after another on fresh client connections (upstream keepalive shows).
    disconnect_after_events: the client closes the socket after that many content events.
    api: the wire protocol every request speaks (labs/client/apis: chat, responses, messages):
        the request's body, its path and how the client reads its events.
    driver: a custom client sequence instead of the above, for workloads no count describes
        (e.g. some clients leave early while others arrive): called as
        `await driver(url, body, workload, client_options)`, returns every stream's result.
    """

    script: str = DEFAULT_SCRIPT
    tokens_per_s: float = DEFAULT_TOKENS_PER_S
    lab: Mapping[str, Any] = field(default_factory=dict)
    streams: int = 1
    concurrency: int = 1
    sequential: bool = False
    disconnect_after_events: int | None = None
    client: Mapping[str, Any] = field(default_factory=dict)
    request: Mapping[str, Any] = field(default_factory=dict)
    # Wait this long for the server to finish work after the clients are done (disconnects).
    settle_s: float = 10.0
    # Reload every proxy on the path this many seconds after the workload starts (a deploy
    # while streams run: nginx SIGHUP, HAProxy master-worker SIGUSR2); None: no reload.
    reload_at_s: float | None = None
    driver: "Driver | None" = None
    api: str = DEFAULT_API

    @property
    def interval_s(self) -> float:
        """Time between two tokens at the workload's own pace (a variant may set another: see
        `knobs`): the unit every timing margin is expressed in."""
        return 1.0 / self.tokens_per_s

    def knobs(self, variant_lab: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """The `lab` object a request carries: script and pace, the workload's knobs, then the
        variant's own on top (what the server is really asked to do)."""
        return {"script": self.script, "tokens_per_s": self.tokens_per_s, **self.lab, **(variant_lab or {})}

    def first_due_s(self, variant_lab: Mapping[str, Any] | None = None) -> float:
        """When the first token is due after the request is sent (silences before it included),
        under the variant's own `lab` knobs as well as the workload's."""
        knobs = self.knobs(variant_lab)
        return float(knobs.get("headers_delay_s", 0.0)) + float(knobs.get("first_token_delay_s", 0.0))


# A workload's own client sequence: (entry URL, request body, workload, client options) -> results.
Driver = Callable[[str, dict[str, Any], Workload, Mapping[str, Any]], Awaitable[list[StreamResult]]]


@dataclass
class Run:
    """What one variant produced: the client's view, the server's counters, the proxies' evidence."""

    variant: VariantName
    workload: Workload
    results: list[StreamResult]
    server_delta: dict[str, float] = field(default_factory=dict)
    evidence: list[str] = field(default_factory=list)
    # Every access-log line of each hop (the evidence keeps only the last few): a check that looks
    # for an event the proxy logged (a 503 flagged UO) must see the early lines too.
    access_log: dict[str, list[str]] = field(default_factory=dict)
    configs: dict[str, str] = field(default_factory=dict)
    hops: dict[str, list[StreamResult]] = field(default_factory=dict)
    proxy_stats: dict[str, dict[str, int]] = field(default_factory=dict)
    wall_s: float = 0.0
    # Seconds from the end of the client's work to the server going idle (slots free, no stream);
    # after a deliberate disconnect, how long the server kept working for nobody.
    release_s: float | None = None
    # The variant's own `lab` knobs (on top of the workload's): timing bounds honour them.
    lab: Mapping[str, Any] = field(default_factory=dict)
    # The highest value of each server gauge a check asked for (Check.samples), read while the
    # workload ran: how many streams (or fds) were in flight at once.
    peaks: dict[str, float] = field(default_factory=dict)
    # When the proxies were reloaded (seconds after the workload started; Workload.reload_at_s),
    # None when no reload happened; reload_error says why one failed.
    reloaded_at_s: float | None = None
    reload_error: str | None = None

    @property
    def knobs(self) -> dict[str, Any]:
        """The `lab` object the requests carried (workload and variant merged)."""
        return self.workload.knobs(self.lab)

    @property
    def interval_s(self) -> float:
        """Time between two tokens in this run: the unit of every timing margin."""
        return 1.0 / float(self.knobs["tokens_per_s"])

    @property
    def first_due_s(self) -> float:
        return self.workload.first_due_s(self.lab)

    @property
    def first(self) -> StreamResult:
        return self.results[0]

    def outcomes(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for result in self.results:
            counts[result.outcome] = counts.get(result.outcome, 0) + 1
        return counts

    @property
    def tokens_for_nobody(self) -> float:
        """Tokens the engine generated that no client received."""
        received = sum(r.content_events for r in self.results)
        return self.metric("streamlab_tokens_generated_total") - received

    def metric(self, name: str) -> float:
        """A server counter's increase during this run (0 when it did not move)."""
        return self.server_delta.get(name, 0.0)


@dataclass(frozen=True)
class CheckResult:
    label: str
    observed: str
    passed: bool


@dataclass(frozen=True)
class Check:
    """A predicate on a run. `measure` returns (observed value as text, passed)."""

    label: str
    measure: Callable[[Run], tuple[str, bool]]
    # Server gauges whose peak during the workload this check reads (`Run.peaks`): the runner
    # samples /metrics while the clients run only when a check asks.
    samples: tuple[str, ...] = ()

    def __call__(self, run: Run) -> CheckResult:
        try:
            observed, passed = self.measure(run)
        except Exception as exc:  # a check that cannot compute has failed, visibly
            return CheckResult(self.label, f"could not measure: {exc!r}", False)
        return CheckResult(self.label, observed, passed)


@dataclass(frozen=True)
class Scaled:
    """A value shrunk so a lab takes seconds: what it is here and the real default it stands for."""

    setting: str
    lab_value: str
    real_default: str


@dataclass(frozen=True)
class Since:
    """A behaviour this scenario teaches that changed between two releases of a proxy on its path
    (proxies.releases): its guards run on every release of that proxy, not only the current one,
    and the lesson says since which version."""

    proxy: str  # a proxy kind on the path, e.g. "nginx"
    version: str  # the first version that behaves as the current release does, e.g. "1.29.7"
    what: str  # what changed, in one sentence
    # Settings of the broken variant to drop so that the proxy runs its own defaults (a pinned
    # `proxy_http_version 1.0` back to None): `labs run` then measures that too, on each
    # release, and shows what each one does left alone. Empty: nothing to drop.
    own_defaults: Mapping[str, Any] = field(default_factory=dict)
    # The change is a fix in the proxy that no setting undoes: from `version` on, the broken
    # variant no longer shows the symptom, and its guard there checks that it does not (what a
    # learner on the current release meets); the older releases keep the symptom's guard.
    ends_symptom: bool = False

    def reached_by(self, series: str) -> bool:
        """Whether a release of `series` ("1.30", or a whole version) behaves as from `version` on."""
        parts = tuple(int(part) for part in series.split("."))
        return parts >= tuple(int(part) for part in self.version.split("."))[:len(parts)]


@dataclass(frozen=True)
class Scenario:
    name: str  # kebab-case <layer>-<failure>; no name is a prefix of another
    layer: Layer
    symptom: str  # one line, as a user would report it
    path: tuple[str, ...]  # proxies from the client inwards; () = client talks to the server
    workload: Workload
    broken: Variant
    fix: Variant
    symptom_checks: tuple[Check, ...]
    cure_checks: tuple[Check, ...]
    explanation: str
    fix_summary: str  # the fix in one line of config or code
    sources: tuple[str, ...] = ()
    scaled: tuple[Scaled, ...] = ()
    # What each proxy's settings start from before the variant's overrides: the proxy's own
    # defaults, or the production settings of proxies/fixed/ (a chain where one hop misbehaves).
    base: Literal["defaults", "fixed"] = "defaults"
    # Also measure at each hop's entry (and direct): shows which hop of a chain held the stream.
    bisect: bool = False
    # Server counters (names as on /metrics) whose change the report shows.
    server_metrics: tuple[str, ...] = ()
    # Envoy admin counters the report shows (suffixes of the stat names).
    proxy_stats: tuple[str, ...] = ()
    # Text a measurement on this machine taught that the folklore gets wrong.
    finding: str | None = None
    # The finding kind (labs.findings) that `labs verify` / `labs probe` report for this failure
    # on a user's own path; None for failures a path check cannot see (text, client code).
    kind: FindingKind | None = None
    # Where a proxy's releases differ here; empty: measured the same on each (docs/field-notes.md).
    since: tuple[Since, ...] = ()

    def variant(self, name: VariantName) -> Variant:
        return self.broken if name == "broken" else self.broken.then(self.fix)

    def symptom_ended(self, releases: Mapping[str, str | None]) -> bool:
        """Whether the proxies a run used (kind -> its series or version) carry a fix that ended
        this scenario's symptom (Since.ends_symptom): its broken variant then rightly streams."""
        return any(change.ends_symptom and releases.get(change.proxy)
                   and change.reached_by(str(releases[change.proxy])) for change in self.since)

    def checks(self, name: VariantName) -> tuple[Check, ...]:
        return self.symptom_checks if name == "broken" else self.cure_checks

    @property
    def shown_hops(self) -> tuple[str, ...]:
        """The path as the listing and the README show it, from the client to the server; a proxy
        that runs a manifest's translation is shown with the object it runs (`envoy (HTTPRoute)`)."""
        if not self.path:
            return ("client", "server")
        routing = re.findall(r"^kind:\s*(Ingress|\w+Route)\s*$", self.broken.manifest or "", re.M)
        return (*(f"{hop} ({routing[0]})" if routing else hop for hop in self.path), "server")
