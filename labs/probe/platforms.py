"""Known limits in time, so a limit `labs probe` measured can name the platform it probably is,
and the advice on heartbeats can name the clients' own limits beside it.

Each entry is a documented (or, where no documentation says it, a reported and measured) default
of a CDN, cloud load balancer, API gateway, PaaS router, proxy or client library: the kind of
limit (an idle limit at some positions of the silence, or a limit on the whole response), the
setting that moves it, its source and the date of that source. `side` says whose it is:

* `platform`: a hop of the path. A hint is printed beside the measurement, never instead of it:
  several platforms share a number (60 s is ALB's idle timeout, nginx's proxy_read_timeout and
  Envoy AI Gateway's route timeout), and a limit someone set by hand matches nothing or the wrong one.
* `client`: the program at the end of the path (Codex, Node's fetch). The probe's own client has
  no such limit, so it never measures one; they are named in the heartbeat advice of an idle-limit
  finding instead: a heartbeat must beat the shortest of the path's limit and the clients'.

The figures are leads checked against their sources (2026-12), not measurements of the lab: no
platform here can be reached from it. tests/labs/probe/test_platform_limits.py reproduces each
entry's cut, scaled down, through a real proxy's own setting of the same kind and position.
"""
from __future__ import annotations

from dataclasses import dataclass

# How far a measured limit may be from a documented one and still match: the probe brackets an
# idle limit to about 10 % (labs/probe/silence.py TOLERANCE), and a platform's timer may add a
# second of its own (Cloudflare's 125 s measured at 125.4 s, Cloud Run's 60 s at 61.0 s).
RELATIVE_SLACK = 0.10
ABSOLUTE_SLACK_S = 2.0

ANY_SILENCE = ("before-headers", "after-headers", "mid-stream")
BEFORE_HEADERS = ("before-headers",)
AFTER_HEADERS = ("after-headers", "mid-stream")
SIDES = ("platform", "client")


@dataclass(frozen=True)
class Limit:
    platform: str
    limit_s: float
    kind: str                    # "idle-timeout" or "total-timeout"
    positions: tuple[str, ...]   # for an idle limit: where in the answer the silence counts
    what: str                    # the limit as its source says it
    setting: str                 # what moves it
    source: str
    dated: str                   # the source's date (a docs page: when it was read, "read 2026-12")
    side: str = "platform"
    # The hop also holds a response's headers until its first body byte (Cloudflare): a cut after
    # headers and no byte reaches the client with no status at all (labs/probe/held.py).
    holds_headers: bool = False

    def matches(self, kind: str, position: str | None, measured_s: float) -> bool:
        if kind != self.kind or (kind == "idle-timeout" and position not in self.positions):
            return False
        return abs(measured_s - self.limit_s) <= max(RELATIVE_SLACK * self.limit_s, ABSOLUTE_SLACK_S)

    def hint(self) -> str:
        return f"{self.platform}: {self.what} ({self.setting}; {self.source}, {self.dated})"


CLOUDFLARE_524 = "https://developers.cloudflare.com/support/troubleshooting/http-status-codes/cloudflare-5xx-errors/error-524/"
REQUEST_TIMEOUT_HEROKU = "https://devcenter.heroku.com/articles/request-timeout"

