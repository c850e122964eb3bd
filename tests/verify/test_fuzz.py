"""verify's static reading and rewrite never raise on configs built from the directives that
published configs use (tests/data/wild/): a config they cannot use is UnusableInput (exit 2 with
one line), anything else would be verify's own error."""
from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from labs.findings import UnusableInput
from labs.verify import read_config
from labs.verify.readers import suspicions
from labs.verify.model import Options
from labs.verify.rewrite import NotLoopback
from labs.verify.run import rewrite_config

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Values as the corpus writes them: addresses of every form, variables, odd numbers.
ADDRESS = st.sampled_from(["http://10.0.0.1:8000", "http://backend", "https://backend/v1/", "$u", "$scheme://backend",
                           "http://$host_var:8000", "http://unix:/run/vllm.sock", "http://unix:/run/x.sock:/v1/",
                           "http://[::1]:9000", "http://vllm.svc.cluster.local:8000/", "grpc://backend"])
TIME = st.sampled_from(["60s", "5", "1m30s", "300ms", "1h", "0", "10x", ""])
LOCATION = st.sampled_from(["/", "/v1/", "/api/", "= /v1/chat/completions", "^~ /v1/", "~ ^/(?<ver>v\\d+)/chat",
                            "~* \\.(js|css)$", "@fallback", "/openai/"])
LOCATION_DIRECTIVES = st.lists(st.one_of(
    ADDRESS.map(lambda a: f"proxy_pass {a};"),
    TIME.map(lambda t: f"proxy_read_timeout {t};"),
    st.sampled_from(["proxy_buffering off;", "proxy_buffering on;", "proxy_http_version 1.1;",
                     'proxy_set_header Connection "";', "proxy_set_header Host $host;", "gzip on;",
                     "gzip_types text/event-stream;", "proxy_cache off;", "proxy_ignore_client_abort on;",
                     "chunked_transfer_encoding off;", "try_files $uri @fallback;", "return 301 https://$host;",
                     "if ($scheme = http) { return 301 https://$host$request_uri; }", "limit_conn addr 10;",
                     "proxy_ssl_server_name on;", "include /etc/nginx/proxy_params;", "add_header X-A b;"]),
), max_size=5)
SERVER_DIRECTIVES = st.lists(st.sampled_from([
    "listen 80;", "listen 443 ssl http2;", "listen [::]:80;", "listen 80; listen [::]:80;", "listen 8080 default_server;",
    "server_name chat.example.com;", "server_name _;", "server_name *.example.com ~^llm\\d+$;",
    "ssl_certificate /etc/ssl/x.pem;", "include /etc/letsencrypt/options-ssl-nginx.conf;",
    "access_log /var/log/nginx/a.log main;", "access_log off;", "client_max_body_size 0;", "resolver 8.8.8.8;",
]), max_size=4)
HTTP_DIRECTIVES = st.lists(st.sampled_from([
    "upstream backend { server 10.0.0.2:8000; server b.internal:8000 max_fails=2; }",
    "upstream backend { server unix:/run/x.sock; keepalive 16; }", "map $http_upgrade $c { default close; }",
    "proxy_buffering off;", "gzip on;", "log_format main '$remote_addr';", "set $u http://vllm:8000;",
    "include /etc/nginx/conf.d/*.conf;", "limit_conn_zone $binary_remote_addr zone=addr:10m;",
]), max_size=3)


@st.composite
def nginx_configs(draw, site: bool) -> str:
    locations = "".join(f"    location {draw(LOCATION)} {{ {' '.join(draw(LOCATION_DIRECTIVES))} }}\n"
                        for _ in range(draw(st.integers(1, 3))))
    servers = "".join(f"  server {{\n    {' '.join(draw(SERVER_DIRECTIVES))}\n{locations}  }}\n"
                      for _ in range(draw(st.integers(1, 2))))
    http = "\n  ".join(draw(HTTP_DIRECTIVES))
    body = f"  {http}\n{servers}"
    if site:
        return body.replace("set $u http://vllm:8000;", "")
    workers = draw(st.sampled_from(["", "worker_processes auto;", "worker_processes 2;", "user www-data;"]))
    return f"{workers}\nevents {{ worker_connections {draw(st.sampled_from(['1024', '64']))}; }}\nhttp {{\n{body}}}\n"


