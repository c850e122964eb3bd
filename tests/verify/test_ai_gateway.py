"""verify on Envoy AI Gateway's AIGatewayRoute: read as the HTTPRoute its controller derives (the
60 s `timeouts.request` it writes where the rule sets none, api/v1beta1/ai_gateway_route_helper.go
at v1.1.0), handed to the Envoy Gateway translation, run in Envoy and measured; the finding named
at the rule's line, or at the controller's default with its source."""
from __future__ import annotations

import pytest

from labs.verify import read_config, verify_config
from labs.verify.kubernetes import ai_gateway
from tests.verify.test_static import write

ROUTE = """\
apiVersion: aigateway.envoyproxy.io/v1beta1
kind: AIGatewayRoute
metadata: {{name: chat}}
spec:
  parentRefs: [{{name: eg, kind: Gateway, group: gateway.networking.k8s.io}}]
  rules:
    - matches:
        - headers: [{{type: Exact, name: x-ai-eg-model, value: lab-model}}]
      backendRefs: [{{name: vllm}}]
{timeouts}---
apiVersion: aigateway.envoyproxy.io/v1beta1
kind: AIServiceBackend
metadata: {{name: vllm}}
spec:
  schema: {{name: OpenAI}}
  backendRef: {{name: vllm, kind: Backend, group: gateway.envoyproxy.io}}
{extra}---
apiVersion: gateway.envoyproxy.io/v1alpha1
kind: Backend
metadata: {{name: vllm}}
spec:
  endpoints: [{{fqdn: {{hostname: vllm, port: 8000}}}}]
{policy}"""
POLICY = """\
---
apiVersion: gateway.envoyproxy.io/v1alpha1
kind: BackendTrafficPolicy
metadata: {name: chat}
spec:
  targetRefs: [{group: gateway.networking.k8s.io, kind: HTTPRoute, name: chat}]
  timeout:
    http: {requestTimeout: 0s, streamIdleTimeout: 300s}
"""


def manifest(timeouts: str = "", policy: str = "", extra: str = "") -> str:
    return ROUTE.format(timeouts=timeouts, policy=policy, extra=extra)


def test_no_timeout_is_the_controllers_60_s_named_with_its_source(tmp_path):
    reading = read_config(write(tmp_path, "aigw.yaml", manifest()))
    timeout = reading.get("route timeout")
    assert reading.proxy == "envoy" and reading.route.startswith("AIGatewayRoute chat")
    assert timeout.value == 60.0 and "spec.rules.timeouts.request not set (" in timeout.where
    assert ai_gateway.DEFAULT_SOURCE in timeout.where and ai_gateway.COMMIT in ai_gateway.DEFAULT_SOURCE
    assert any("external processor" in n for n in reading.notes)


def test_the_rules_own_timeout_is_read_at_its_line(tmp_path):
    reading = read_config(write(tmp_path, "aigw.yaml", manifest("      timeouts: {request: 1800s}\n")))
    assert reading.get("route timeout").value == 1800.0
    assert reading.get("route timeout").where.endswith("aigw.yaml:10 AIGatewayRoute chat spec.rules.timeouts.request")


def test_a_policys_request_timeout_is_shadowed_by_the_derived_route(tmp_path):
    """Envoy Gateway: "gateway-api timeout takes precedence", and the derived rule always has one."""
    reading = read_config(write(tmp_path, "aigw.yaml", manifest(policy=POLICY)))
    assert reading.get("route timeout").value == 60.0
    assert reading.get("route idle_timeout").where.endswith("BackendTrafficPolicy chat spec.timeout.http.streamIdleTimeout")
    assert any("requestTimeout is not applied" in n for n in reading.notes), reading.notes


def test_a_field_the_crd_refuses_is_said(tmp_path):
    """examples/aigw/ollama.yaml at v1.1.0 puts `timeouts` on an AIServiceBackend: its schema has none."""
    reading = read_config(write(tmp_path, "aigw.yaml", manifest(extra="  timeouts: {request: 3m}\n")))
    said = " ".join(reading.notes)
    assert "AIServiceBackend vllm" in said and "timeouts" in said and "refuses it" in said
    assert not any("refuses it" in n for n in read_config(write(tmp_path, "ok.yaml", manifest())).notes)


@pytest.mark.slow
def test_a_stream_past_the_controllers_default_is_cut_there_and_a_raised_timeout_passes(
        verify_server, tmp_path, monkeypatch):
    """The controller's 60 s scaled to 3 s (its constant, as verify scales its own waits): a 5 s
    stream is cut at it, the finding at the rule with the default's source; the rule's timeout
    raised, the same stream passes."""
    monkeypatch.setattr(ai_gateway, "DEFAULT_REQUEST_TIMEOUT", "3s")
    cut = verify_config(write(tmp_path, "cut.yaml", manifest()), checks=["long-stream"], server=verify_server,
                        max_stream_s=5)
    finding = next(f for f in cut.failures() if f.kind == "total-timeout")
    assert "spec.rules.timeouts.request not set" in finding.where and ai_gateway.DEFAULT_SOURCE in finding.where
    assert finding.limit_s and abs(finding.limit_s - 3.0) <= 1.0, finding
    raised = verify_config(write(tmp_path, "raised.yaml", manifest("      timeouts: {request: 1800s}\n")),
                           checks=["long-stream"], server=verify_server, max_stream_s=5)
    assert [(c.name, c.passed) for c in raised.checks] == [("long-stream", True), ("loopback-only", True)], raised.checks


def test_probe_names_the_limit_verify_reads():
    """`labs probe`'s platform table and verify say the same 60 s and the same field to move it."""
    from labs.probe.platforms import PLATFORMS
    limit = next(p for p in PLATFORMS if p.platform == "Envoy AI Gateway")
    assert limit.kind == "total-timeout" and f"{limit.limit_s:g}s" == ai_gateway.DEFAULT_REQUEST_TIMEOUT
    assert "timeouts.request" in limit.setting and "/pull/796" in limit.source  # #796 wrote the default