LIMITS: tuple[Limit, ...] = (
    # The docs said 100 s until 2025-10, then 120 s, and 125 s since cloudflare-docs#32243
    # (2026-07-22, "aligns the documented default with the current Pingora behavior"); measured at
    # 125.4 s on an MCP GET stream, whose 200 never reached the client (agentdeals#1098, 2026-08-27).
    Limit("Cloudflare (proxied)", 125, "idle-timeout", ANY_SILENCE,
          "answers 524 when the origin sends nothing for 125 s (the Proxy Read Timeout; 100 s in "
          "its docs before 2025-10), and holds a response's headers until its first body byte",
          "Enterprise: the Proxy Read Timeout setting; elsewhere an SSE comment right after the "
          "headers and `: ping` heartbeats under it",
          f"{CLOUDFLARE_524} (cloudflare-docs#32243; measured 125.4 s: robhunter/agentdeals#1098)",
          "2026-07-22", holds_headers=True),
    Limit("Railway", 300, "idle-timeout", AFTER_HEADERS,
          "cancels an HTTP/2 stream idle for 300 s (measured 300.4 s on an open GET stream; undocumented)",
          "not configurable: send a byte at least every 300 s",
          "https://github.com/robhunter/agentdeals/issues/1098", "2026-08-27"),
    Limit("AWS Application Load Balancer", 60, "idle-timeout", ANY_SILENCE,
          "closes a connection idle for 60 s by default",
          "the load balancer attribute idle_timeout.timeout_seconds (1-4000)",
          "https://docs.aws.amazon.com/elasticloadbalancing/latest/application/edit-load-balancer-attributes.html",
          "read 2026-12"),
    Limit("AWS CloudFront", 30, "idle-timeout", ANY_SILENCE,
          "waits 30 s by default for the origin's response, and as long between its packets",
          "the origin's Response timeout (1-60 s, more by a quota increase)",
          "https://docs.aws.amazon.com/AmazonCloudFront/latest/DeveloperGuide/DownloadDistValuesOrigin.html",
          "read 2026-12"),
    Limit("AWS API Gateway (REST)", 29, "total-timeout", (),
          "ends an integration after 29 s by default",
          "the integration timeout (above 29 s by a quota request), or response streaming",
          "https://docs.aws.amazon.com/apigateway/latest/developerguide/limits.html", "read 2026-12"),
    Limit("AWS App Runner", 120, "total-timeout", (),
          "ends every request after 120 s, reading the request and writing the response included",
          "not configurable (aws/apprunner-roadmap#104 asks for it): another host for long streams",
          "https://docs.aws.amazon.com/apprunner/latest/dg/develop.html#develop.considerations "
          "(quoted in aws/apprunner-roadmap#189)", "2023-12-21"),
    Limit("Google Cloud Run", 300, "total-timeout", (),
          "ends every request, a stream included, after its request timeout: 300 s by default "
          "(measured 302 s with heartbeats flowing; set to 60 s, 61.0 s)",
          "the service's timeout (`--timeout`, up to 3600 s)",
          "https://cloud.google.com/run/docs/configuring/request-timeout (SquadQuest/SquadQuest#466, "
          "Burla-Cloud/burla#170)", "2026-06-13"),
    Limit("Google Cloud Application Load Balancer", 30, "total-timeout", (),
          "gives a backend 30 s by default for its whole response",
          "the backend service's timeoutSec (GKE: BackendConfig spec.timeoutSec)",
          "https://cloud.google.com/load-balancing/docs/backend-service#timeout-setting", "read 2026-12"),
    Limit("Heroku router", 30, "idle-timeout", BEFORE_HEADERS,
          "answers H12 (503) when the first byte takes more than 30 s",
          "not configurable: send the headers (or a byte) within 30 s", REQUEST_TIMEOUT_HEROKU,
          "read 2026-12"),
    Limit("Heroku router", 55, "idle-timeout", AFTER_HEADERS,
          "ends a response that sends nothing for 55 s (the rolling window after the first byte)",
          "not configurable: send a byte at least every 55 s", REQUEST_TIMEOUT_HEROKU, "read 2026-12"),
    Limit("Azure App Service", 230, "idle-timeout", BEFORE_HEADERS,
          "its front end gives up on a request that has no response after 230 s",
          "not configurable: answer (or stream) sooner",
          "https://learn.microsoft.com/en-us/troubleshoot/azure/app-service/web-apps-performance-faqs",
          "read 2026-12"),
    Limit("nginx (and ingress-nginx)", 60, "idle-timeout", ANY_SILENCE,
          "proxy_read_timeout, 60 s by default",
          "proxy_read_timeout (ingress-nginx: the proxy-read-timeout annotation)",
          "https://nginx.org/en/docs/http/ngx_http_proxy_module.html#proxy_read_timeout", "read 2026-12"),
    Limit("Envoy (Envoy Gateway, Gloo, a bare Envoy)", 15, "total-timeout", (),
          "a route's timeout, 15 s by default, on the whole response",
          "the route's timeout: 0s (Gateway API: HTTPRoute timeouts.request)",
          "https://www.envoyproxy.io/docs/envoy/latest/api-v3/config/route/v3/route_components.proto",
          "read 2026-12"),
    Limit("Envoy AI Gateway", 60, "total-timeout", (),
          "gives the HTTPRoute it makes from an AIGatewayRoute a 60 s request timeout "
          "(streams cut at 61 s, three out of three)",
          "the AIGatewayRoute rule's timeouts.request (and a ClientTrafficPolicy streamIdleTimeout)",
          "https://github.com/envoyproxy/ai-gateway/pull/796 (nicolerenee/infra#2078)", "2026-07-07"),
    # The clients' own: never matched against the path, named in the heartbeat advice.
    Limit("Codex", 300, "idle-timeout", AFTER_HEADERS,
          "gives up on a stream silent for 300 s", "model_providers.<id>.stream_idle_timeout_ms",
          "https://github.com/openai/codex/blob/main/docs/config.md", "read 2026-12", side="client"),
    Limit("Node fetch (undici)", 300, "idle-timeout", AFTER_HEADERS,
          "bodyTimeout: aborts a body silent for 300 s (`TypeError: terminated` at 301.0 s)",
          "an Agent's bodyTimeout (0 = off)",
          "https://github.com/nodejs/undici/blob/main/docs/docs/api/Client.md (nodejs/undici#1937)",
          "read 2026-12", side="client"),
    Limit("Node fetch (undici)", 300, "idle-timeout", BEFORE_HEADERS,
          "headersTimeout: aborts a request whose headers take 300 s", "an Agent's headersTimeout (0 = off)",
          "https://github.com/nodejs/undici/blob/main/docs/docs/api/Client.md (nodejs/undici#1937)",
          "read 2026-12", side="client"),
    Limit("LibreChat (MCP)", 120, "idle-timeout", AFTER_HEADERS,
          "aborted an MCP GET stream silent for its 120 s request timeout (undici bodyTimeout) "
          "and reconnected every 2 minutes; since danny-avila/LibreChat#11936 the GET waits 300 s",
          "the MCP server's sseReadTimeout in librechat.yaml",
          "https://github.com/danny-avila/LibreChat/pull/11874", "2026-02-20", side="client"),
)
PLATFORMS = tuple(entry for entry in LIMITS if entry.side == "platform")
CLIENTS = tuple(entry for entry in LIMITS if entry.side == "client")


