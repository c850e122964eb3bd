"""Kubernetes scenarios: the configs a controller runs for an Ingress or an HTTPRoute.

Each variant is a manifest (`Variant.manifest`), translated as `labs verify` translates a user's
(labs/verify/kubernetes) into the config the controller would run, and that config measured:
ingress-nginx's nginx for an Ingress and its ConfigMap, Envoy Gateway's Envoy for an HTTPRoute and
its policies.
"""
from __future__ import annotations

from labs.scenario import checks
from labs.scenario.model import Scaled, Scenario, Variant, Workload

GATEWAY_API = "https://gateway-api.sigs.k8s.io/reference/spec"
ENVOY_GATEWAY = "https://gateway.envoyproxy.io/docs/api/extension_types"
INGRESS_NGINX = "https://kubernetes.github.io/ingress-nginx/user-guide/nginx-configuration"
INGRESS2GATEWAY = "https://github.com/kubernetes-sigs/ingress2gateway/pull/289"
# The broken limits, scaled down through the manifests' own fields (declared once, used by both
# the manifest and its checks).
REQUEST_TIMEOUT_S = 2.0  # gateway-total-deadline: HTTPRoute timeouts.request, standing for 60s
READ_TIMEOUT_S = 1  # ingress-read-timeout: ConfigMap proxy-read-timeout, standing for its default 60
SERVICE_PORT = 8000  # the Service's port in the manifests (the run points it at the lab's server)


def httproute(request_timeout: str, idle_policy: str | None = None) -> str:
    """An HTTPRoute for the model's Service on `/v1` with that total deadline, and, when given, an
    Envoy Gateway BackendTrafficPolicy bounding the stream's silences instead."""
    route = f"""\
# The route an Ingress with `proxy-read-timeout: "60"` becomes after a migration (ingress2gateway
# maps the per-read timeout to timeouts.request, the whole answer's deadline).
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: llm
spec:
  parentRefs:
    - name: llm
  rules:
    - matches:
        - path:
            type: PathPrefix
            value: /v1
      backendRefs:
        - name: llm
          port: {SERVICE_PORT}
      timeouts:
        request: {request_timeout}
"""
    if idle_policy is None:
        return route
    return route + f"""\
---
apiVersion: gateway.envoyproxy.io/v1alpha1
kind: BackendTrafficPolicy
metadata:
  name: llm
spec:
  targetRefs:
    - group: gateway.networking.k8s.io
      kind: HTTPRoute
      name: llm
  timeout:
    http:
      streamIdleTimeout: {idle_policy}
"""


def ingress(controller_read_timeout: int, annotations: dict[str, str] | None = None) -> str:
    """The ingress-nginx controller's ConfigMap with that read timeout (seconds), and an Ingress for
    the model's Service on `/v1`, with these `nginx.ingress.kubernetes.io/` annotations."""
    annotated = "".join(f'\n    nginx.ingress.kubernetes.io/{key}: "{value}"'
                        for key, value in (annotations or {}).items())
    return f"""\
apiVersion: v1
kind: ConfigMap
metadata:
  name: ingress-nginx-controller
  namespace: ingress-nginx
data:
  proxy-read-timeout: "{controller_read_timeout}"
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: llm
  annotations:{annotated or " {}"}
spec:
  ingressClassName: nginx
  rules:
    - http:
        paths:
          - path: /v1
            pathType: Prefix
            backend:
              service:
                name: llm
                port:
                  number: {SERVICE_PORT}
"""


