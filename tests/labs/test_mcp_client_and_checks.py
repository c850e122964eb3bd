"""The MCP measuring client's own errors, and the MCP scenario's checks in both directions on
hand-made runs (a symptom check must reject a cured run, a cure check a broken one)."""
from __future__ import annotations

from pathlib import Path

import pytest

from labs import catalogue
from labs.client.mcp_session import McpCall, McpResult, main, measure_session
from labs.scenario.mcp_model import McpRun, McpScenario
from server.processes import free_port
from server.signals import run_async

SCENARIO = catalogue.find("mcp-session-affinity")
assert isinstance(SCENARIO, McpScenario)


def test_the_client_cli_names_a_wrong_argument_with_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["not-a-url"]) == 2
    assert "error:" in capsys.readouterr().err


def test_a_server_that_is_not_there_is_measured_not_raised() -> None:
    outcome = run_async(measure_session(f"http://127.0.0.1:{free_port()}/mcp", timeout_s=5))
    assert not outcome.completed and not outcome.opened and outcome.error


def _session(session: str, ok: bool) -> McpResult:
    call = McpCall(sent_at_s=0.1, progress_at_s=[0.05, 0.1] if ok else [],
                   result="done" if ok else None, error=None if ok else "MCPError: Session not found")
    return McpResult(url="u", mode="legacy", session_id=session, opened=True, calls=[call],
                     error=None if ok else call.error)


def _request(replica: int, method: str, session: str | None, status: int) -> dict[str, object]:
    return {"replica": replica, "at": 0.0, "http_method": "POST", "method": method, "tool": None,
            "session": session, "status": status}


def broken_run() -> McpRun:
    """Round-robin: initialize on one replica, the tool call refused by the other."""
    requests = [request for n, session in enumerate(("a", "b"))
                for request in (_request(n % 2, "initialize", session, 200),
                                _request(1 - n % 2, "tools/call", session, 404))]
    return McpRun("nginx", "broken", [_session("a", False), _session("b", False)], requests, 2)


def kept_run() -> McpRun:
    requests = [request for n, session in enumerate(("a", "b"))
                for request in (_request(n % 2, "initialize", session, 200),
                                _request(n % 2, "tools/call", session, 200))]
    return McpRun("haproxy", "stick-table", [_session("a", True), _session("b", True)], requests, 2)


def one_replica_refusing_run() -> McpRun:
    """'Session not found' with one replica only (an expired session): not this scenario's cause."""
    requests = [_request(0, "initialize", "a", 200), _request(0, "tools/call", "a", 404)]
    return McpRun("nginx", "broken", [_session("a", False)], requests, 1)


def test_the_symptom_checks_accept_the_broken_run_and_reject_the_others() -> None:
    assert all(check(broken_run()).passed for check in SCENARIO.symptom_checks)
    assert not all(check(kept_run()).passed for check in SCENARIO.symptom_checks)
    # The precondition: the 404 must come from the replica that does not hold the session.
    assert not all(check(one_replica_refusing_run()).passed for check in SCENARIO.symptom_checks)


@pytest.mark.parametrize("fix", [fix.name for fix in SCENARIO.fixes if fix.name in ("stick-table", "cookie")])
def test_the_cure_checks_accept_a_kept_run_and_reject_the_broken_one(fix: str) -> None:
    assert all(check(kept_run()).passed for check in SCENARIO.checks(fix))
    # Every check of the cure rejects it but the precondition (both replicas answered), which a
    # broken run meets too.
    judged = {check.label: check(broken_run()).passed for check in SCENARIO.checks(fix)}
    assert [label for label, passed in judged.items() if passed] == [
        "requests answered by 2 replicas, the sessions spread over them"]


@pytest.mark.parametrize("fix", ["stick-table", "cookie"])
def test_an_affinity_cure_needs_both_replicas_to_have_answered(fix: str) -> None:
    """The precondition of a learnt affinity: the sessions still spread, each kept on its replica."""
    run = kept_run()
    run.requests = [{**r, "replica": 0} for r in run.requests]  # every session on one replica
    assert not all(check(run).passed for check in SCENARIO.checks(fix))


def test_the_stateless_cure_needs_both_replicas_to_have_answered() -> None:
    run = kept_run()
    run.requests = [{**r, "session": None} for r in run.requests]
    assert all(check(run).passed for check in SCENARIO.checks("stateless"))
    run.requests = [{**r, "replica": 0} for r in run.requests]  # the balancer stopped balancing
    assert not all(check(run).passed for check in SCENARIO.checks("stateless"))


