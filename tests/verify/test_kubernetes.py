"""verify on Kubernetes manifests: an Ingress with ingress-nginx's annotations and ConfigMap, an
HTTPRoute with Envoy Gateway's policies, a Traefik IngressRoute with its Middlewares, each
translated into the config its controller runs, judged and measured, the findings at the
manifest's fields; keys verify does not translate are listed, never dropped."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from labs.findings import UnusableInput
from labs.verify import read_config, verify_config
from labs.verify.kubernetes import translate
from tests.verify.test_static import write

K8S = Path(__file__).resolve().parents[2] / "proxies" / "fixed" / "kubernetes"
INGRESS = """\
apiVersion: v1
kind: ConfigMap
metadata:
  name: ingress-nginx-controller
  namespace: ingress-nginx
data:
  proxy-read-timeout: "120"
  use-gzip: "true"
  enable-brotli: "true"
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: vllm
  annotations:
    nginx.ingress.kubernetes.io/proxy-read-timeout: "{timeout}"
    nginx.ingress.kubernetes.io/rewrite-target: /$2
    nginx.ingress.kubernetes.io/configuration-snippet: |
      more_set_headers "X-Accel-Buffering: no";
spec:
  ingressClassName: nginx
  rules:
    - host: llm.example.com
      http:
        paths:
          - path: /
            pathType: Prefix
            backend: {{service: {{name: ui, port: {{number: 3000}}}}}}
          - path: /v1
            pathType: Prefix
            backend: {{service: {{name: vllm, port: {{number: 8000}}}}}}
"""
ROUTE = """\
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata:
  name: vllm
spec:
  parentRefs: [{{name: eg}}]
  rules:
    - matches:
        - path: {{type: PathPrefix, value: /v1}}
{timeouts}      backendRefs:
        - {{name: vllm, port: 8000}}
---
apiVersion: gateway.envoyproxy.io/v1alpha1
kind: BackendTrafficPolicy
metadata:
  name: vllm
spec:
  targetRefs: [{{group: gateway.networking.k8s.io, kind: HTTPRoute, name: vllm}}]
  timeout:
    http: {{streamIdleTimeout: 60s}}
  retry: {{numRetries: 2}}
"""
INGRESSROUTE = """\
apiVersion: traefik.io/v1alpha1
kind: Middleware
metadata:
  name: limit
spec:
  buffering: {maxRequestBodyBytes: 1048576}
---
apiVersion: traefik.io/v1alpha1
kind: IngressRoute
metadata:
  name: chat
spec:
  entryPoints: [websecure]
  routes:
    - match: Host(`chat.example.com`) && PathPrefix(`/v1`)
      kind: Rule
      middlewares: [{name: limit}, {name: elsewhere}]
      services: [{name: vllm, port: 8000}]
"""


def test_an_ingress_is_read_as_the_nginx_its_controller_runs(tmp_path):
    reading = read_config(write(tmp_path, "ingress.yaml", INGRESS.format(timeout="30")))
    assert reading.proxy == "nginx" and reading.route.startswith("Ingress vllm") and reading.host == "llm.example.com"
    timeout = reading.get("proxy_read_timeout")
    assert timeout.value == "30s" and timeout.where.endswith(
        'ingress.yaml:16 Ingress vllm metadata.annotations."nginx.ingress.kubernetes.io/proxy-read-timeout"')
    assert reading.get("gzip").where.endswith("ConfigMap data.use-gzip")  # the ConfigMap, the annotation absent
    assert reading.get("proxy_buffering").where.startswith("ingress-nginx's default for proxy-buffering")
    said = " ".join(reading.notes)
    assert "enable-brotli" in said and "rewrite-target" in said and "configuration-snippet is not applied" in said


def test_an_httproute_keeps_envoys_15_s_unless_it_says_otherwise(tmp_path):
    bare = read_config(write(tmp_path, "route.yaml", ROUTE.format(timeouts="")))
    assert bare.proxy == "envoy" and bare.get("route timeout").value == 15.0
    assert "which Envoy Gateway keeps when nothing is set" in bare.get("route timeout").where
    assert bare.get("route idle_timeout").where.endswith("BackendTrafficPolicy vllm spec.timeout.http.streamIdleTimeout")
    assert any("not translated" in n and "retry" in n for n in bare.notes)
    set_ = read_config(write(tmp_path, "set.yaml", ROUTE.format(timeouts="      timeouts: {request: 10s}\n")))
    assert set_.get("route timeout").value == 10.0
    assert set_.get("route timeout").where.endswith("set.yaml:10 HTTPRoute vllm spec.rules.timeouts.request")


def test_an_ingressroute_is_read_as_traefiks_dynamic_configuration(tmp_path):
    reading = read_config(write(tmp_path, "ir.yaml", INGRESSROUTE))
    assert reading.proxy == "traefik" and reading.host == "chat.example.com"
    assert reading.get("buffering").where.endswith("ir.yaml:6 Middleware limit spec.buffering")
    assert any("elsewhere" in n for n in reading.notes) and any("static configuration" in n for n in reading.notes)
    # The translation is what Traefik's CRD provider would load: not "a section Traefik ignores".
    assert not any("ignores it" in n for n in reading.notes), reading.notes


MANIFESTS = {"nginx": INGRESS.format(timeout="30"), "envoy": ROUTE.format(timeouts=""), "traefik": INGRESSROUTE}


@pytest.mark.parametrize("proxy", sorted(MANIFESTS))
def test_a_manifest_named_with_its_proxy_is_read_as_detection_reads_it(tmp_path, proxy):
    """kreatoo-open-webui-ingressroute's run (tests/data/wild): `--proxy traefik` on an IngressRoute
    read the manifest as a file-provider file ("no HTTP router"); --proxy naming the controller's
    proxy now gives detection's reading, another proxy one clear line."""
    path = write(tmp_path, "m.yaml", MANIFESTS[proxy])
    detected, named = read_config(path), read_config(path, proxy)
    # the same manifest object, the same settings at the same fields
    assert named.proxy == detected.proxy == proxy and named.scope == detected.scope, (named.scope, detected.scope)
    assert fields(named) == fields(detected)
    # (an HTTPRoute named with --proxy nginx is NGINX Gateway Fabric's: test_kubernetes_nginx.py)
    other = next(p for p in sorted(MANIFESTS) if p != proxy and (proxy, p) != ("envoy", "nginx"))
    with pytest.raises(UnusableInput, match=f"which verify runs as {proxy} .*not {other}: pass --proxy {proxy}"):
        read_config(path, other)


