"""`labs verify FILE --mcp`: a config's MCP route run here in front of replicas of the lab's MCP
origin (mcp 1.30, stateful, one per pool server) and measured with the probe's MCP checks: each
fault in both directions, at the config's line (tests/data/verify-mcp/README.md lists the configs).
Every run starts a proxy and its replicas, so each asks only for the checks it judges."""
from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from labs.findings import CheckOutcome, Finding
from labs.findings.coalescing import COALESCED_EVENTS_PER_READ
from labs.probe.base import Observation
from labs.verify import cli, output, read_config
from labs.verify.mcp import judge
from labs.verify.mcp.hint import mcp_hint
from labs.verify.mcp.pool import pool_of
from labs.verify.model import RouteWanted, display_path
from server.mcp.knobs import SDK_KEEPALIVE_S
from server.mcp.sdks import SDK_LINES
from tests.sarif import valid_sarif

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "verify-mcp"
needs_mcp1 = pytest.mark.skipif(not SDK_LINES["1.30"].present(), reason="mcp 1.30 (.venvs/mcp1) is not installed")
needs_caddy = pytest.mark.skipif(shutil.which("caddy") is None, reason="caddy is not installed")
needs_apache = pytest.mark.skipif(shutil.which("apache2") is None, reason="apache2 is not installed")
needs_varnish = pytest.mark.skipif(shutil.which("varnishd") is None and not Path("/usr/sbin/varnishd").exists(),
                                   reason="varnishd is not installed")


# Traefik's own proxy ends a few POST streams in a thousand just after their headers when the
# server answers within a millisecond (docs/field-notes.md#traefiks-early-cut; an MCP server answers
# its notifications at once): the SDK's words below, a session the check rightly skips as "failed
# otherwise". Not what these tests ask about: such a run is tried again, up to EARLY_CUT_TRIES.
TRAEFIK_EARLY_CUT = "SSE stream ended without a response"
EARLY_CUT_TRIES = 3


def cut_early(report) -> bool:
    return any(TRAEFIK_EARLY_CUT in (check.skipped or "") for check in report.checks)


def run(name: str, *checks: str):
    from labs.verify.mcp.run import verify_mcp
    for _ in range(EARLY_CUT_TRIES):
        report = verify_mcp(CONFIGS / name, checks=list(checks) or None)
        if not (name.startswith("traefik") and cut_early(report)):
            break
    return report


def mcp_checks(report) -> list:
    """The MCP checks' rows; the run's last row is verify's loopback-only, over the replicas."""
    *rows, loopback = report.checks
    assert loopback.name == "loopback-only" and loopback.passed, loopback
    return rows


def at(name: str, line: int) -> str:
    return f"{display_path(CONFIGS / name)}:{line}"


def pool_ports(report) -> set[str]:
    """The distinct loopback ports the rewrite gave the pool's servers (the replicas)."""
    added = [line for line in report.rewrites.splitlines() if line.startswith("+") and "127.0.0.1" in line
             and re.search(r"\bserver\b|dial|endpoint|url:|BalancerMember|\bbackend\b", line)]
    # host:port; Envoy's `address: 127.0.0.1, port_value: N`; VCL's `.host = "127.0.0.1"; .port = "N"`
    return set(re.findall(r'127\.0\.0\.1(?::|, port_value: |"; \.port = ")(\d+)', "\n".join(added)))


ROUND_ROBIN = [("nginx-round-robin.conf", 4), ("haproxy-round-robin.cfg", 15),
               pytest.param("Caddyfile-random", 3, marks=needs_caddy), ("envoy-round-robin.yaml", 25),
               ("traefik-round-robin.yml", 16), pytest.param("apache-balancer.conf", 15, marks=needs_apache),
               pytest.param("varnish-round-robin.vcl", 9, marks=needs_varnish),
               # Envoy's header-based stateful session: the client never sends the header back.
               ("envoy-stateful-header.yaml", 33)]
