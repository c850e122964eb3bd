"""HAProxy constructs common in published configs: each read, rewritten and accepted by `haproxy -c`
with its meaning kept (only addresses, files and TLS change), the right backend judged."""
from __future__ import annotations

import httpx
import pytest

from labs.findings import UnusableInput
from labs.verify import read_config, verify_config
from labs.verify.readers import suspicions
from labs.verify.launch import running, validate
from labs.verify.model import Options, RouteWanted, display_path
from labs.verify.plan import RunPlan
from labs.verify.run import rewrite_config
from tests.verify.test_static import write

LAB = 65000
TOP = "defaults\n    mode http\n    timeout client 30s\n    timeout server 30s\n    timeout connect 5s\n"


def run_here(path, folder, wanted: RouteWanted = RouteWanted()):
    """Read, rewrite and let haproxy itself check the result: every case must pass `haproxy -c`."""
    reading = read_config(path, "haproxy", wanted)
    rewritten = rewrite_config(reading, LAB, folder / "run")
    rewritten.write()
    validate(rewritten)
    return reading, rewritten, rewritten.files[str(path)][1]


def frontend(rules: str, extra: str = "", backends: str = "") -> str:
    return (f"{TOP}frontend fe\n    bind :80\n{rules}\n    default_backend web\n"
            f"backend web\n    server w 10.0.0.9:80\nbackend api\n    server a 10.0.0.1:8000\n{backends}{extra}")


@pytest.mark.parametrize("acl, backend", [
    ("path -m beg /v1/", "api"), ("path -m beg /v2/", "web"), ("path -m str /v1/chat/completions", "api"),
    ("path -m end /completions", "api"), ("path -m sub /chat/", "api"), ("path -m reg ^/v[0-9]+/chat", "api"),
    ("path -m dir chat", "api"), ("path -m dir cha", "web"), ("path -m len 20", "api"), ("path -m len 5", "web"),
    ("path -m found", "api"), ("path_beg -i /V1/", "api"), ("path_beg /V1/", "web"),
    ("path -m beg -- /v1/", "api"), ("path_beg -m sub chat", "api"),
])
def test_acl_match_methods_are_haproxys(tmp_path, acl, backend):
    path = write(tmp_path, "haproxy.cfg", frontend(f"    acl x {acl}\n    use_backend api if x"))
    reading, _, _ = run_here(path, tmp_path, RouteWanted(path="/v1/chat/completions"))
    assert f"backend {backend}" in reading.route


def test_an_acl_pattern_file_is_read_beside_the_config_or_said_unknown(tmp_path):
    write(tmp_path, "api_paths.lst", "# the API\n/v2/\n/v1/\n")
    path = write(tmp_path, "haproxy.cfg", frontend("    acl x path_beg -f /etc/haproxy/api_paths.lst\n"
                                                   "    use_backend api if x"))
    reading, rewritten, text = run_here(path, tmp_path)
    assert "backend api" in reading.route and "/etc/haproxy/api_paths.lst" not in text
    missing = write(tmp_path, "b/haproxy.cfg", frontend("    acl x path_beg -f /etc/haproxy/nothere.lst\n"
                                                        "    use_backend api if x"))
    reading, rewritten, _ = run_here(missing, tmp_path / "b")
    assert "backend api" in reading.route and any("nothere.lst" in n and "taken as true" in n for n in reading.notes)
    assert any("nothere.lst" in n for n in rewritten.notes)


def test_a_map_chooses_the_backend_or_its_default_is_judged(tmp_path):
    rule = "    use_backend %[path,map_beg(/etc/haproxy/paths.map,web)]"
    write(tmp_path, "paths.map", "/static/ web\n/v1/ api\n")
    path = write(tmp_path, "haproxy.cfg", frontend(rule))
    reading, _, text = run_here(path, tmp_path)
    assert "backend api" in reading.route and "/etc/haproxy/paths.map" not in text
    assert "backend chosen: use_backend %[path,map_beg(/etc/haproxy/paths.map,web)] gives api for " \
        "/v1/chat/completions" in reading.notes
    missing = write(tmp_path, "b/haproxy.cfg", frontend(rule.replace(",web)", ")")))
    reading, _, _ = run_here(missing, tmp_path / "b")
    assert "backend web" in reading.route
    assert any(n.startswith("backend chosen: no value from use_backend") and "the default_backend web is judged" in n
               for n in reading.notes), reading.notes
    assert any("paths.map" in n and "not beside the config" in n for n in reading.notes)


