"""verify on the gateways people move to after ingress-nginx: NGINX Gateway Fabric (an HTTPRoute and
its ProxySettingsPolicy) and F5 NGINX Ingress Controller (an Ingress with `nginx.org/*` annotations,
a VirtualServer), each translated into the nginx its controller renders, every field checked against
the controller's vendored schema, buffering and a short read timeout measured both ways."""
from __future__ import annotations

import pytest

from labs.findings import UnusableInput
from labs.verify import read_config, verify_config
from tests.verify.test_kubernetes import ROUTE
from tests.verify.test_static import write

# Envoy Gateway's test route (its parent is no Gateway of NGF's class) with NGF's policy beside it.
NGF = ROUTE.split("---\n")[0].format(timeouts="").replace("{", "{{").replace("}", "}}") + """\
---
apiVersion: gateway.nginx.org/v1alpha1
kind: ProxySettingsPolicy
metadata: {{name: vllm}}
spec:
  targetRefs: [{{group: gateway.networking.k8s.io, kind: HTTPRoute, name: vllm}}]
{spec}"""
NGF_GATEWAY_ONLY = """\
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: gateway}
spec:
  gatewayClassName: nginx
  listeners: [{name: http, port: 80, protocol: HTTP}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: vllm}
spec:
  parentRefs: [{name: gateway}]
  rules:
    - backendRefs: [{name: vllm, port: 8000}]
"""
F5 = """\
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: vllm
  annotations:
{annotations}spec:
  ingressClassName: nginx
  rules:
    - http:
        paths:
          - path: /
            pathType: Prefix
            backend: {{service: {{name: vllm, port: {{number: 8000}}}}}}
"""
VIRTUAL_SERVER = """\
apiVersion: k8s.nginx.org/v1
kind: VirtualServer
metadata: {{name: vllm}}
spec:
  host: llm.example.com
  upstreams:
    - name: vllm
      service: vllm
      port: 8000
{fields}  routes:
    - path: /
      action: {{pass: vllm}}
"""


def test_ngf_renders_buffering_on_unless_its_policy_turns_it_off(tmp_path):
    bare = read_config(write(tmp_path, "gw.yaml", NGF_GATEWAY_ONLY))
    assert bare.proxy == "nginx" and bare.get("proxy_buffering").value in ("on", True)
    assert "nginx's default, which NGF keeps" in bare.get("proxy_buffering").where
    assert bare.get("proxy_read_timeout").value == "60s"
    off = read_config(write(tmp_path, "off.yaml", NGF.format(spec="  buffering: {disable: true}\n  timeout: {read: 2s}\n")))
    assert off.get("proxy_buffering").value in ("off", False)
    assert off.get("proxy_buffering").where.endswith("off.yaml:18 ProxySettingsPolicy vllm spec.buffering.disable")
    assert off.get("proxy_read_timeout").value == "2s"
    on = read_config(write(tmp_path, "on.yaml", NGF.format(spec="  buffering: {disable: false, bufferSize: 8k}\n")))
    assert on.get("proxy_buffering").value in ("on", True) and "spec.buffering.disable" in on.get("proxy_buffering").where


def test_an_httproute_alone_is_ngfs_with_proxy_nginx_and_envoy_gateways_otherwise(tmp_path):
    """inference-extension-ngf-httproute (tests/data/wild): its Gateway of class nginx is in another
    file; `--proxy nginx` was refused ("runs as envoy"), it now reads NGF's nginx."""
    path = write(tmp_path, "route.yaml", NGF_GATEWAY_ONLY.split("---\n", 1)[1])
    assert read_config(path).proxy == "envoy"
    named = read_config(path, "nginx")
    assert named.proxy == "nginx" and "nginx's default, which NGF keeps" in named.get("proxy_buffering").where


def test_a_field_ngfs_schema_does_not_know_is_one_line_naming_it(tmp_path):
    with pytest.raises(UnusableInput, match=r"ProxySettingsPolicy vllm: .*'bufering' was unexpected.*schema refuses"):
        read_config(write(tmp_path, "typo.yaml", NGF.format(spec="  bufering: {disable: true}\n")))


def test_f5_reads_nginx_org_annotations_and_tells_ingress_nginxs_as_ignored(tmp_path):
    reading = read_config(write(tmp_path, "f5.yaml", F5.format(annotations=(
        '    nginx.org/proxy-buffering: "False"\n    nginx.org/proxy-read-timeout: "3600s"\n'
        '    nginx.org/websocket-services: vllm\n    nginx.ingress.kubernetes.io/proxy-buffering: "on"\n'
        '    nginx.org/proxy-bufering: "False"\n    nginx.org/location-snippets: "gzip on;"\n'))))
    assert reading.proxy == "nginx" and reading.get("proxy_buffering").value in ("off", False)
    assert reading.get("proxy_buffering").where.endswith('f5.yaml:6 Ingress vllm metadata.annotations."nginx.org/proxy-buffering"')
    assert reading.get("proxy_read_timeout").value == "3600s"
    said = "\n".join(reading.notes)
    assert 'f5.yaml:9 Ingress vllm: annotation nginx.ingress.kubernetes.io/proxy-buffering is ingress-nginx\'s' in said
    assert "does not know (ignored): nginx.org/proxy-bufering" in said and "nginx.org/websocket-services" in said
    assert "nginx.org/location-snippets is not applied (its nginx text: 'gzip on;')" in said
    bare = read_config(write(tmp_path, "bare.yaml", F5.format(annotations='    nginx.org/proxy-send-timeout: "90s"\n')))
    assert bare.get("proxy_buffering").value in ("on", True) and "config_params.go" in bare.get("proxy_buffering").where