SCENARIOS = [
    Scenario(
        name="gateway-total-deadline",
        layer="proxy",
        kind="total-timeout",
        symptom="after the move to Gateway API, every answer longer than a minute is cut, heartbeats or not",
        path=("envoy",),
        workload=Workload(tokens_per_s=10.0, lab={"heartbeat_s": 0.25},
                          script=("Every token should reach the reader the moment the model makes it. "
                                  "A token stream should reach the reader one token at a time.")),
        broken=Variant(manifest=httproute(f"{REQUEST_TIMEOUT_S:g}s")),
        fix=Variant(manifest=httproute("0s", idle_policy="10s")),
        symptom_checks=(checks.outcome_is("truncated"), checks.status_is(200),
                        checks.cut_at_deadline(REQUEST_TIMEOUT_S, "the HTTPRoute's timeouts.request"),
                        checks.finding("total-timeout")),
        cure_checks=(checks.complete_with_done(), checks.outlived(REQUEST_TIMEOUT_S, "the broken timeouts.request"),
                     checks.no_finding("total-timeout")),
        proxy_stats=("upstream_rq_timeout", "downstream_rq_2xx"),
        explanation=(
            "Gateway API has no idle timeout: an HTTPRoute's `timeouts.request` bounds the whole "
            "transaction, from the request to the end of the stream, and bytes do not reset it. "
            "ingress2gateway maps ingress-nginx's per-read `proxy-read-timeout` (60 s) onto it, so a "
            "migrated route cuts every answer that streams longer than that: a 200, half an answer, no "
            "[DONE], although the stream is never silent (a token every 0.1 s here, heartbeats armed every "
            "0.25 s in both variants). Envoy Gateway "
            "turns it into the Envoy route's `timeout`, and a route that sets nothing keeps Envoy's 15 s. "
            "Set `timeouts.request: 0s` (or above the longest stream) and bound silences with a "
            "BackendTrafficPolicy's `timeout.http.streamIdleTimeout`, the route's `idle_timeout`."),
        fix_summary="HTTPRoute timeouts.request: 0s, plus BackendTrafficPolicy streamIdleTimeout above the longest silence",
        scaled=(Scaled("timeouts.request", "2s", "60s (ingress2gateway's map of proxy-read-timeout)"),),
        sources=(f"{GATEWAY_API}/#httproutetimeouts", f"{ENVOY_GATEWAY}/#httptimeout", INGRESS2GATEWAY),
    ),
    Scenario(
        name="ingress-read-timeout",
        layer="proxy",
        kind="idle-timeout",
        symptom="behind the Ingress, answers die when the model thinks for a minute",
        path=("nginx",),
        workload=Workload(lab={"pause_after_tokens": 5, "pause_s": 3.0}),
        broken=Variant(manifest=ingress(READ_TIMEOUT_S), lab={"heartbeat_s": 0}),
        fix=Variant(manifest=ingress(READ_TIMEOUT_S, {"proxy-read-timeout": "10"}), lab={"heartbeat_s": 0.25}),
        symptom_checks=(checks.outcome_is("truncated"), checks.status_is(200),
                        checks.cut_after_silence(READ_TIMEOUT_S, "the controller's proxy-read-timeout"),
                        checks.finding("idle-timeout")),
        cure_checks=(checks.complete_with_done(),
                     checks.silence_outlasted(READ_TIMEOUT_S, "the controller's proxy-read-timeout"),
                     checks.no_finding("idle-timeout")),
        explanation=(
            "ingress-nginx writes `proxy_read_timeout` from its ConfigMap's `proxy-read-timeout`, 60 s "
            "when nothing sets it: a silence between two reads from the model longer than that (a "
            "reasoning model's thinking, a tool call, a queue) cuts the stream with a 200 already sent, "
            "no final chunk and no [DONE]. The controller buffers nothing by default "
            "(`proxy-buffering: off`), so only the silence matters. Raise it for the model's Ingress "
            "alone with the annotation `nginx.ingress.kubernetes.io/proxy-read-timeout` above the "
            "longest silence (it overrides the ConfigMap for that Ingress), and send heartbeats."),
        fix_summary='annotation nginx.ingress.kubernetes.io/proxy-read-timeout: "<above the longest silence>", plus heartbeats',
        scaled=(Scaled("proxy-read-timeout", "1", "60 (the controller's default)"),
                Scaled("silence mid-stream", "3s", "minutes"), Scaled("heartbeat interval", "0.25s", "10s")),
        sources=(f"{INGRESS_NGINX}/configmap/#proxy-read-timeout",
                 f"{INGRESS_NGINX}/annotations/#custom-timeouts"),
    ),
]