def test_every_fix_names_proxies_of_the_scenario_and_settings_only_for_them() -> None:
    for fix in SCENARIO.fixes:
        assert set(fix.proxies) <= set(SCENARIO.proxies), fix.name
        assert set(fix.variant.proxy) <= set(fix.proxies), fix.name


def test_the_header_hash_look_alike_is_judged_by_its_failures() -> None:
    lookalike = SCENARIO.fix("session-header-hash")
    assert not lookalike.cures
    assert all(check(broken_run()).passed for check in lookalike.cure_checks)
    assert not all(check(kept_run()).passed for check in lookalike.cure_checks)



@pytest.mark.parametrize(("keepalive_s", "reconnects"), [(0.0, 1), (0.3, 0)])
def test_a_get_stream_cut_at_an_idle_limit_is_reopened_and_counted(keepalive_s: float, reconnects: int) -> None:
    """nginx cuts the silent GET stream at its 1 s read timeout; the SDK reopens it 1 s later (its
    default retry) and counts no error; pings every 0.3 s keep it open. (The SDK gives up after two
    cuts in a row: the tool call's 2.5 s leaves room for one.)"""
    from labs.lab.hops import hop_settings, runtime_named
    from server.mcp.knobs import OriginKnobs
    from server.mcp.replicas import running_replicas
    with running_replicas(1, OriginKnobs(duration_s=2.5, keepalive_s=keepalive_s)) as replicas:
        settings = hop_settings("nginx", {"proxy_read_timeout": "1s"}, listen_port=free_port(),
                                upstream_port=replicas.ports[0])
        with runtime_named("local").run_proxy(settings) as hop:  # type: ignore[arg-type]
            outcome = run_async(measure_session(hop.url + "/mcp", calls=1))
        gets = [r for r in replicas.requests() if r["http_method"] == "GET"]
    assert outcome.completed, outcome.error
    assert outcome.reconnects == reconnects and len(gets) == 1 + reconnects