def test_a_buffering_value_the_controller_refuses_is_the_users_error_at_its_line(tmp_path):
    """F5's annotation validation (validateBoolAnnotation) rejects the whole Ingress for a value Go's
    ParseBool does not take ("off", raw nginx syntax): nothing of it is served, so verify measures
    nothing and says so, exit 2 at the line (it once kept the default and passed the stream)."""
    manifest = write(tmp_path, "off.yaml", F5.format(annotations='    nginx.org/proxy-buffering: "off"\n'))
    with pytest.raises(UnusableInput, match=r"annotation nginx.org/proxy-buffering: 'off' is not a boolean.*"
                                             r"rejects the whole Ingress") as refused:
        read_config(manifest)
    assert refused.value.line == 6


def test_an_ingress_nginx_ingress_names_f5s_annotations_as_ignored(tmp_path):
    reading = read_config(write(tmp_path, "mixed.yaml", F5.format(annotations=(
        '    nginx.ingress.kubernetes.io/proxy-buffering: "off"\n    nginx.ingress.kubernetes.io/proxy-read-timeout: "90"\n'
        '    nginx.org/proxy-buffering: "True"\n'))))
    assert reading.get("proxy_buffering").where.endswith('"nginx.ingress.kubernetes.io/proxy-buffering"')
    assert any("mixed.yaml:8 annotation nginx.org/proxy-buffering is F5 NGINX Ingress Controller's" in n
               for n in reading.notes), reading.notes


def test_a_virtual_server_upstreams_buffering_and_timeouts(tmp_path):
    reading = read_config(write(tmp_path, "vs.yaml", VIRTUAL_SERVER.format(
        fields="      buffering: false\n      read-timeout: 2s\n")))
    assert reading.get("proxy_buffering").value in ("off", False) and reading.host == "llm.example.com"
    assert reading.get("proxy_buffering").where.endswith("vs.yaml:10 VirtualServer vllm spec.upstreams[vllm].buffering")
    assert reading.get("proxy_read_timeout").value == "2s"
    with pytest.raises(UnusableInput, match=r"'read-timout' was unexpected"):
        read_config(write(tmp_path, "typo.yaml", VIRTUAL_SERVER.format(fields="      read-timout: 2s\n")))


VIRTUAL_SERVER_ROUTE = """\
apiVersion: k8s.nginx.org/v1
kind: VirtualServer
metadata: {name: chat}
spec:
  host: llm.example.com
  routes:
    - {path: /v1, route: llm}
---
apiVersion: k8s.nginx.org/v1
kind: VirtualServerRoute
metadata: {name: llm}
spec:
  host: llm.example.com
  upstreams:
    - {name: vllm, service: vllm, port: 8000, read-timeout: 2s}
  subroutes:
    - {path: /v1, action: {pass: vllm}}
"""


def test_a_virtual_server_route_delegated_to_is_read(tmp_path):
    reading = read_config(write(tmp_path, "vsr.yaml", VIRTUAL_SERVER_ROUTE))
    assert reading.get("proxy_read_timeout").value == "2s"
    assert reading.get("proxy_read_timeout").where.endswith("VirtualServerRoute llm spec.upstreams[vllm].read-timeout")
    assert "config_params.go" in reading.get("proxy_buffering").where  # on: the controller's default


@pytest.mark.slow
@pytest.mark.parametrize("name, text, kind, field", [
    ("ngf.yaml", NGF.format(spec="  timeout: {read: 2s}\n"), "idle-timeout", "spec.timeout.read"),
    ("f5.yaml", F5.format(annotations='    nginx.org/proxy-read-timeout: "2s"\n'), "idle-timeout",
     '"nginx.org/proxy-read-timeout"'),
    ("vs.yaml", VIRTUAL_SERVER.format(fields="      read-timeout: 2s\n"), "idle-timeout",
     "VirtualServer vllm spec.upstreams[vllm].read-timeout"),
])
def test_a_short_read_timeout_cuts_the_stream_at_its_field(verify_server, tmp_path, name, text, kind, field):
    report = verify_config(write(tmp_path, name, text), checks=["silence-mid-stream"], server=verify_server,
                           max_silence_s=4)
    finding = next(f for f in report.failures() if f.kind == kind)
    assert field in finding.where, finding.where


@pytest.mark.slow
@pytest.mark.parametrize("name, text, passed", [
    ("ngf-off.yaml", NGF.format(spec="  buffering: {disable: true}\n  timeout: {read: 1h}\n"), True),
    ("f5-off.yaml", F5.format(annotations='    nginx.org/proxy-buffering: "False"\n'), True),
    # Both controllers write proxy_http_version 1.1: the chunked reply passes buffering on event by
    # event (measured 2026-12-07: 12 events in 12 reads), a warning naming the setting.
    ("ngf-on.yaml", NGF_GATEWAY_ONLY, True),
])
def test_buffering_off_streams_and_on_too_with_http_1_1(verify_server, tmp_path, name, text, passed):
    report = verify_config(write(tmp_path, name, text), checks=["streaming"], server=verify_server)
    assert [(c.name, c.passed) for c in report.checks] == [("streaming", passed), ("loopback-only", True)], report.checks