def test_a_host_acl_is_compared_with_the_host_asked_for(tmp_path):
    rules = ("    acl chat hdr(host) -i chat.example.com\n    acl corp hdr_dom(host) -i corp.example\n"
             "    use_backend api if chat\n    use_backend other if corp")
    path = write(tmp_path, "haproxy.cfg", frontend(rules, backends="backend other\n    server o 10.0.0.3:80\n"))
    assert "backend api" in run_here(path, tmp_path, RouteWanted(host="CHAT.example.com"))[0].route
    assert "backend other" in read_config(path, "haproxy", RouteWanted(host="llm.corp.example")).route
    assert "backend web" in read_config(path, "haproxy", RouteWanted(host="other.org")).route
    unasked = read_config(path, "haproxy")  # no --host: the Host the first ACL names is sent
    assert "backend api" in unasked.route and unasked.host == "chat.example.com"


def test_a_header_acl_picks_the_backend_by_what_header_sends(tmp_path):
    """`hdr()`/`req.hdr()` ACLs read the request verify measures: its own headers (it asks for
    text/event-stream) and --header's; a header it lacks does not match, and the note says how to
    send it. The values (credentials) are never in the reading."""
    rules = ("    acl team_a req.hdr(x-team) -m str a\n    acl keyed hdr(authorization) -m found\n"
             "    acl streaming hdr_sub(accept) text/event-stream\n"
             "    use_backend api if team_a\n    use_backend other if keyed\n    use_backend sse if streaming")
    path = write(tmp_path, "haproxy.cfg", frontend(rules, backends="backend other\n    server o 10.0.0.3:80\n"
                                                               "backend sse\n    server s 10.0.0.4:80\n"))
    unasked = read_config(path, "haproxy")
    assert "backend sse" in unasked.route
    assert any("ACL team_a" in n and "no such header" in n and "--header" in n for n in unasked.notes), unasked.notes
    team = run_here(path, tmp_path, RouteWanted(headers=(("X-Team", "a"),)))[0]
    assert "backend api" in team.route and "--header X-Team" in team.why
    keyed = read_config(path, "haproxy", RouteWanted(headers=(("Authorization", "Bearer s3cret"),)))
    assert "backend other" in keyed.route and "s3cret" not in repr(keyed) + " ".join(keyed.notes)
    assert "backend sse" in read_config(path, "haproxy", RouteWanted(headers=(("X-Team", "b"),))).route


def test_no_route_for_the_api_is_the_pipelines_one_error(tmp_path):
    """The error names what is proxied and how to choose (labs/verify/route.py, the same for every
    proxy); --path then picks the route."""
    path = write(tmp_path, "haproxy.cfg", f"{TOP}frontend fe\n    bind :80\n    use_backend api if "
                 "{ path_beg /admin/ }\nbackend api\n    server a 10.0.0.1:8000\n")
    with pytest.raises(UnusableInput) as caught:
        read_config(path, "haproxy")
    shown = display_path(path)
    assert str(caught.value) == (
        f"{shown}: no route proxies POST /v1/chat/completions or /api/chat/completions or "
        "/api/v1/chat/completions or /openai/v1/chat/completions or /openai/chat/completions or "
        "/chat/completions; the proxied routes are: frontend fe > use_backend api if { path_beg /admin/ } "
        f"({shown}:8) (choose one with --path, --host or --header)")
    assert "backend api" in read_config(path, "haproxy", RouteWanted(path="/admin/chat")).route
    bare = write(tmp_path, "bare.cfg", f"{TOP}frontend fe\n    bind :80\nbackend api\n    server a 10.0.0.1:8000\n")
    with pytest.raises(UnusableInput, match="nothing is proxied: no frontend or listen section has a use_backend"):
        read_config(bare, "haproxy")


