"""`labs probe --mcp` against the lab's own MCP origin (server/mcp/), direct and behind nginx,
started with the scenario's helpers (server.mcp.replicas, labs.lab.hops): each check passes where
the path is sound and names its fault, at its hop, where it is not; timeouts are scaled down
through nginx's own settings, so each probe takes seconds."""
from __future__ import annotations

import contextlib
import json
import time
from typing import Any, Iterator

import pytest

from labs.client.mcp_session import McpCall, McpResult
from labs.probe.cli import main
from labs.probe.mcp.checks import ProgressStreams, judge_sessions
from labs.client.mcp_get_stream import GetStream
from labs.probe.mcp.report import McpProbeReport
from labs.probe.mcp.run import probe_mcp
from server.mcp.knobs import OriginKnobs
from server.mcp.replicas import Replicas, running_replicas
from server.processes import free_port

WAIT_S = 2.0  # the GET stream's wait: above nginx's scaled 1 s read timeout


@contextlib.contextmanager
def behind_nginx(count: int, knobs: OriginKnobs, sdk: str, **nginx: Any) -> Iterator[tuple[str, Replicas]]:
    """`count` replicas behind nginx at its default round-robin (plus `nginx` settings): the
    proxy's MCP URL, and the replicas."""
    from labs.lab.hops import hop_settings, runtime_named

    with running_replicas(count, knobs, sdk=sdk) as replicas:
        settings = hop_settings("nginx", nginx, listen_port=free_port(), upstream_port=replicas.ports[0],
                                upstream_replica_ports=tuple(replicas.ports[1:]))
        with runtime_named("local").run_proxy(settings) as hop:  # type: ignore[arg-type]
            yield hop.url + "/mcp", replicas


def probe(urls: list[str], **options: Any) -> McpProbeReport:
    started = time.monotonic()
    report = probe_mcp(urls, max_silence_s=options.pop("max_silence_s", WAIT_S), **options)
    print(f"probe --mcp {' '.join(urls)}: {time.monotonic() - started:.1f} s; "
          f"{[(c.name, c.passed, c.skipped, c.observed) for c in report.checks]}")
    return report


def result(report: McpProbeReport, check: str) -> Any:
    return next(c for c in report.checks if c.name == check)


def test_the_lab_origin_direct_passes_every_check() -> None:
    with running_replicas(1, OriginKnobs(keepalive_s=0.5)) as replicas:
        report = probe([replicas.url(0)])
    assert report.exit_status == 0 and not report.faults and not report.findings
    assert all(c.passed for c in report.checks), report.checks
    assert "4 of 4 sessions kept their Mcp-Session-Id" in result(report, "session-survives").observed
    assert "10 notifications" in result(report, "progress-streams").observed
    stream = report.measurements["get-stream"]
    # The origin's pings (every 0.5 s) arrived and the headers came at once, before any body byte.
    assert stream["ended"] == "open at the end of the wait" and len(stream["comments_at_s"]) >= 2
    assert stream["headers_s"] < 0.5 <= stream["first_byte_s"]


def test_round_robin_over_two_stateful_replicas_loses_the_sessions_at_the_proxy() -> None:
    """mcp 1.30 replicas behind nginx round-robin: the finding names affinity, at the proxy's hop;
    the replica alone (the inner entry) keeps its sessions."""
    with behind_nginx(2, OriginKnobs(), "1.30") as (url, replicas):
        report = probe([url, replicas.url(0)], checks=["session-survives"])
        records = replicas.requests()
    assert report.exit_status == 1
    [fault] = report.faults
    assert fault.kind == "session-affinity" and fault.hop == 0
    assert "4 of 4 sessions lost" in fault.evidence and "Session not found" in fault.evidence
    assert fault.scenario == "mcp-session-affinity" and "stick" in (fault.fix or "")
    assert report.measurements["hops"]["session-survives"] == {"0": True, "1": False}
    # The precondition, from the replicas' own records: a session's later request was refused by
    # the replica that did not open it.
    opened_on = {r["session"]: r["replica"] for r in records if r["method"] == "initialize" and r["session"]}
    refused = [r for r in records if r["status"] == 404 and r["session"] in opened_on]
    assert refused and all(r["replica"] != opened_on[r["session"]] for r in refused)