def fields(reading) -> dict[str, str]:
    """Each setting's field, a translated file's folder left out (each translation has its own)."""
    return {name: re.sub(r"streamlab-k8s-[^/]+", "", s.where) for name, s in reading.settings.items()}


def test_a_manifest_verify_does_not_translate_goes_to_the_named_proxys_reader(tmp_path):
    path = write(tmp_path, "m.yaml", "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n")
    with pytest.raises(UnusableInput, match="no HTTP router in the dynamic configuration"):
        read_config(path, "traefik")  # Traefik's reader says what it makes of it, as before


@pytest.mark.parametrize("text, message", [
    ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n", "no object verify translates"),
    ("apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata: {name: x}\nspec:\n  rules:\n"
     "    - http: {paths: [{path: /ui, pathType: Exact, backend: {service: {name: a, port: {number: 1}}}}]}\n",
     "no Ingress path serves"),
    ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: ingress-nginx-controller}\ndata:\n"
     "  proxy-read-timeout: soon\n---\napiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: x\n"
     "spec:\n  defaultBackend: {service: {name: a, port: {number: 1}}}\n",
     "proxy-read-timeout: 'soon' is not a number of seconds"),
])
def test_what_verify_cannot_translate_is_one_clear_line(tmp_path, text, message):
    with pytest.raises(UnusableInput, match=message):
        read_config(write(tmp_path, "m.yaml", text))


UNPARSED = """\
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: vllm
  annotations:
    nginx.ingress.kubernetes.io/proxy-body-size: ""
    nginx.ingress.kubernetes.io/proxy-read-timeout: soon
    nginx.ingress.kubernetes.io/proxy-send-timeout: "90"
spec:
  defaultBackend: {service: {name: vllm, port: {number: 8000}}}
"""
REDIRECTED = """\
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: eg}
spec:
  gatewayClassName: eg
  listeners:
    - {name: http, protocol: HTTP, port: 80}
    - {name: https, protocol: HTTPS, port: 443, tls: {certificateRefs: [{name: llm-tls}]}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: to-https}
spec:
  parentRefs: [{name: eg, sectionName: http}]
  rules:
    - filters:
        - {type: RequestRedirect, requestRedirect: {scheme: https, statusCode: 301}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: api}
spec:
  parentRefs: [{name: eg, sectionName: https}]
  rules:
    - matches: [{path: {type: PathPrefix, value: /}}]
      timeouts: {request: 300s}
      backendRefs: [{name: vllm, port: 8000}]
"""