def never_raises(text: str, name: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / name
        path.write_text(text)
        try:
            reading = read_config(path, "nginx")
            suspicions(reading, Options())
            rewrite_config(reading, 65000, Path(folder) / "run")
        except (UnusableInput, NotLoopback):
            pass  # a config verify cannot use, said in one line (exit status 2)


@pytest.mark.slow
@FUZZ
@given(nginx_configs(site=False))
def test_a_whole_nginx_config_never_makes_verify_raise(text):
    never_raises(text, "nginx.conf")


@pytest.mark.slow
@FUZZ
@given(nginx_configs(site=True))
def test_a_site_file_never_makes_verify_raise(text):
    never_raises(text, "app.conf")


HAPROXY_LINES = st.lists(st.sampled_from([
    "    maxconn 4096", "    maxconn lots", "    timeout server 30s", "    timeout server 1h", "    timeout server x",
    "    timeout tunnel 1h", "    option http-no-delay", "    no option http-no-delay", "    option abortonclose",
    "    compression algo gzip", "    compression type text/event-stream", "    http-request redirect scheme https unless { ssl_fc }",
    "    acl api path -m beg /v1/", "    acl api path_beg -i /api/", "    acl h hdr(host) -i chat.example.com",
    "    acl f path -f /etc/haproxy/paths.lst", "    use_backend llm if api", "    use_backend %[path,map_beg(/etc/haproxy/b.map,llm)]",
    "    use_backend llm if { path_beg /v1/ } h", "    default_backend llm", "    bind :443 ssl crt /etc/ssl/x.pem alpn h2,http/1.1",
    "    bind :80", "    bind 10.0.0.1:8080", "    stick-table type ip size 1m peers mypeers",
    "    stick-table type ip size 1m store http_req_rate(10s),conn_cur", "    http-request track-sc0 src table llm",
    "    http-request deny deny_status 429 if { sc_http_req_rate(0) gt 30 }", "    acl busy src_conn_cur ge",
    "    tcp-request content reject if busy", "    http-request tarpit unless { sc0_conn_cur(llm) lt x }",
    "    http-request return status 503 if { fe_conn gt 50 } api", "    http-request deny if { sc_conn_cur() gt 1 }",
]), min_size=1, max_size=8)
BACKEND_LINES = st.lists(st.sampled_from([
    "    server a 10.0.0.2:8000 check", "    server b vllm.svc:8000 resolvers dns init-addr none maxconn 20",
    "    server-template vllm 3 vllm.svc:8000 check resolvers dns", "    server c 10.0.0.3:8000 maxconn x",
    "    default-server inter 2s fall 3", "    timeout server 5s", "    option httpchk GET /health",
    "    stick-table type ip size 50k store http_req_rate(60s)", "    http-request track-sc1 src",
    "    http-request deny deny_status 429 if { sc_http_req_rate(1) gt 3 } || !{ src_http_req_rate le 2 }",
]), min_size=1, max_size=4)


@st.composite
def haproxy_configs(draw) -> str:
    return ("global\n    log stdout format raw local0\n" + "\n".join(draw(st.lists(st.sampled_from(
        ["    maxconn 2000", "    maxconn many", "    user haproxy", "    daemon", "    stats socket /run/haproxy.sock"]),
        max_size=3))) + "\ndefaults\n    mode http\n    timeout client 30s\n    timeout connect 5s\n"
        "frontend fe\n" + "\n".join(draw(HAPROXY_LINES)) + "\nbackend llm\n" + "\n".join(draw(BACKEND_LINES))
        + "\nresolvers dns\n    nameserver n 10.0.0.53:53\npeers mypeers\n    peer p1 10.0.0.9:10000\n")


def proxy_never_raises(text: str, name: str, proxy: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / name
        path.write_text(text)
        try:
            reading = read_config(path, proxy)
            suspicions(reading, Options())
            rewrite_config(reading, 65000, Path(folder) / "run")
        except (UnusableInput, NotLoopback):
            pass


@pytest.mark.slow
@FUZZ
@given(haproxy_configs())
def test_an_haproxy_config_never_makes_verify_raise(text):
    proxy_never_raises(text, "haproxy.cfg", "haproxy")


ENVOY = (Path(__file__).resolve().parents[2] / "proxies" / "fixed" / "envoy.yaml").read_text()
ENVOY_EDITS = st.lists(st.tuples(
    st.sampled_from(["timeout: 0s", "type: STRICT_DNS", "port_value: 8000", "prefix: \"/\"", "stream_idle_timeout:"]),
    st.sampled_from(["timeout: abc", "type: ORIGINAL_DST", "port_value: http", "path: \"/v1/chat/completions\"",
                     "safe_regex: {regex: \"(?<v>v1)\"}", "stream_idle_timeout: -5s\n        idle_timeout:",
                     "type: EDS", "prefix: 42", ""])), max_size=3)


@pytest.mark.slow
@FUZZ
@given(ENVOY_EDITS)
def test_an_edited_envoy_config_never_makes_verify_raise(edits):
    text = ENVOY
    for old, new in edits:
        text = text.replace(old, new, 1)
    proxy_never_raises(text, "envoy.yaml", "envoy")


TRAEFIK_RULE = st.sampled_from(["PathPrefix(`/v1`)", "Host(`a.example`) && PathPrefix(`/`)", "Path(`/v1/chat/completions`)",
                                "PathPrefix(`/v1`", "Host(`a`) || !Method(`GET`)", "HostRegexp(`^(.+)$`)",
                                "Query(`x`, `y`) && Header(`X-Key`, `v`)", "Bogus(`x`)", "", "PathRegexp(`(`)"])
TRAEFIK_MIDDLEWARE = st.sampled_from([
    "buffering: {maxRequestBodyBytes: 10}", "compress: {}", "compress: {encodings: [zstd]}",
    "inFlightReq: {amount: 5}", "inFlightReq: {amount: lots}", "retry: {attempts: 3}",
    "forwardAuth: {address: 'http://auth:9000'}", "chain: {middlewares: [m0, m1]}", "plugin: {x: {}}", "stripPrefix: {}"])
TRAEFIK_TIMEOUT = st.sampled_from(["60s", "0", "1m30s", "soon", "-1", "250ms", "5"])


@st.composite
def traefik_configs(draw) -> str:
    middlewares = [draw(TRAEFIK_MIDDLEWARE) for _ in range(draw(st.integers(0, 3)))]
    names = [f"m{i}" for i in range(len(middlewares))] + draw(st.lists(st.sampled_from(["missing", "m0@docker"]), max_size=1))
    static = draw(st.sampled_from([
        "", "entryPoints:\n  web: {{address: ':80', transport: {{respondingTimeouts: {{writeTimeout: {t}}}}}}}\n",
        "entryPoints:\n  web: {{address: ':80'}}\n  websecure: {{address: ':443', http: {{tls: {{}}, redirections: {{}}}}}}\n"
        "providers:\n  file: {{filename: traefik.yml}}\n"])).format(t=draw(TRAEFIK_TIMEOUT))
    routers = "".join(f"    r{i}:\n      rule: {draw(TRAEFIK_RULE)!r}\n      service: s\n"
                      f"      middlewares: [{', '.join(names)}]\n" for i in range(draw(st.integers(1, 3))))
    mws = "".join(f"    m{i}: {{{m}}}\n" for i, m in enumerate(middlewares))
    flush = draw(TRAEFIK_TIMEOUT)
    return (f"{static}http:\n  routers:\n{routers}" + (f"  middlewares:\n{mws}" if mws else "")
            + f"  services:\n    s:\n      loadBalancer:\n        servers: [{{url: 'http://10.0.0.1:8000'}}]\n"
              f"        responseForwarding: {{flushInterval: {flush}}}\n")


@pytest.mark.slow
@FUZZ
@given(traefik_configs())
def test_a_traefik_config_never_makes_verify_raise(text):
    proxy_never_raises(text, "traefik.yml", "traefik")


MANIFEST = st.sampled_from([
    "apiVersion: networking.k8s.io/v1\nkind: Ingress\nmetadata:\n  name: x\n  annotations:\n"
    "    nginx.ingress.kubernetes.io/proxy-read-timeout: '{t}'\n    nginx.ingress.kubernetes.io/proxy-buffering: '{b}'\n"
    "spec:\n  rules:\n    - host: {h}\n      http: {{paths: [{{path: {p}, pathType: Prefix, backend: {{service: {{name: a, port: {{number: 8000}}}}}}}}]}}\n",
    "apiVersion: gateway.networking.k8s.io/v1\nkind: HTTPRoute\nmetadata: {{name: r}}\nspec:\n  hostnames: [{h}]\n  rules:\n"
    "    - matches: [{{path: {{type: PathPrefix, value: {p}}}}}]\n      timeouts: {{request: {t}}}\n"
    "      backendRefs: [{{name: a, port: 8000}}]\n",
    "apiVersion: traefik.io/v1alpha1\nkind: IngressRoute\nmetadata: {{name: i}}\nspec:\n  routes:\n"
    "    - match: PathPrefix(`{p}`)\n      services: [{{name: a, port: 8000}}]\n",
])


@pytest.mark.slow
@FUZZ
@given(MANIFEST, TRAEFIK_TIMEOUT, st.sampled_from(["on", "off", "maybe"]), st.sampled_from(["a.example", "'*.example'", "''"]),
       st.sampled_from(["/", "/v1", "/ui", "''"]))
def test_a_manifest_never_makes_verify_raise(template, timeout, buffering, host, path):
    text = template.format(t=timeout, b=buffering, h=host, p=path)
    with tempfile.TemporaryDirectory() as folder:
        manifest = Path(folder) / "k8s.yaml"
        manifest.write_text(text)
        try:
            reading = read_config(manifest)
            suspicions(reading, Options())
        except (UnusableInput, NotLoopback):
            pass