def test_behind_a_sound_outer_proxy_the_fault_is_named_at_the_inner_one() -> None:
    """outer nginx -> inner nginx round-robin -> two 1.30 replicas: the innermost entry that still
    loses sessions is the inner proxy (hop 1); replica 0 alone (hop 2) keeps them."""
    from labs.lab.hops import hop_settings, runtime_named

    with behind_nginx(2, OriginKnobs(), "1.30") as (inner, replicas):
        port = int(inner.split(":")[2].split("/")[0])
        outer = hop_settings("nginx", {}, listen_port=free_port(), upstream_port=port)
        with runtime_named("local").run_proxy(outer) as hop:  # type: ignore[arg-type]
            report = probe([hop.url + "/mcp", inner, replicas.url(0)], checks=["session-survives"])
    [fault] = report.faults
    assert fault.kind == "session-affinity" and fault.hop == 1, report.measurements.get("hops")
    assert report.measurements["hops"]["session-survives"] == {"0": True, "2": False, "1": True}


def test_the_same_pair_with_a_client_hash_keeps_every_session(capsys: pytest.CaptureFixture[str]) -> None:
    with behind_nginx(2, OriginKnobs(), "1.30", upstream_hash="$remote_addr") as (url, replicas):
        report = probe([url], checks=["session-survives", "progress-streams"])
        capsys.readouterr()  # what probe() printed is not the command's
        code = main(["--mcp", url, "--check", "session-survives", "--json"])
        answering = {r["replica"] for r in replicas.requests()}
    assert report.exit_status == 0 and not report.faults, report.checks
    shown = json.loads(capsys.readouterr().out)  # the command's own answer: ok, no fault, exit 0
    assert code == 0 and shown["ok"] and shown["faults"] == [] and shown["checks"][0]["passed"]
    assert "4 of 4 sessions kept" in result(report, "session-survives").observed
    assert len(answering) == 1  # the hash sent this client to one replica: the fix did act


def test_a_stateless_server_passes_by_what_it_answered_and_has_no_get_stream() -> None:
    with behind_nginx(2, OriginKnobs(sessions=False), "2.3") as (url, replicas):
        report = probe([url])
        answering = {r["replica"] for r in replicas.requests()}
    assert report.exit_status == 0, report.checks
    assert result(report, "session-survives").observed.startswith("stateless (the server gave no Mcp-Session-Id)")
    get = result(report, "get-stream")
    assert get.skipped == "stateless server has no GET stream (405)" and not get.ran
    assert answering == {0, 1}  # round-robin went on: the pass is the server's statelessness


@pytest.mark.parametrize(("keepalive_s", "cut"), [pytest.param(0.0, True, id="pings-off"),
                                                   pytest.param(0.3, False, id="pings-every-0.3s")])
def test_the_silent_get_stream_is_cut_at_the_proxys_idle_timeout(keepalive_s: float, cut: bool) -> None:
    """nginx's proxy_read_timeout scaled to 1 s: a GET stream with the origin's pings off is cut
    about 1 s into its silence, at the proxy's hop; pings every 0.3 s keep it open."""
    with behind_nginx(1, OriginKnobs(keepalive_s=keepalive_s), "2.3", proxy_read_timeout="1s") as (url, replicas):
        report = probe([url, replicas.url(0)], checks=["get-stream"])
    stream = report.measurements["get-stream"]
    if cut:
        [finding] = report.findings
        assert finding.kind == "idle-timeout" and finding.hop == 0 and report.exit_status == 1
        assert finding.limit_s is not None and 0.8 <= finding.limit_s <= 1.5, finding.evidence
        assert stream["cut"] and not stream["comments_at_s"]
    else:
        assert report.exit_status == 0 and not report.findings
        assert not stream["cut"] and len(stream["comments_at_s"]) >= 3  # the pings did flow


@pytest.mark.parametrize("argv", [
    pytest.param(["--mcp", "127.0.0.1:1/mcp"], id="not-a-url"),
    pytest.param(["--mcp", "--mcp-args", "[1]", "http://127.0.0.1:1/mcp"], id="args-not-an-object"),
])
def test_bad_input_is_exit_2_with_one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    # One message (rich wraps it at the console's width), no traceback.
    assert err.startswith("error:") and err.count("error:") == 1 and "Traceback" not in err


