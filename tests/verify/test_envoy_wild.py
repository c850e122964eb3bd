"""Envoy constructs common in published configs: each read (the route Envoy itself would choose for
verify's request, the timeouts in effect on it), rewritten and accepted by Envoy's own check
(`validate`) where the binary is installed."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from labs.findings import UnusableInput
from labs.verify import read_config
from labs.verify.model import Options, RouteWanted
from labs.verify.readers import READERS, suspicions
from labs.verify.run import rewrite_config
from tests.verify.test_static import write

LAB = 65000
HCM = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager"
ROUTER = "{name: envoy.filters.http.router, typed_config: {'@type': type.googleapis.com/envoy.extensions.filters.http.router.v3.Router}}"


def envoy(routes: str, clusters: str = "", hcm: str = "", filters: str = "",
          vhosts: str = "") -> str:
    """A bootstrap: one listener, the given routes in a `*` virtual host (or `vhosts`), cluster c."""
    vhosts = vhosts or f"""            - name: v
              domains: ["*"]
              routes:
{routes}"""
    clusters = clusters or """  - name: c
    type: STRICT_DNS
    load_assignment:
      cluster_name: c
      endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: m.svc, port_value: 8000}}}}]}]
  - name: other
    load_assignment:
      cluster_name: other
      endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 10.0.0.9, port_value: 80}}}}]}]