@pytest.mark.parametrize("line, where", [
    ("global\n    maxconn lots\n", 2), ("global\n    maxconn\n", 2),
    (f"{TOP}frontend fe\n    bind :80\n    maxconn 1k\n    default_backend b\nbackend b\n    server s 1.1.1.1:80\n", 8),
    (f"{TOP}frontend fe\n    bind :80\n    default_backend b\nbackend b\n    server s 1.1.1.1:80 maxconn x\n", 10),
    (f"{TOP}frontend fe\n    bind :80\n    default_backend b\nbackend b\n    server s 1.1.1.1:80 maxconn\n", 10),
    (f"{TOP}    timeout http-request soon\nfrontend fe\n    bind :80\n    default_backend b\n"
     "backend b\n    server s 1.1.1.1:80\n", 6),
    (f"{TOP}frontend fe\n    bind :80\n    use_backend\n    default_backend b\nbackend b\n    server s 1.1.1.1:80\n", 8),
    (f"{TOP}frontend fe\n    bind :80\n    acl x\n    default_backend b\nbackend b\n    server s 1.1.1.1:80\n", 8),
])
def test_odd_numbers_and_words_are_unusable_input_at_their_line(tmp_path, line, where):
    text = line if line.startswith(TOP) else line + frontend("")
    path = write(tmp_path, "haproxy.cfg", text)
    with pytest.raises(UnusableInput) as caught:
        read_config(path, "haproxy")
    assert caught.value.file.endswith("haproxy.cfg") and caught.value.line == where


def test_peers_and_resolvers_commented_out_leave_no_reference(tmp_path):
    path = write(tmp_path, "haproxy.cfg", f"""peers mypeers
    peer lb1 10.0.0.11:10000
    peer lb2 10.0.0.12:10000
resolvers dns
    nameserver ns1 10.96.0.10:53
{TOP}    default-server init-addr last,libc,none resolvers dns resolve-prefer ipv4 inter 3s maxconn 50
frontend fe
    bind :80
    default_backend api
backend api
    stick-table type ip size 1m expire 10m peers mypeers
    stick on src
    http-request do-resolve(txn.ip,dns,ipv4) hdr(host)
    server-template vllm 3 vllm.inference.svc:8000 check resolvers dns init-addr none maxconn 20
    server extra backend.svc:8000 resolvers dns
""")
    reading, rewritten, text = run_here(path, tmp_path)
    assert "stick-table type ip size 1m expire 10m\n" in text
    assert f"server-template vllm 3 127.0.0.1:{LAB} maxconn 20" in text
    live = "\n".join(line.split("#", 1)[0] for line in text.splitlines() if "verify-stats.sock" not in line)
    assert "resolvers" not in live and "init-addr" not in live and "peers" not in live and ".svc" not in live
    assert "default-server maxconn 50" in live
    assert reading.get("server maxconn").value == 60  # 3 templated servers of 20


def test_tls_is_kept_with_a_certificate_made_for_the_run_and_the_https_redirect_too(tmp_path):
    path = write(tmp_path, "haproxy.cfg", f"""global
    ca-base /etc/ssl/certs
    crt-base /etc/ssl/private
    ssl-default-bind-ciphersuites TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384
    ssl-default-bind-options ssl-min-ver TLSv1.2 no-tls-tickets
    ssl-dh-param-file /etc/haproxy/dhparams.pem
{TOP}frontend fe
    bind :80
    bind :443 ssl crt site.pem crt-list /etc/haproxy/crt-list.txt ca-file clients.pem crl-file revoked.pem verify optional alpn h2,http/1.1 ssl-min-ver TLSv1.2
    http-request redirect scheme https unless {{ ssl_fc }}
    http-request set-header X-Forwarded-Proto https if {{ ssl_fc }}
    default_backend api
backend api
    server a 10.0.0.1:8000
""")
    _, rewritten, text = run_here(path, tmp_path)
    bundle = tmp_path / "run" / "tls" / "bundle.pem"
    assert rewritten.tls and f"bind 127.0.0.1:{rewritten.listen_port} ssl crt {bundle} alpn h2,http/1.1 " \
        "ssl-min-ver TLSv1.2\n" in text
    assert "BEGIN CERTIFICATE" in bundle.read_text() and "PRIVATE KEY" in bundle.read_text()
    live = "\n".join(line.split("#", 1)[0] for line in text.splitlines())
    assert "\n    http-request redirect scheme https unless { ssl_fc }\n" in live
    assert "\n    http-request set-header X-Forwarded-Proto https if { ssl_fc }\n" in live
    assert "ssl-default-bind-ciphersuites TLS_AES_128" in live and "ssl-default-bind-options ssl-min-ver" in live
    for gone in ("crt-list", "ca-file", "crl-file", "verify optional", "site.pem", "ca-base", "crt-base",
                 "dhparams"):
        assert gone not in live, gone
    for said in ("crt-list", "ca-file", "crl-file", "verify optional", "TLS is kept"):
        assert any(said in n for n in rewritten.notes), said