def test_a_ci_format_that_cannot_carry_the_mcp_faults_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--mcp", "--format", "sarif", "http://127.0.0.1:1/mcp"])
    assert exit_.value.code == 2 and "does not carry the MCP faults" in capsys.readouterr().err


def test_an_endpoint_that_is_not_mcp_is_exit_2_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """The origin's health route answers 200 to GET, but it is no MCP endpoint."""
    with running_replicas(1, OriginKnobs()) as replicas:
        code = main(["--mcp", replicas.url(0).replace("/mcp", "/healthz")])
    err = " ".join(capsys.readouterr().err.split())
    assert code == 2 and "is not an MCP endpoint the official client can open" in err
    assert err.count("error:") == 1 and "Traceback" not in err


def _call(progress_at_s: list[float]) -> McpResult:
    return McpResult(url="u", mode="legacy", opened=True,
                     calls=[McpCall(sent_at_s=0.0, progress_at_s=progress_at_s, result="done", elapsed_s=0.6)])


def test_progress_let_go_together_is_buffering_and_spread_progress_is_not() -> None:
    assert ProgressStreams().judge(_call([0.5 + 0.001 * n for n in range(10)]))[0]
    assert not ProgressStreams().judge(_call([0.05 * n + 0.01 for n in range(10)]))[0]


def test_sessions_lost_and_sessions_failed_otherwise_are_told_apart() -> None:
    kept = McpResult(url="u", mode="legacy", session_id="a", opened=True,
                     calls=[McpCall(0.0, result="slow_task")], responses=[("POST", 200, "a"), ("POST", 200, "a")])
    gone = McpResult(url="u", mode="legacy", session_id="a", opened=True, calls=[McpCall(0.0)],
                     responses=[("POST", 200, "a"), ("POST", 404, "a")], error="MCPError: Session not found")
    timed_out = McpResult(url="u", mode="legacy", session_id="a", opened=True, calls=[McpCall(0.0)],
                          responses=[("POST", 200, "a")], error="timed out")
    assert judge_sessions([kept, kept], 2)[:2] == (False, judge_sessions([kept, kept], 2)[1]) \
        and judge_sessions([kept], 2)[2] is None
    assert judge_sessions([kept, gone], 2)[0]
    fault, _, untold = judge_sessions([kept, timed_out], 2)
    assert not fault and untold and "failed otherwise" in untold


def test_headers_are_held_only_when_they_come_late_and_with_the_first_byte() -> None:
    assert GetStream(status=200, headers_s=15.0, first_byte_s=15.01).held_headers  # a hop waited for a body byte
    assert not GetStream(status=200, headers_s=0.01, first_byte_s=15.0).held_headers  # headers at once
    assert not GetStream(status=200, headers_s=15.0, first_byte_s=None).held_headers  # late, but no byte


@pytest.mark.parametrize(("release", "held"), [pytest.param("1.22", True, id="nginx-1.22"),
                                               pytest.param("1.30", False, id="nginx-1.30")])
def test_held_get_headers_are_named_at_the_http2_hop(release: str, held: bool) -> None:
    """nginx over TLS with HTTP/2 in front of an origin whose GET stream's first byte is its 2 s
    keep-alive: 1.22 holds the 200 until that byte, named `held-headers` at the proxy's hop (the
    probe speaks HTTP/2 where TLS offers it); 1.30 sends it at once (mcp-held-headers)."""
    with behind_nginx(1, OriginKnobs(keepalive_s=2.0), "2.3", tls_http2=True, version=release) as (url, replicas):
        report = probe([url, replicas.url(0)], checks=["get-stream"], insecure=True, max_silence_s=3.0)
    stream = report.measurements["get-stream"]
    assert url.startswith("https://") and stream["http_version"] == "HTTP/2"
    assert stream["first_byte_s"] is not None and stream["first_byte_s"] >= 1.8  # the origin's 2 s silence happened
    if held:
        [fault] = report.faults
        assert fault.kind == "held-headers" and fault.hop == 0 and report.exit_status == 1, fault
        assert stream["headers_s"] >= 1.8
    else:
        assert report.exit_status == 0 and not report.faults and not report.findings
        assert stream["headers_s"] < 0.5
