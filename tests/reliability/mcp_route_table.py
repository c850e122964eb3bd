"""By hand: each fixed config's MCP route (proxies/fixed_mcp.py) with and without its affinity, in
front of two stateful replicas of the lab's origin on mcp 1.30, with the helpers of
test_proxies_mcp.py (the official client, each session from its own loopback address).

    .venv/bin/python -m tests.reliability.mcp_route_table

Prints, per proxy release and affinity on/off: the sessions completed of 4 (2 tool calls each),
the replicas each session's requests reached, and the progress notifications' timing. Not part of
the test suite (docs/proxies.md#the-mcp-route-mcp quotes it).
"""
from __future__ import annotations

import statistics

import labs.client.mcp_session as mcp_session
from server.mcp.replicas import running_replicas
from tests.reliability import test_proxies_mcp as route
from tests.reliability.proxy_faults import OnRelease, older_with_another_file, release_to_run
from tests.runtimes import PROXIES


def main() -> None:
    mcp_session.create_mcp_http_client = route._client_on_own_address  # each session its own address
    cases = [OnRelease(proxy) for proxy in PROXIES] + [
        OnRelease(proxy, series) for proxy in PROXIES for series in older_with_another_file(proxy)]
    with running_replicas(2, route.KNOBS, sdk="1.30") as replicas:
        for proxy in cases:
            for affinity in (True, False):
                with route._on_route(proxy, replicas, mcp_affinity=affinity) as running:
                    results = route.sessions(running, 100, calls=2)
                where = [sorted(route.replicas_of(replicas, result.session_id)) for result in results]
                calls = [call for result in results for call in result.calls if call.progress_at_s]
                gaps = [max(call.gaps_s) for call in calls if call.gaps_s]
                firsts = [call.progress_at_s[0] for call in calls]
                timing = (f"first progress {min(firsts) * 1000:.0f}-{max(firsts) * 1000:.0f} ms, largest gap "
                          f"median {statistics.median(gaps) * 1000:.0f} ms" if gaps else "no progress")
                print(f"{proxy} {release_to_run(proxy)} affinity={'on' if affinity else 'off'}: "
                      f"{sum(result.completed for result in results)}/{len(results)} completed, replicas per "
                      f"session {where}, {timing}", flush=True)


if __name__ == "__main__":
    main()