AFFINITY = ["nginx-hash.conf", "haproxy-stick-table.cfg", "haproxy-cookie.cfg",
            pytest.param("Caddyfile-cookie", marks=needs_caddy), "envoy-ring-hash.yaml", "envoy-stateful-cookie.yaml",
            "traefik-sticky-cookie.yml", pytest.param("apache-sticky-cookie.conf", marks=needs_apache),
            pytest.param("varnish-hash.vcl", marks=needs_varnish)]


@pytest.mark.slow
@needs_mcp1
@pytest.mark.parametrize("name, line", ROUND_ROBIN)
def test_a_pool_without_affinity_loses_sessions_at_its_block(name: str, line: int) -> None:
    report = run(name, "session-survives")
    assert len(pool_ports(report)) == 2, report.rewrites  # the precondition: two replicas behind it
    [check] = mcp_checks(report)
    assert (check.name, check.passed, check.skipped) == ("session-survives", False, None), check
    assert "sessions lost after initialize" in check.observed
    [fault] = report.failures()  # HAProxy's coalescing suspicion stays a warning: not measured here
    assert (fault.kind, fault.severity, fault.where) == ("session-affinity", "failure", at(name, line))
    assert fault.scenario == "mcp-session-affinity" and "Session not found" in fault.evidence
    assert report.exit_status == 1


@pytest.mark.slow
@needs_mcp1
@pytest.mark.parametrize("name", AFFINITY)
def test_affinity_keeps_every_session_on_its_replica(name: str) -> None:
    report = run(name, "session-survives")
    assert len(pool_ports(report)) == 2, report.rewrites
    assert report.pool is not None and report.pool.affinity, report.pool
    [check] = mcp_checks(report)
    assert check.passed and "4 of 4 sessions kept their Mcp-Session-Id" in check.observed, check
    assert report.failures() == [] and report.exit_status == 0


@pytest.mark.slow
@needs_mcp1
def test_a_read_timeout_below_the_keepalive_cuts_the_get_stream_at_its_line() -> None:
    name = "nginx-read-timeout.conf"
    report = run(name, "session-survives", "get-stream")
    sessions, stream = mcp_checks(report)
    assert sessions.skipped and not sessions.ran and "one server" in sessions.skipped  # one server: not run
    assert not stream.passed and not stream.skipped and "cut" in stream.observed, stream
    [finding] = report.findings
    assert (finding.kind, finding.severity, finding.where) == ("idle-timeout", "failure", at(name, 14))
    assert finding.limit_s == 5.0 and "proxy_read_timeout 30s" in (finding.fix or "")
    # The measured cut is the read limit's, not the SDK's keep-alive or the wait's end.
    cut = float(re.search(r"cut at ~(\d+\.\d+) s", stream.observed)[1])
    assert 4.5 <= cut <= 6.5, stream.observed
    assert report.exit_status == 1


@pytest.mark.slow
@needs_mcp1
def test_a_clean_route_passes_every_check_the_get_stream_by_its_keepalive() -> None:
    report = run("nginx-hash.conf")
    rows = mcp_checks(report)
    assert [c.name for c in rows] == ["session-survives", "progress-streams", "get-stream"]
    assert all(c.passed for c in rows), rows
    assert "1 keep-alive comment" in rows[2].observed and "open at the end" in rows[2].observed
    # Every step reported, hardly grouped: under the per-lump bar that `coalescing` reads (a loaded
    # CI machine read two of ten notifications in one lump once: 10 in 9 still streams).
    lumps = re.search(r"(\d+) notifications in (\d+) lumps", rows[1].observed)
    assert lumps and int(lumps[1]) >= 10, rows[1].observed
    assert int(lumps[1]) / int(lumps[2]) < COALESCED_EVENTS_PER_READ, rows[1].observed
    assert report.findings == [] and report.exit_status == 0