"""
    return f"""static_resources:
  listeners:
  - name: l
    address: {{socket_address: {{address: 0.0.0.0, port_value: 80}}}}
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": {HCM}
          stat_prefix: s
{hcm}
          route_config:
            virtual_hosts:
{vhosts}
          http_filters:
{filters}
          - {ROUTER}
  clusters:
{clusters}"""


def installed() -> None:
    from proxies.binaries import BinaryProblem, binary
    try:
        binary("envoy")
    except BinaryProblem as problem:
        pytest.skip(f"envoy is not installed here: {problem}")


def run_here(path: Path, folder: Path, wanted: RouteWanted = RouteWanted()):
    """Read, rewrite and let Envoy itself check the result (`envoy --mode validate`)."""
    from labs.verify.launch import validate
    reading = read_config(path, "envoy", wanted)
    rewritten = rewrite_config(reading, LAB, folder / "run")
    installed()
    validate(rewritten)
    return reading, rewritten, "".join(new for _, new, _ in rewritten.files.values())


def chosen_cluster(reading) -> str:
    return reading.route.rsplit("> cluster ", 1)[1].split(" ")[0]


# -- 1. route matching --------------------------------------------------------------------------

@pytest.mark.parametrize("headers, chosen", [
    ("[{name: content-type, string_match: {exact: application/grpc}}]", "c"),
    ("[{name: content-type, string_match: {prefix: application/json}}]", "other"),
    ("[{name: accept, string_match: {contains: event-stream}}]", "other"),
    ("[{name: accept, string_match: {suffix: EVENT-STREAM, ignore_case: true}}]", "other"),
    ("[{name: content-type, string_match: {safe_regex: {regex: 'application/.*json'}}}]", "other"),
    ("[{name: ':method', exact_match: GET}]", "c"),
    ("[{name: ':method', exact_match: POST}]", "other"),
    ("[{name: x-api-key, present_match: true}]", "c"),
    ("[{name: x-api-key, present_match: false}]", "other"),
    ("[{name: x-debug}]", "c"),                                   # no specifier: presence
    ("[{name: x-debug, invert_match: true}]", "other"),
    ("[{name: ':method', string_match: {exact: GET}, invert_match: true}]", "other"),
    ("[{name: x-api-key, string_match: {exact: k}, invert_match: true}]", "c"),  # missing: fails
    ("[{name: content-type, prefix_match: text/}]", "c"),
])
def test_header_matchers_are_evaluated_for_verifys_request(tmp_path, headers, chosen):
    # the first route goes to `other` when its matchers hold, else the second (to c) serves
    path = write(tmp_path, "envoy.yaml", envoy(f"""              - match: {{prefix: /v1/, headers: {headers}}}
                route: {{cluster: other}}
              - match: {{prefix: /}}
                route: {{cluster: c}}"""))
    reading, _, _ = run_here(path, tmp_path)
    assert chosen_cluster(reading) == chosen


def test_query_and_grpc_matchers_do_not_hold_and_unknown_ones_are_named(tmp_path):
    path = write(tmp_path, "envoy.yaml", envoy("""              - match: {prefix: /v1/, grpc: {}}
                route: {cluster: other}
              - match: {prefix: /v1/, query_parameters: [{name: stream, present_match: true}]}
                route: {cluster: other}
              - match: {prefix: /v1/, dynamic_metadata: [{filter: f, path: [{key: k}], value: {present_match: true}}]}
                route: {cluster: other}
              - match: {prefix: /v1/, headers: [{name: accept, string_match: {custom: {name: m}}}]}
                route: {cluster: other}
              - match: {prefix: /}
                route: {cluster: c}"""))
    reading = read_config(path, "envoy")
    assert chosen_cluster(reading) == "c"
    notes = " ".join(reading.notes)
    assert "dynamic_metadata" in notes and "custom" in notes and "header matcher accept" in notes


def test_case_insensitive_prefix_matches(tmp_path):
    path = write(tmp_path, "envoy.yaml", envoy("""              - match: {prefix: /V1/CHAT, case_sensitive: false}
                route: {cluster: other}
              - match: {prefix: /}
                route: {cluster: c}"""))
    reading, _, _ = run_here(path, tmp_path)
    assert chosen_cluster(reading) == "other"


VHOSTS = """            - name: any
              domains: ["*"]
              routes: [{match: {prefix: /}, route: {cluster: c}}]
            - name: prefix
              domains: ["api.*"]
              routes: [{match: {prefix: /}, route: {cluster: c}}]
            - name: suffix
              domains: ["*.example.com"]
              routes: [{match: {prefix: /}, route: {cluster: c}}]
            - name: longer
              domains: ["*.api.example.com"]
              routes: [{match: {prefix: /}, route: {cluster: c}}]
            - name: exact
              domains: ["api.example.com", "API.example.org"]
              routes: [{match: {prefix: /}, route: {cluster: other}}]"""


@pytest.mark.parametrize("host, vhost", [
    ("api.example.com", "exact"), ("api.example.org", "exact"), ("x.api.example.com", "longer"),
    ("chat.example.com", "suffix"), ("api.internal", "prefix"), ("elsewhere.net", "any")])
def test_the_virtual_host_is_chosen_by_host_as_envoy_does(tmp_path, host, vhost):
    path = write(tmp_path, "envoy.yaml", envoy("", vhosts=VHOSTS))
    reading, rewritten, _ = run_here(path, tmp_path, RouteWanted(host=host))
    assert f"virtual host {vhost} " in reading.route and reading.host == host == rewritten.host_header


def test_a_host_no_virtual_host_answers_is_unusable(tmp_path):
    path = write(tmp_path, "envoy.yaml", envoy("", vhosts=VHOSTS.split("            - name: prefix")[0]
                                               .replace('["*"]', '["only.example.com"]')))
    with pytest.raises(UnusableInput, match="for Host other.net"):
        read_config(path, "envoy", RouteWanted(host="other.net"))


# -- 2. timeouts in effect ----------------------------------------------------------------------

def _timeouts(tmp_path, route: str, hcm: str = ""):
    path = write(tmp_path, "envoy.yaml", envoy(f"""              - match: {{prefix: /}}
                route: {{cluster: c, timeout: 0s{route}}}""", hcm=hcm))
    reading, _, _ = run_here(path, tmp_path)
    return reading, {s.kind: s for s in suspicions(reading, Options(max_silence_s=20, max_stream_s=20))}


def test_a_route_idle_timeout_overrides_stream_idle_timeout(tmp_path):
    reading, found = _timeouts(tmp_path, ", idle_timeout: 600s", "          stream_idle_timeout: 5s")
    assert reading.get("idle timeout").value == 600 and "overrides stream_idle_timeout: 5s" in reading.get(
        "idle timeout").text
    assert "idle-timeout" not in found  # the 5 s of the connection manager does not apply here
    assert reading.get("stream_idle_timeout").value == 5 and reading.get("route idle_timeout").value == 600


def test_a_zero_route_idle_timeout_disables_it_and_a_short_one_is_judged(tmp_path):
    reading, found = _timeouts(tmp_path, ", idle_timeout: 0s", "          stream_idle_timeout: 5s")
    assert reading.get("idle timeout").value is None and "idle-timeout" not in found
    reading, found = _timeouts(tmp_path, ", idle_timeout: 3s", "          stream_idle_timeout: 600s")
    assert found["idle-timeout"].limit_s == 3 and found["idle-timeout"].where.endswith(":18")


def test_a_route_max_stream_duration_overrides_the_connection_managers(tmp_path):
    hcm = "          common_http_protocol_options: {max_stream_duration: 5s}"
    _, found = _timeouts(tmp_path, "", hcm)
    assert found["total-timeout"].limit_s == 5
    reading, found = _timeouts(tmp_path, ", max_stream_duration: {max_stream_duration: 0s}", hcm)
    assert "total-timeout" not in found and "overrides" in reading.get("stream duration").text
    reading, found = _timeouts(tmp_path, ", max_stream_duration: {grpc_timeout_header_max: 3s}", hcm)
    assert found["total-timeout"].limit_s == 5 and any("grpc-timeout" in n for n in reading.notes)


def test_request_timeout_bounds_only_the_request(tmp_path):
    reading, found = _timeouts(tmp_path, "", "          request_timeout: 2s")
    assert "total-timeout" not in found and "not the response" in reading.get("request_timeout").text


# -- 3. clusters of every type ------------------------------------------------------------------

ROUTE = """              - match: {prefix: /}
                route: {cluster: c}"""


@pytest.mark.parametrize("cluster, said", [
    ("  - {name: c, type: ORIGINAL_DST, lb_policy: CLUSTER_PROVIDED, connect_timeout: 1s}", "ORIGINAL_DST"),
    ("""  - name: c
    type: EDS
    eds_cluster_config: {eds_config: {ads: {}}}""", "xDS"),
    ("""  - name: c
    lb_policy: CLUSTER_PROVIDED
    cluster_type:
      name: envoy.clusters.dynamic_forward_proxy
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.clusters.dynamic_forward_proxy.v3.ClusterConfig
        dns_cache_config: {name: cache, dns_lookup_family: V4_ONLY}""", "dynamic_forward_proxy"),
    ("""  - name: c
    type: LOGICAL_DNS
    dns_lookup_family: V4_ONLY
    load_assignment:
      cluster_name: c
      endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: api.openai.com, port_value: 443}}}}]}]
    transport_socket:
      name: envoy.transport_sockets.tls
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext
        sni: api.openai.com""", "transport_socket dropped"),
    ("""  - name: c
    load_assignment:
      cluster_name: c
      endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 10.0.0.1, port_value: 8000}}}}]}]
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        explicit_http_config:
          http2_protocol_options: {max_concurrent_streams: 100}""", "HTTP/1.1"),
    ("""  - name: c
    load_assignment:
      cluster_name: c
      endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 10.0.0.1, port_value: 8000}}}}]}]
    typed_extension_protocol_options:
      envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
        "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
        auto_config:
          http2_protocol_options: {}
          http_protocol_options: {}""", "HTTP/1.1"),
])
def test_every_cluster_type_is_pointed_at_the_lab(tmp_path, cluster, said):
    dfp = ("          - name: envoy.filters.http.dynamic_forward_proxy\n            typed_config:\n"
           "              \"@type\": type.googleapis.com/envoy.extensions.filters.http.dynamic_forward_proxy.v3.FilterConfig\n"
           "              dns_cache_config: {name: cache, dns_lookup_family: V4_ONLY}")
    path = write(tmp_path, "envoy.yaml", envoy(ROUTE, cluster + "\n", filters=dfp if "forward" in said else ""))
    _, rewritten, text = run_here(path, tmp_path)
    assert f"port_value: {LAB}" in text and any(said in note for note in rewritten.notes), rewritten.notes
    assert "CLUSTER_PROVIDED" not in text and "eds_cluster_config" not in text and "http2" not in text
    if "forward" in said:
        assert "dns_cache_config" not in text and any("DNS cache" in n for n in rewritten.notes)


# -- 4. filters calling outside services --------------------------------------------------------

EXT_PROC = """          - name: envoy.filters.http.ext_proc
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor
              grpc_service: {envoy_grpc: {cluster_name: processor}}
              processing_mode: {request_body_mode: BUFFERED, response_body_mode: %s}
          - name: envoy.filters.http.ext_authz
            typed_config:
              "@type": type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthz
              transport_api_version: V3
              grpc_service: {google_grpc: {target_uri: "authz:9000", stat_prefix: a}}"""


@pytest.mark.parametrize("mode, buffered", [("BUFFERED", True), ("STREAMED", False), ("NONE", False)])
def test_ext_proc_and_ext_authz_are_left_out_and_still_judged(tmp_path, mode, buffered):
    path = write(tmp_path, "envoy.yaml", envoy(ROUTE, filters=EXT_PROC % mode))
    reading, rewritten, text = run_here(path, tmp_path)
    assert "ext_proc" not in text and "ext_authz" not in text
    notes = " ".join(rewritten.notes)
    assert "processor is not in the config" in notes and "google_grpc authz:9000" in notes
    assert "still judged statically" in notes
    kinds = {s.kind for s in suspicions(reading, Options())}
    assert ("buffering" in kinds) == buffered  # request_body_mode BUFFERED alone does not hold the stream


def test_the_published_user_config_still_rewrites(tmp_path):
    path = Path(__file__).resolve().parents[1] / "data" / "user-configs" / "envoy-user" / "envoy.yaml"
    reading, rewritten, text = run_here(path, tmp_path)
    assert chosen_cluster(reading) == "vllm" and reading.host == "chat.example.com"


# -- TLS listeners kept as TLS ------------------------------------------------------------------

TLS_FILES = """    - transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
          require_client_certificate: true
          common_tls_context:
            alpn_protocols: ["h2", "http/1.1"]
            tls_params: {tls_minimum_protocol_version: TLSv1_2}
            tls_certificates:
            - certificate_chain: { filename: /etc/envoy/certs/tls.crt }
              private_key: { filename: /etc/envoy/certs/tls.key }
            validation_context:
              trusted_ca: { filename: /etc/envoy/certs/clients-ca.pem }
      filters:
"""
TLS_SDS = """    - transport_socket:
        name: envoy.transport_sockets.tls
        typed_config:
          "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext
          common_tls_context:
            tls_certificate_sds_secret_configs: [{name: edge_cert}]
            validation_context_sds_secret_config: {name: clients_ca}
      filters:
"""
SECRETS = """  secrets:
  - name: edge_cert
    tls_certificate:
      certificate_chain: {filename: /etc/envoy/certs/tls.crt}
      private_key: {filename: /etc/envoy/certs/tls.key}
  - name: clients_ca
    validation_context: {trusted_ca: {filename: /etc/envoy/certs/ca.pem}}
"""


def _tls_listener(transport: str, top: str = "") -> str:
    text = envoy(ROUTE).replace("    filter_chains:\n    - filters:\n", "    filter_chains:\n" + transport)
    return text.replace("  clusters:\n", top + "  clusters:\n")


@pytest.mark.parametrize("transport, top, said", [
    (TLS_FILES, "", ("validation_context dropped", "require_client_certificate dropped", "instead of yours")),
    (TLS_SDS, SECRETS, ("tls_certificate_sds_secret_configs", "validation_context_sds_secret_config",
                        "static secrets dropped")),
])
def test_a_tls_listener_keeps_tls_with_the_run_s_certificate(tmp_path, transport, top, said):
    path = write(tmp_path, "envoy.yaml", _tls_listener(transport, top))
    _, rewritten, text = run_here(path, tmp_path)
    data = yaml.safe_load(text)
    context = data["static_resources"]["listeners"][0]["filter_chains"][0]["transport_socket"]["typed_config"]
    common = context["common_tls_context"]
    run = tmp_path / "run" / "tls"
    assert rewritten.tls and common["tls_certificates"] == [
        {"certificate_chain": {"filename": str(run / "cert.pem")}, "private_key": {"filename": str(run / "key.pem")}}]
    assert "validation_context" not in common and "validation_context_sds_secret_config" not in common
    assert "require_client_certificate" not in context and "secrets" not in data["static_resources"]
    assert "/etc/envoy" not in text and (transport is TLS_SDS or common["alpn_protocols"] == ["h2", "http/1.1"])
    for words in (*said, "TLS is kept"):
        assert any(words in n for n in rewritten.notes), words


def test_upstream_tls_stays_dropped_and_a_plain_listener_is_measured_over_http(tmp_path):
    cluster = """  - name: c
    load_assignment:
      cluster_name: c
      endpoints: [{lb_endpoints: [{endpoint: {address: {socket_address: {address: 10.0.0.1, port_value: 443}}}}]}]
    transport_socket:
      name: envoy.transport_sockets.tls
      typed_config:
        "@type": type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext
"""
    path = write(tmp_path, "envoy.yaml", envoy(ROUTE, clusters=cluster))
    _, rewritten, text = run_here(path, tmp_path)
    assert not rewritten.tls and "UpstreamTlsContext" not in text and not (tmp_path / "run" / "tls").exists()


ENVOY_FIXED = Path(__file__).resolve().parents[2] / "proxies" / "fixed" / "envoy.yaml"


def test_proxy_version_selects_envoys_table_and_says_the_measurement_stands():
    """Envoy's defaults that verify reads did not change from 1.26 to 1.40 (its changelogs):
    any of them is accepted, said, and judged like the binary here; older is refused in one line."""
    here = read_config(ENVOY_FIXED, "envoy")
    assert here.version and any("(the Envoy that runs it)" in note for note in here.notes), here.notes
    older = read_config(ENVOY_FIXED, "envoy", RouteWanted(version="1.30"))
    assert older.version == "1.30"
    assert any("Envoy 1.30's defaults (--proxy-version)" in n and "are the same" in n for n in older.notes), older.notes
    assert {k: s.value for k, s in older.settings.items()} == {k: s.value for k, s in here.settings.items()}
    with pytest.raises(UnusableInput, match="verify knows Envoy's defaults from 1.26 on"):
        read_config(ENVOY_FIXED, "envoy", RouteWanted(version="1.20"))