def test_the_runs_certificate_is_made_only_when_the_rewrite_is_written(tmp_path):
    """The rewrite names the run's certificate in memory; `write()`, after the loopback check,
    makes it."""
    path = write(tmp_path, "haproxy.cfg", frontend("").replace("bind :80", "bind :443 ssl crt /etc/site.pem"))
    parsed = read_config(path, "haproxy").parsed
    rewritten = parsed.reader.rewrite(parsed.config, parsed.chosen, RunPlan(LAB, tmp_path / "run"))
    assert rewritten.tls and not (tmp_path / "run").exists()
    rewritten.write()
    bundle = (tmp_path / "run" / "tls" / "bundle.pem").read_text()
    assert "BEGIN CERTIFICATE" in bundle and "PRIVATE KEY" in bundle


def test_a_frontend_with_only_a_plain_bind_is_measured_over_plain_http(tmp_path):
    path = write(tmp_path, "haproxy.cfg", frontend("") + "frontend tls\n    bind :443 ssl crt /x.pem\n"
                 "    default_backend web\n")
    _, rewritten, text = run_here(path, tmp_path)
    assert not rewritten.tls and f"bind 127.0.0.1:{rewritten.listen_port}\n" in text and " ssl crt " in text


MODELS = '{"object": "list", "data": [{"id": "llama", "object": "model"}]}\n'
RETURNS = ("    http-request return status 200 content-type application/json "
           "file /usr/local/etc/haproxy/models.json if { path /v1/models }\n"
           "    http-request return status 503 errorfile /etc/haproxy/down.http if { path /down }\n"
           "    errorfile 504 /etc/haproxy/down.http\n    use_backend api if { path_beg /v1/ }")


def test_a_return_rules_file_is_read_beside_the_config_as_includes_are(tmp_path):
    """`http-request return ... file /usr/local/etc/haproxy/models.json` (the models list served by
    HAProxy itself) with the file beside the config: copied into the run, and HAProxy answers it."""
    write(tmp_path, "models.json", MODELS)
    write(tmp_path, "down.http", "HTTP/1.0 503 Service Unavailable\r\ncontent-length: 4\r\n\r\ndown")
    path = write(tmp_path, "haproxy.cfg", frontend(RETURNS))
    reading, rewritten, text = run_here(path, tmp_path)
    assert "backend api" in reading.route and "/etc/haproxy/" not in text
    assert "errorfile 504 " in text and not any("not beside the config" in n for n in rewritten.notes)
    with running(rewritten):
        url = f"http://127.0.0.1:{rewritten.listen_port}"
        models, down = httpx.get(url + "/v1/models", timeout=5), httpx.get(url + "/down", timeout=5)
    assert models.status_code == 200 and models.text == MODELS
    assert down.status_code == 503 and down.text == "down"


def test_a_return_rules_file_not_beside_the_config_is_a_stand_in_that_says_so(tmp_path):
    path = write(tmp_path, "haproxy.cfg", frontend(RETURNS))
    reading, rewritten, text = run_here(path, tmp_path)
    live = "\n".join(line for line in text.splitlines() if not line.strip().startswith("#"))
    assert "backend api" in reading.route and "/etc/haproxy/" not in live and "errorfile 504" not in live
    assert any("models.json is not beside the config" in n and "empty reply" in n for n in rewritten.notes)


RATE_TABLE = "    stick-table type ip size 50k expire 60s store http_req_rate(60s),conn_cur\n"
CHAT = "    use_backend api if { path_beg /v1/ }"