@pytest.mark.slow
@needs_mcp1
@pytest.mark.parametrize("name, coalesced", [("haproxy-stick-table.cfg", True), ("haproxy-cookie.cfg", False)])
def test_haproxy_without_no_delay_lumps_the_progress(name: str, coalesced: bool) -> None:
    report = run(name, "progress-streams")
    [check] = mcp_checks(report)
    lumps = re.search(r"(\d+) notifications in (\d+) lumps", check.observed)
    assert lumps and int(lumps[1]) >= 10, check.observed  # the tool reported every step
    assert check.passed is not coalesced and (int(lumps[2]) <= int(lumps[1]) / 1.5) is coalesced, check.observed
    found = [(f.kind, f.severity) for f in report.findings]
    assert (("coalescing", "failure") in found) is coalesced, report.findings


def test_the_pool_is_read_from_the_mcp_route() -> None:
    read = {name: pool_of(read_config(CONFIGS / name, wanted=RouteWanted(path="/mcp")))
            for name in ("nginx-round-robin.conf", "nginx-hash.conf", "nginx-read-timeout.conf",
                         "haproxy-round-robin.cfg", "haproxy-stick-table.cfg", "haproxy-cookie.cfg",
                         "envoy-round-robin.yaml", "envoy-ring-hash.yaml", "envoy-stateful-cookie.yaml",
                         "envoy-stateful-header.yaml", "traefik-round-robin.yml", "traefik-sticky-cookie.yml",
                         "apache-balancer.conf", "apache-sticky-cookie.conf", "varnish-round-robin.vcl",
                         "varnish-hash.vcl")}
    assert {name: (p.servers, p.affinity) for name, p in read.items() if p} == {
        "nginx-round-robin.conf": (2, None), "nginx-hash.conf": (2, "hash $remote_addr"),
        "nginx-read-timeout.conf": (1, None), "haproxy-round-robin.cfg": (2, None),
        "haproxy-stick-table.cfg": (2, "stick match req.hdr(mcp-session-id)"),
        "haproxy-cookie.cfg": (2, "cookie SERVERID insert indirect nocache"),
        "envoy-round-robin.yaml": (2, None),
        "envoy-ring-hash.yaml": (2, "lb_policy RING_HASH with the route's hash_policy "
                                    "[{'connection_properties': {'source_ip': True}}]"),
        "envoy-stateful-cookie.yaml": (2, "the envoy.filters.http.stateful_session filter "
                                          "(envoy.http.stateful_session.cookie)"),
        "envoy-stateful-header.yaml": (2, None),
        "traefik-round-robin.yml": (2, None), "traefik-sticky-cookie.yml": (2, "sticky.cookie mcp_server"),
        "apache-balancer.conf": (2, None), "apache-sticky-cookie.conf": (2, "stickysession=ROUTEID"),
        "varnish-round-robin.vcl": (2, None),
        "varnish-hash.vcl": (2, "directors.hash: a hash director keeps one key on one member")}


def test_the_get_wait_is_bounded_by_the_read_limit_or_the_first_keepalive() -> None:
    ceiling = SDK_KEEPALIVE_S + judge.GET_MARGIN_S
    assert judge.get_wait(5.0) == 8.5
    assert judge.get_wait(None) == judge.get_wait(60.0) == judge.get_wait(14.0) == ceiling


def _get_seen(comments: list[float]) -> Observation:
    return Observation("get-stream", "idle-timeout", False, "open at the end of the wait (17 s)",
                       measurements={"comments_at_s": comments, "wait_s": 17.0})


def test_an_open_get_stream_passes_only_when_a_keepalive_came_through() -> None:
    silent = judge._measured(_get_seen([]), 60.0).outcome
    assert not silent.passed and "no keep-alive comment" in (silent.skipped or "")
    kept = judge._measured(_get_seen([15.0]), 60.0).outcome
    assert kept.passed and not kept.skipped and "keep-alive came through" in kept.observed