def test_labs_run_in_docker_without_the_mcp_image_says_what_to_build_in_one_line(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from labs.__main__ import main as labs
    from proxies.runtime import docker_mcp
    missing = "mcp: streamlab/mcp:host is not built; run `make images-offline`"
    monkeypatch.setattr(docker_mcp, "image_problem", lambda: missing)
    assert labs(["run", "mcp-session-affinity", "--runtime", "docker", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "make images-offline" in err[0] and not list(tmp_path.iterdir())


def test_labs_render_names_an_mcp_scenario_and_what_plays_it(capsys: pytest.CaptureFixture[str]) -> None:
    from labs.__main__ import main as labs
    assert labs(["render", "mcp-session-affinity"]) == 2
    assert "is an MCP scenario: `python -m labs run mcp-session-affinity`" in capsys.readouterr().err


def test_labs_setup_knows_what_an_mcp_scenario_needs() -> None:
    from labs.needs import ALL, needs_of
    from proxies.needs import hop_needs
    needed = needs_of("mcp-session-affinity")
    assert "python-mcp" in needed and set(hop_needs(["nginx", "haproxy"])) <= set(needed)
    assert ALL["python-mcp"].present()  # the SDK the origin and the client import is installed


def test_an_outcome_reads_as_a_token_streams_does_and_its_report_names_each_run() -> None:
    """`labs run` and `run-all` read an McpOutcome as a ScenarioOutcome: verdicts per side, all judged."""
    from labs.scenario.mcp_report import report_dict, report_markdown
    from labs.scenario.mcp_runner import McpMeasured, McpOutcome

    def measured(run: McpRun) -> McpMeasured:
        return McpMeasured(run, [check(run) for check in SCENARIO.checks(run.variant)])

    outcome = McpOutcome(SCENARIO, {"broken": [measured(broken_run())], "fixed": [measured(kept_run())]},
                         releases={"nginx": "1.30", "haproxy": "3.2"})
    assert outcome.verdict == {"broken": "symptom reproduced", "fixed": "cured"} and outcome.all_passed
    outcome.runs["fixed"].append(measured(McpRun("haproxy", "cookie", broken_run().sessions, broken_run().requests, 2)))
    assert outcome.verdict["fixed"] == "NOT cured" and not outcome.all_passed
    text = report_markdown(outcome)
    assert "| broken | nginx | 0/2 sessions completed; errors: MCPError: Session not found |" in text
    assert "| NOT cured |" in text and report_dict(outcome)["variants"]["fixed"]["verdict"] == "NOT cured"


IDLE = catalogue.find("mcp-idle-stream")
PROGRESS = catalogue.find("mcp-progress-buffered")
assert isinstance(IDLE, McpScenario) and isinstance(PROGRESS, McpScenario)


def _get(at: float) -> dict[str, object]:
    return {"replica": 0, "at": at, "http_method": "GET", "method": None, "tool": None, "session": "a", "status": 200}


def _idle_run(get_at: list[float], sent_at: float, received: bool, elapsed_s: float = 10.6) -> McpRun:
    """One idle session: its GET streams as the replica recorded them, one server notification."""
    session = _session("a", True)
    session.elapsed_s = elapsed_s
    session.notifications = [("notifications/tools/list_changed", sent_at)] if received else []
    notice = {"replica": 0, "at": sent_at, "http_method": "SERVER", "method": "notifications/tools/list_changed",
              "tool": None, "session": None, "status": None}
    return McpRun("nginx", "broken", [session], [*map(_get, get_at), notice], 1)


def test_the_idle_stream_symptom_needs_the_cut_the_abandon_and_the_loss() -> None:
    lost = _idle_run([0.1, 3.4], sent_at=8.6, received=False)
    assert all(check(lost).passed for check in IDLE.symptom_checks)
    # Cut before the limit and the client's delay: not the proxy's idle limit.
    assert not all(check(_idle_run([0.1, 1.5], 8.6, False)).passed for check in IDLE.symptom_checks)
    # Reopened a third time: the client did not give up.
    assert not all(check(_idle_run([0.1, 3.4, 5.6], 8.6, False)).passed for check in IDLE.symptom_checks)
    # Sent while the last GET was still open: its loss would prove nothing.
    assert not all(check(_idle_run([0.1, 3.4], 3.9, False)).passed for check in IDLE.symptom_checks)
    # Never sent: nothing to lose.
    never = _idle_run([0.1, 3.4], 8.6, False)
    never.requests = never.requests[:-1]
    assert not all(check(never).passed for check in IDLE.symptom_checks)
    assert not all(check(_idle_run([0.1], 8.6, True)).passed for check in IDLE.symptom_checks)


@pytest.mark.parametrize("fix", [fix.name for fix in IDLE.fixes if fix.cures])
def test_the_idle_stream_cures_need_one_long_lived_stream_and_the_notification(fix: str) -> None:
    checks = IDLE.fix(fix).cure_checks
    assert all(check(_idle_run([0.1], 8.6, True)).passed for check in checks)
    assert not all(check(_idle_run([0.1, 3.4], 8.6, False)).passed for check in checks)
    # The precondition: a session too short to have met the idle limit proves nothing.
    assert not all(check(_idle_run([0.1], 0.5, True, elapsed_s=1.5)).passed for check in checks)


def _progress_run(times: list[float], elapsed_s: float = 1.05) -> McpRun:
    session = _session("a", True)
    session.calls = [McpCall(sent_at_s=0.1, progress_at_s=times, result="done", elapsed_s=elapsed_s)]
    return McpRun("haproxy", "broken", [session], [], 1)


# Measured through HAProxy 3.2 at its defaults and with http-no-delay (docs/mcp.md), 50 ms pace.
LUMPED = [0.23, 0.23, 0.234, 0.234, 0.438, 0.438, 0.438, 0.439, 0.647, 0.647, 0.648, 0.648,
          0.854, 0.855, 0.866, 0.866, 1.062, 1.062, 1.062, 1.062]
STREAMED = [0.02 + 0.05 * n for n in range(20)]


def test_progress_lumps_are_told_from_a_stream_both_ways() -> None:
    symptom, cure = PROGRESS.symptom_checks, PROGRESS.fix("http-no-delay").cure_checks
    assert all(check(_progress_run(LUMPED)).passed for check in symptom)
    assert not all(check(_progress_run(STREAMED)).passed for check in symptom)
    assert all(check(_progress_run(STREAMED)).passed for check in cure)
    assert not all(check(_progress_run(LUMPED)).passed for check in cure)
    # The precondition: a tool that sent its steps at once (or too few) says nothing of the hop.
    assert not all(check(_progress_run(LUMPED, elapsed_s=0.3)).passed for check in symptom)
    assert not all(check(_progress_run(STREAMED[:5])).passed for check in cure)