@pytest.mark.parametrize("frontend_rules, api_rules, limit", [
    # rag-system-haproxy's backend (tests/data/wild): 30 requests a minute per address, then 429
    ("", RATE_TABLE + "    http-request track-sc1 src\n"
     "    http-request deny deny_status 429 if { sc_http_req_rate(1) gt 30 }\n",
     "30 requests per 60s from one client address, then HTTP 429"),
    ("    stick-table type ip size 1m store conn_cur\n    tcp-request content track-sc0 src\n"
     "    acl busy sc0_conn_cur ge 20\n    tcp-request content reject if busy\n", "",
     "19 connections open at once from one client address, then a closed connection"),
    ("", RATE_TABLE + "    http-request track-sc2 src\n    http-request tarpit unless { sc_http_req_rate(2) lt 10 }\n",
     "9 requests per 60s from one client address, then HTTP 500"),
    ("    http-request return status 503 if { fe_conn gt 50 }\n", "",
     "50 connections open at once on the frontend, then HTTP 503"),
    ("", RATE_TABLE + "    http-request deny status 429 if { src_http_req_rate gt 5 }\n",
     "5 requests per 60s from one client address, then HTTP 429"),
    # what counts nothing here: a counter no rule tracks, one the table does not store, a rule
    # that does not apply to the chat route, a rule that does not refuse
    ("", RATE_TABLE + "    http-request deny deny_status 429 if { sc_http_req_rate(1) gt 30 }\n", None),
    ("", RATE_TABLE + "    http-request track-sc1 src\n    http-request deny if { sc_http_err_rate(1) gt 3 }\n"
     "    http-request deny if { sc_sess_rate(1) gt 3 }\n", None),
    ("", RATE_TABLE + "    http-request track-sc1 src\n"
     "    http-request deny if { path_beg /admin } { sc_http_req_rate(1) gt 3 }\n", None),
    ("", RATE_TABLE + "    http-request track-sc1 src\n"
     "    http-request set-header X-Busy 1 if { sc_http_req_rate(1) gt 3 }\n", None),
])
def test_a_rule_that_refuses_past_a_counter_is_read_with_its_limit(tmp_path, frontend_rules, api_rules, limit):
    """A stick-table rate limit or a connection count that refuses (deny, tarpit, return, reject) is
    read with the limit and what it counts; `haproxy -c` accepts every case."""
    path = write(tmp_path, "haproxy.cfg", frontend(frontend_rules + CHAT, extra=api_rules))
    reading, _, _ = run_here(path, tmp_path)
    assert "backend api" in reading.route
    counter = reading.get("counter limit")
    if limit is None:
        assert counter.value is None and counter.where == "default", counter
        return
    assert counter.text.endswith(f"({limit})"), counter.text
    assert counter.where.endswith(f"haproxy.cfg:{refusing_line(path)}"), counter.where


def refusing_line(path) -> int:
    return next(n for n, text in enumerate(path.read_text().splitlines(), 1)
                if any(f" {action} " in text for action in ("deny", "reject", "tarpit", "return")))


@pytest.mark.parametrize("allowed, suspected", [(30, True), (99, True), (100, False), (500, False)])
def test_a_counter_limit_is_suspected_only_below_the_concurrent_streams(tmp_path, allowed, suspected):
    rules = RATE_TABLE + ("    http-request track-sc1 src\n"
                          f"    http-request deny deny_status 429 if {{ sc_http_req_rate(1) gt {allowed} }}\n")
    path = write(tmp_path, "haproxy.cfg", frontend(CHAT, extra=rules))
    found = [s for s in suspicions(read_config(path, "haproxy"), Options(streams=100))
             if s.kind == "connection-limit"]
    assert bool(found) == suspected, found
    assert all(s.where.endswith(f":{refusing_line(path)}") and "concurrent-streams" in s.checks
               and f"gt {allowed}" in s.evidence for s in found)


@pytest.mark.slow
@pytest.mark.parametrize("allowed", [4, 40])
def test_quick_mode_measures_a_rate_limit_it_suspects_and_leaves_one_above_the_streams(verify_server, tmp_path,
                                                                                        allowed):
    """12 streams against a limit of 4 requests a minute: quick mode runs concurrent-streams for it and
    the refusals (429) are the failure, at the rule's line; against 40 nothing is suspected, quick mode
    does not run the check, and run on its own it passes (the 12 streams did go through the rule)."""
    rules = RATE_TABLE + ("    http-request track-sc1 src\n    http-request deny deny_status 429 if "
                          f"{{ sc_http_req_rate(1) gt {allowed} }}\n")
    path = write(tmp_path, "haproxy.cfg", "defaults\n    mode http\n    timeout client 1h\n    timeout server 1h\n"
                 "    timeout connect 5s\n    option http-no-delay\n    option abortonclose\nfrontend fe\n"
                 f"    bind :80\n{CHAT}\nbackend api\n    server a 10.0.0.1:8000\n{rules}")
    quick = verify_config(path, quick=True, streams=12, server=verify_server)
    ran = {c.name: c for c in quick.checks}
    if allowed < 12:
        limited = [f for f in quick.failures() if f.kind == "connection-limit"]
        assert limited and limited[0].where.endswith(f"haproxy.cfg:{refusing_line(path)}"), quick.checks
        assert "HTTP 429" in ran["concurrent-streams"].observed, ran["concurrent-streams"].observed
    else:
        assert "concurrent-streams" not in ran and quick.ok, quick.checks
        alone = verify_config(path, checks=["concurrent-streams"], streams=12, server=verify_server)
        assert alone.ok and "12 streams complete" in alone.checks[0].observed, alone.checks
