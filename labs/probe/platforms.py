"""Known platform limits, so a limit `labs probe` measured can name the platform it probably is.

Each entry is a documented default of a CDN, cloud load balancer, API gateway, PaaS router or
proxy, the kind of limit it is (an idle limit at one position of the silence, or a limit on the
whole response) and the setting that moves it. A hint is printed beside the measurement, never
instead of it: several platforms share a number (60 s is ALB's idle timeout and nginx's
proxy_read_timeout), and a limit someone set by hand matches nothing or the wrong one.

The figures are the platforms' documentation as of 2026-12 (each entry's `source`), not
measurements of the lab: no platform here can be reached from it.
"""
from __future__ import annotations

from dataclasses import dataclass

# How far a measured limit may be from a documented one and still match: the probe brackets an
# idle limit to about 10 % (labs/probe/silence.py TOLERANCE), and a platform's timer may add a
# second of its own.
RELATIVE_SLACK = 0.10
ABSOLUTE_SLACK_S = 2.0

ANY_SILENCE = ("before-headers", "after-headers", "mid-stream")
BEFORE_HEADERS = ("before-headers",)
AFTER_HEADERS = ("after-headers", "mid-stream")


@dataclass(frozen=True)
class PlatformLimit:
    platform: str
    limit_s: float
    kind: str                    # "idle-timeout" or "total-timeout"
    positions: tuple[str, ...]   # for an idle limit: where in the answer the silence counts
    what: str                    # the limit as the platform documents it
    setting: str                 # what moves it
    source: str

    def matches(self, kind: str, position: str | None, measured_s: float) -> bool:
        if kind != self.kind or (kind == "idle-timeout" and position not in self.positions):
            return False
        return abs(measured_s - self.limit_s) <= max(RELATIVE_SLACK * self.limit_s, ABSOLUTE_SLACK_S)

    def hint(self) -> str:
        return f"{self.platform}: {self.what} ({self.setting}; {self.source})"


LIMITS: tuple[PlatformLimit, ...] = (
    PlatformLimit(
        "Cloudflare (proxied)", 100, "idle-timeout", ANY_SILENCE,
        "answers 524 when the origin sends nothing for 100 s",
        "Enterprise: the Proxy Read Timeout setting; elsewhere stream `: ping` heartbeats under it",
        "https://developers.cloudflare.com/support/troubleshooting/http-status-codes/cloudflare-5xx-errors/error-524/"),
    PlatformLimit(
        "AWS Application Load Balancer", 60, "idle-timeout", ANY_SILENCE,
        "closes a connection idle for 60 s by default",
        "the load balancer attribute idle_timeout.timeout_seconds (1-4000)",
        "https://docs.aws.amazon.com/elasticloadbalancing/latest/application/edit-load-balancer-attributes.html"),
    PlatformLimit(
        "AWS CloudFront", 30, "idle-timeout", ANY_SILENCE,
        "waits 30 s by default for the origin's response, and as long between its packets",
        "the origin's Response timeout (1-60 s, more by a quota increase)",
        "https://docs.aws.amazon.com/AmazonCloudFront/latest/DeveloperGuide/DownloadDistValuesOrigin.html"),
    PlatformLimit(
        "AWS API Gateway (REST)", 29, "total-timeout", (),
        "ends an integration after 29 s by default",
        "the integration timeout (above 29 s by a quota request), or response streaming",
        "https://docs.aws.amazon.com/apigateway/latest/developerguide/limits.html"),
    PlatformLimit(
        "Google Cloud Application Load Balancer", 30, "total-timeout", (),
        "gives a backend 30 s by default for its whole response",
        "the backend service's timeoutSec (GKE: BackendConfig spec.timeoutSec)",
        "https://cloud.google.com/load-balancing/docs/backend-service#timeout-setting"),
    PlatformLimit(
        "Heroku router", 30, "idle-timeout", BEFORE_HEADERS,
        "answers H12 (503) when the first byte takes more than 30 s",
        "not configurable: send the headers (or a byte) within 30 s",
        "https://devcenter.heroku.com/articles/request-timeout"),
    PlatformLimit(
        "Heroku router", 55, "idle-timeout", AFTER_HEADERS,
        "ends a response that sends nothing for 55 s (the rolling window after the first byte)",
        "not configurable: send a byte at least every 55 s",
        "https://devcenter.heroku.com/articles/request-timeout"),
    PlatformLimit(
        "Azure App Service", 230, "idle-timeout", BEFORE_HEADERS,
        "its front end gives up on a request that has no response after 230 s",
        "not configurable: answer (or stream) sooner",
        "https://learn.microsoft.com/en-us/troubleshoot/azure/app-service/web-apps-performance-faqs"),
    PlatformLimit(
        "nginx (and ingress-nginx)", 60, "idle-timeout", ANY_SILENCE,
        "proxy_read_timeout, 60 s by default",
        "proxy_read_timeout (ingress-nginx: the proxy-read-timeout annotation)",
        "https://nginx.org/en/docs/http/ngx_http_proxy_module.html#proxy_read_timeout"),
    PlatformLimit(
        "Envoy (Envoy Gateway, Gloo, a bare Envoy)", 15, "total-timeout", (),
        "a route's timeout, 15 s by default, on the whole response",
        "the route's timeout: 0s (Gateway API: HTTPRoute timeouts.request)",
        "https://www.envoyproxy.io/docs/envoy/latest/api-v3/config/route/v3/route_components.proto"),
)


def hints(kind: str, position: str | None, measured_s: float | None) -> list[str]:
    """The documented limits a measured one matches, each as one line (none when nothing does)."""
    if measured_s is None:
        return []
    return [entry.hint() for entry in LIMITS if entry.matches(kind, position, measured_s)]