def test_an_annotation_ingress_nginx_cannot_parse_is_ignored_as_it_does(tmp_path):
    manifest = write(tmp_path, "ingress.yaml", UNPARSED)
    nginx = translate(manifest).path.read_text()
    assert "client_max_body_size 1m;" in nginx and "client_max_body_size ;" not in nginx
    reading = read_config(manifest)
    read = reading.get("proxy_read_timeout")
    assert read.value == "60s" and read.where.startswith("ingress-nginx's default for proxy-read-timeout")
    said = " ".join(reading.notes)
    assert "proxy-body-size: an empty value; ingress-nginx ignores an annotation it cannot parse" in said
    assert "proxy-read-timeout: 'soon' is not a number of seconds" in said
    # The annotation that parses is still applied, at its field.
    assert reading.get("proxy_send_timeout").value == "90s"
    assert reading.get("proxy_send_timeout").where.endswith('proxy-send-timeout"')


def test_an_http_listeners_redirect_is_followed_to_the_route_that_serves(tmp_path):
    reading = read_config(write(tmp_path, "gateway.yaml", REDIRECTED))
    assert reading.proxy == "envoy" and reading.route.startswith("HTTPRoute api")
    assert reading.get("route timeout").value == 300.0
    assert any("HTTPRoute to-https" in n and "RequestRedirect (scheme https, statusCode 301)" in n
               and "followed to HTTPRoute api" in n for n in reading.notes), reading.notes
    # Only the redirect: nothing serves the API, and the line says so.
    alone = REDIRECTED.split("---")[:2]
    with pytest.raises(UnusableInput, match="no HTTPRoute rule serves POST .*RequestRedirect"):
        read_config(write(tmp_path, "alone.yaml", "---".join(alone)))


@pytest.mark.slow
@pytest.mark.parametrize("name, text", [("ingress.yaml", UNPARSED), ("gateway.yaml", REDIRECTED)])
def test_the_ignored_annotation_and_the_followed_redirect_run_and_stream(verify_server, tmp_path, name, text):
    """Each runs with its proxy (nginx -t rejected `client_max_body_size ;`) and streams."""
    report = verify_config(write(tmp_path, name, text), checks=["streaming"], server=verify_server)
    assert [(c.name, c.passed) for c in report.checks] == [("streaming", True), ("loopback-only", True)], report.checks


@pytest.mark.slow
def test_the_faults_are_measured_and_named_at_the_manifests_fields(verify_server, tmp_path):
    ingress = verify_config(write(tmp_path, "ingress.yaml", INGRESS.format(timeout="2")), checks=["silence-mid-stream"],
                            server=verify_server, max_silence_s=4)
    finding = next(f for f in ingress.failures() if f.kind == "idle-timeout")
    assert "proxy-read-timeout" in finding.where and 'nginx.ingress.kubernetes.io/proxy-read-timeout: "' in finding.fix
    assert ingress.file.endswith("ingress.yaml")
    route = verify_config(write(tmp_path, "route.yaml", ROUTE.format(timeouts="      timeouts: {request: 2s}\n")),
                          checks=["long-stream"], server=verify_server, max_stream_s=4)
    finding = next(f for f in route.failures() if f.kind == "total-timeout")
    assert finding.where.endswith("spec.rules.timeouts.request") and "spec.rules.timeouts.request: 0s" in finding.fix
    assert all(c.passed for r in (ingress, route) for c in r.checks if c.name == "loopback-only")


PLAIN_INGRESSROUTE = """\
apiVersion: traefik.io/v1alpha1
kind: IngressRoute
metadata: {name: chat}
spec:
  entryPoints: [websecure]
  routes:
    - match: Host(`chat.example.com`)
      kind: Rule
      services: [{name: ui, port: 8080, scheme: http}]
  tls: {secretName: chat-tls}
"""


@pytest.mark.slow
def test_an_ingressroute_named_with_proxy_traefik_runs_its_translation(verify_server, tmp_path, headers_late):
    """kreatoo-open-webui-ingressroute's shape, with --proxy traefik: the translation runs and
    streams (it used to be refused with "no HTTP router"), the findings' file the manifest."""
    path = write(tmp_path, "ingressroute.yaml", PLAIN_INGRESSROUTE)
    report = verify_config(path, proxy="traefik", checks=["streaming"], server=verify_server)
    assert [(c.name, c.passed) for c in report.checks] == [("streaming", True), ("loopback-only", True)], report.checks
    assert report.proxy == "traefik" and report.file.endswith("ingressroute.yaml") and "IngressRoute chat" in report.route


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(path.name for path in K8S.iterdir() if path.is_file()))
def test_the_exported_manifests_stream(verify_server, request, name):
    if name == "traefik.yaml":  # Traefik's CRDs run Go's proxy, the install's (conftest.HEADERS_LATE_S)
        request.getfixturevalue("headers_late")
    report = verify_config(K8S / name, quick=True, server=verify_server)
    assert report.ok, [(c.name, c.observed) for c in report.checks]