def test_progress_lumps_by_arrival_against_the_origins_pace() -> None:
    def seen(times: list[float]) -> Observation:
        return Observation("progress-streams", "buffering", False, "streamed",
                           measurements={"call": [{"progress_at_s": times}]})
    lumped = judge.progress_lumps(seen([0.2, 0.2, 0.2, 0.4, 0.4, 0.4]))
    assert lumped.fault and lumped.kind == "coalescing" and "6 notifications in 2 lumps" in lumped.observed
    paced = judge.progress_lumps(seen([0.05 * n for n in range(1, 7)]))
    assert not paced.fault and "6 notifications in 6 lumps" in paced.observed


def a_report() -> judge.McpVerifyReport:
    return judge.McpVerifyReport(proxy="nginx", file="conf/nginx.conf", path="/mcp", findings=[
        judge.McpFault("session-affinity", "failure", "session-survives: 4 of 4 sessions lost",
                       where="conf/nginx.conf:4", scenario="mcp-session-affinity", fix="hash $remote_addr;"),
        Finding("idle-timeout", "failure", "get-stream: cut at ~5.00 s", where="conf/nginx.conf:14",
                scenario="nginx-read-timeout", fix="proxy_read_timeout 30s;", limit_s=5.0),
    ], checks=[CheckOutcome("session-survives", False, "4 of 4 sessions lost", kind="session-affinity"),
               CheckOutcome("get-stream", False, "cut at ~5.00 s", kind="idle-timeout")])


def test_the_mcp_findings_in_every_format() -> None:
    report = a_report()
    assert report.exit_status == 1 and report.unmeasured() == []
    document = json.loads(output.to_json(report))
    assert [(f["kind"], f["where"]) for f in document["findings"]] == [
        ("session-affinity", "conf/nginx.conf:4"), ("idle-timeout", "conf/nginx.conf:14")]
    affinity, idle = valid_sarif(output.for_ci(report, "sarif"))["runs"][0]["results"]
    assert affinity["ruleId"] == "session-affinity" and "ruleIndex" not in affinity  # no kind declares it
    assert affinity["locations"][0]["physicalLocation"]["region"]["startLine"] == 4
    assert idle["ruleId"] == "idle-timeout" and idle["locations"][0]["physicalLocation"]["region"]["startLine"] == 14
    github = output.for_ci(report, "github").splitlines()
    assert github[0].startswith("::error file=conf/nginx.conf,line=4,title=streamlab verify%3A session-affinity::")
    assert github[1].startswith("::error file=conf/nginx.conf,line=14,")


def test_a_named_fault_is_one_the_probe_names() -> None:
    with pytest.raises(ValueError, match="unknown MCP fault"):
        judge.McpFault("lost-session", "failure", "x")


@pytest.mark.parametrize("args, said", [
    (["--mcp", "/other"], "no route proxies POST /other"),
    (["--check", "get-stream"], "give --mcp"),
    (["--mcp", "--check", "streaming"], "judges the chat route"),
    (["--mcp", "/mcp", "--path", "/mcp"], "without --path"),
])
def test_the_command_refuses_in_one_line(args: list[str], said: str, capsys) -> None:
    assert cli.main([str(CONFIGS / "nginx-read-timeout.conf"), *args]) == 2
    out = capsys.readouterr().out
    assert said in " ".join(out.split()) and "Traceback" not in out


def test_a_chat_judgement_names_the_mcp_route(tmp_path: Path) -> None:
    config = tmp_path / "nginx.conf"
    config.write_text("events {}\nhttp {\n  server {\n    listen 80;\n"
                      "    location /v1/ { proxy_pass http://vllm:8000; }\n"
                      "    location /mcp { proxy_pass http://tools:8000; }\n  }\n}\n")
    [note] = mcp_hint(read_config(config), "nginx.conf")
    assert "location /mcp" in note and "--mcp" in note
    config.write_text("events {}\nhttp {\n  server {\n    listen 80;\n"
                      "    location / { proxy_pass http://vllm:8000; }\n  }\n}\n")
    assert mcp_hint(read_config(config), "nginx.conf") == []  # a catch-all is not an MCP route