def hints(kind: str, position: str | None, measured_s: float | None, held_headers: bool = False) -> list[str]:
    """The platforms' limits a measured one matches, each as one line (none when nothing does).
    With `held_headers` (the cut came with no status before it) a platform that holds headers
    says so."""
    if measured_s is None:
        return []
    return [entry.hint() + ("; it holds the headers until the first body byte, as seen here"
                            if held_headers and entry.holds_headers else "")
            for entry in PLATFORMS if entry.matches(kind, position, measured_s)]


def clients_said() -> str:
    """The clients' idle limits in a few words: `Codex 300 s, Node fetch (undici) 300 s, ...`."""
    seen: dict[str, float] = {}
    for entry in CLIENTS:
        seen[entry.platform] = min(entry.limit_s, seen.get(entry.platform, entry.limit_s))
    return ", ".join(f"{name} {limit:g} s" for name, limit in seen.items())


def heartbeat_advice(limit_s: float | None) -> str:
    """The fix an idle limit calls for, with the clients' own limits beside the path's."""
    path = f"the path's ({limit_s:.3g} s)" if limit_s is not None else "the path's"
    shortest = min([entry.limit_s for entry in CLIENTS] + ([limit_s] if limit_s is not None else []))
    return (f"heartbeats (an SSE comment `: ping`) more often than every {shortest:.3g} s: the shortest "
            f"of {path} idle limit and your clients' ({clients_said()})")


def markdown_table() -> str:
    """The table docs/probe.md shows (tests/labs/probe/test_platforms.py checks it is there)."""
    rows = ["| side | who | limit | kind | where | source (date) |", "| --- | --- | --- | --- | --- | --- |"]
    for e in LIMITS:
        where = "whole response" if e.kind == "total-timeout" else (
            "any silence" if e.positions == ANY_SILENCE else ", ".join(e.positions))
        rows.append(f"| {e.side} | {e.platform} | {e.limit_s:g} s | {e.kind} | {where} | {e.source} ({e.dated}) |")
    return "\n".join(rows)