@pytest.mark.slow
@needs_mcp1
def test_a_tls_listener_is_measured_over_tls_with_the_runs_certificate(tmp_path: Path) -> None:
    config = tmp_path / "mcp-tls.conf"
    config.write_text((CONFIGS / "nginx-hash.conf").read_text().replace(
        "listen 80;", "listen 443 ssl;\n        ssl_certificate /etc/ssl/mcp.crt;\n"
                      "        ssl_certificate_key /etc/ssl/mcp.key;"))
    from labs.verify.mcp.run import verify_mcp
    report = verify_mcp(config, checks=["session-survives"])
    assert any("verify measures them over TLS" in note for note in report.notes), report.notes
    [check] = mcp_checks(report)  # the official client accepted the run's self-signed certificate
    assert check.passed and "4 of 4 sessions kept" in check.observed, check


def _our_replica_containers() -> set[str]:
    from proxies.runtime.dockercli import docker
    listed = docker(["ps", "--all", "--quiet", "--filter", "label=streamlab.kind=mcp",
                     "--filter", f"label=streamlab.pid={os.getpid()}"])
    return set(listed.stdout.split())


@pytest.mark.docker
@pytest.mark.slow
@needs_mcp1
@pytest.mark.parametrize("name, kept", [("nginx-round-robin.conf", False), ("nginx-hash.conf", True)])
def test_in_containers_the_replicas_and_the_proxy_give_the_same_verdict(name: str, kept: bool) -> None:
    """--runtime docker: each replica in its container of the mcp image (Runtime.run_mcp_replicas),
    nginx in its release's; the pool's balancing still decides, and every replica is gone after."""
    from labs.verify.mcp.run import verify_mcp
    from proxies.runtime.docker_mcp import image_problem
    from tests.runtimes import require_images, unavailable
    require_images(["mcp", "nginx"])
    if (problem := image_problem()) is not None:
        unavailable(problem)
    report = verify_mcp(CONFIGS / name, checks=["session-survives"], runtime="docker")
    assert any("in containers of the mcp image" in note for note in report.notes), report.notes
    assert len(pool_ports(report)) == 2, report.rewrites
    [check] = mcp_checks(report)
    assert check.passed is kept and not check.skipped, check
    assert [f.kind for f in report.failures()] == ([] if kept else ["session-affinity"])
    assert not _our_replica_containers()


@pytest.mark.slow
@needs_mcp1
def test_the_published_envoy_ai_gateway_config_gives_its_written_expectation() -> None:
    """tests/data/wild/envoy-ai-gateway-mcp: the result written from the config before verify read
    Envoy pools (its wild.json's `mcp.expected`), check by check."""
    from labs.verify.mcp.run import verify_mcp
    folder = CONFIGS.parent / "wild" / "envoy-ai-gateway-mcp"
    expected = json.loads((folder / "wild.json").read_text())["mcp"]["expected"]
    report = verify_mcp(folder / "envoy.yaml")
    said = {c.name: "not run" if not c.ran else "pass" if c.passed else "skipped" if c.skipped else "fail"
            for c in report.checks}
    assert {**said, "verdict": report.verdict} == expected, [(c.name, c.observed) for c in report.checks]


@pytest.mark.slow
@needs_mcp1
def test_envoys_default_route_timeout_ends_the_get_stream_as_a_total_limit() -> None:
    """Envoy's route timeout (15 s unless set) counts from the request, so the SDK's keep-alive
    does not save the GET stream: named total-timeout, not an idle limit of the time since the
    comment (the published config with `timeout: 120s` passes: the test above)."""
    report = run("envoy-route-timeout.yaml", "get-stream")
    [stream] = mcp_checks(report)
    assert not stream.passed and "cut" in stream.observed, stream
    [finding] = report.failures()
    assert (finding.kind, finding.where, finding.limit_s) == ("total-timeout", "default", 15.0), finding
    assert "timeout: 0s" in (finding.fix or "") and "keep-alive comments or not" in finding.evidence
