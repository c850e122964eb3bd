"""The MCP route of every fixed config (proxies/fixed_mcp.py): two stateful replicas of the lab's
origin on mcp 1.30 (server/mcp/replicas.py) behind each proxy's `/mcp`, the official Python SDK's
client (labs/client/mcp_session.py) through it.

What the route must do and a hop can break: keep each session on the replica that opened it (the
proof that both replicas served sessions, so the affinity is not vacuous; and the same proxy at
round-robin, `mcp_affinity=False`, loses them), pass the progress notifications one by one, keep
the standalone GET stream open across silences (the origin's keep-alive scaled down; the route's
real limit read from the exported file by verify's reader, against the SDKs' 15 s pings), and
end the session with its DELETE. The chat route's own tests are test_proxies_protocols.py.
"""
from __future__ import annotations

import asyncio
import contextvars
from pathlib import Path
from typing import Any, Iterator

import httpx2
import pytest

import labs.client.mcp_session as mcp_session
from labs.client.mcp_session import McpResult, measure_session
from labs.findings.buffering import LUMP_GAP_SHARE
from labs.findings.coalescing import COALESCED_EVENTS_PER_READ
from labs.probe.mcp.checks import NOT_FOUND
from labs.probe.mcp.checks import lost as session_lost
from labs.verify.model import Options, RouteWanted
from labs.verify.readers import suspicions
from labs.verify.run import read_config
from proxies.base import ProxyName
from proxies.export import exports
from proxies.fixed_mcp import MCP_PATH
from proxies.fixed_settings import SILENCE
from proxies.runtime.local import LocalProxy, run_proxy
from proxies.variants import variant
from server.mcp.knobs import SDK_KEEPALIVE_S, OriginKnobs
from server.mcp.replicas import Replicas, running_replicas
from server.processes import free_port
from tests.reliability.proxy_faults import on_releases, release_to_run
from tests.runtimes import PROXIES, on_free_ports
from tests.verify.test_mcp import TRAEFIK_EARLY_CUT

pytestmark = pytest.mark.slow
INTERVAL_S = 0.05  # the tool's progress pace (the chat server's token interval)
DURATION_S = 0.4  # 8 notifications per call
# The SDKs' 15 s keep-alive scaled down: a ping every 0.3 s, and a session that idles 1.2 s, four
# of them, on its standalone GET stream.
PING_S = 0.3
IDLE_S = 1.2
NOTIFY_AFTER_S = 0.8  # a server notification on the GET stream, within the idle time
SESSIONS = 4  # at once, each from its own client address
ROUNDS = 3  # batches of SESSIONS until both replicas served one (a hash may pick one for a batch)
KNOBS = OriginKnobs(progress_interval_s=INTERVAL_S, duration_s=DURATION_S, keepalive_s=PING_S,
                    notify_after_s=NOTIFY_AFTER_S)
# What the static reading of the route must not suspect with the SDKs' pings as the longest silence.
STREAMING_KINDS = {"idle-timeout", "total-timeout", "buffering", "compression-delay", "coalescing"}

# Traefik bounds no silence once the headers are sent (writeTimeout 0; responseHeaderTimeout bounds
# the wait for them, and the SDKs' GET stream sends its headers at once): verify suspects none.
NO_SILENCE_LIMIT = {"traefik"}

CLIENT_ADDRESS: contextvars.ContextVar[str | None] = contextvars.ContextVar("client_address", default=None)


SDK_CLIENT = mcp_session.create_mcp_http_client


def _client_on_own_address(headers: dict[str, str] | None = None, timeout: httpx2.Timeout | None = None,
                           auth: httpx2.Auth | None = None) -> httpx2.AsyncClient:
    """The SDK's own client (create_mcp_http_client's timeouts), bound to this task's loopback
    address: sessions of different users, as an address hash (nginx 1.22) tells them apart."""
    client = SDK_CLIENT(headers=headers, timeout=timeout, auth=auth)
    address = CLIENT_ADDRESS.get()
    if address is None:
        return client
    return httpx2.AsyncClient(timeout=client.timeout, headers=client.headers,
                              transport=httpx2.AsyncHTTPTransport(local_address=address))


@pytest.fixture(autouse=True)
def own_addresses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mcp_session, "create_mcp_http_client", _client_on_own_address)


@pytest.fixture(scope="module")
def replicas() -> Iterator[Replicas]:
    with running_replicas(2, KNOBS, sdk="1.30") as running:
        yield running


def _on_route(name: ProxyName, replicas: Replicas, **changes: Any) -> Any:
    """The exported fixed config as it is (its client timeouts not scaled: a 3 s idle limit, below
    the client's 5 s pool expiry, would race its reused connections), on free ports, the MCP pool
    on the replicas; the chat route's upstream is not used here: a free port nothing listens on."""
    settings = variant(name, "fixed").with_(version=release_to_run(name))
    return run_proxy(on_free_ports(settings, free_port()).with_(mcp_ports=tuple(replicas.ports), **changes))


@pytest.fixture(scope="module", params=on_releases(PROXIES))
def proxy(request: pytest.FixtureRequest, replicas: Replicas) -> Iterator[LocalProxy]:
    with _on_route(request.param, replicas) as running:
        yield running


async def _session(url: str, address: str, **options: Any) -> McpResult:
    CLIENT_ADDRESS.set(address)
    return await measure_session(url, mode="legacy", timeout_s=20, **options)


def sessions(proxy: LocalProxy, first_address: int, count: int = SESSIONS, **options: Any) -> list[McpResult]:
    """`count` sessions at once, each from its own address 127.0.0.<first_address + i>."""
    url = proxy.url + MCP_PATH

    async def all_of() -> list[McpResult]:
        return list(await asyncio.gather(*(_session(url, f"127.0.0.{first_address + index}", **options)
                                           for index in range(count))))
    results = asyncio.run(all_of())
    if proxy.settings.proxy == "traefik":  # Traefik's early cut (tests/verify/test_mcp.py): that session again
        results = [asyncio.run(_session(url, f"127.0.0.{first_address + index}", **options))
                   if TRAEFIK_EARLY_CUT in (result.error or "") else result for index, result in enumerate(results)]
    return results


def replicas_of(replicas: Replicas, session: str | None) -> set[int]:
    return {record["replica"] for record in replicas.requests() if record["session"] == session}


def test_sessions_keep_their_replica_and_both_serve(proxy: LocalProxy, replicas: Replicas) -> None:
    """Every session's requests (initialize to DELETE) reach one replica, two tool calls each,
    and the sessions of different clients were spread over both replicas (else affinity would be
    vacuous); batches from new addresses until they were, at most ROUNDS."""
    served: set[int] = set()
    for round_ in range(ROUNDS):
        results = sessions(proxy, 10 + round_ * SESSIONS, calls=2)
        for result in results:
            assert result.completed, (result.error, result.statuses)
            assert [call.result is not None for call in result.calls] == [True, True]
            assert ("DELETE", 200) in [(method, status) for method, status, _ in result.responses], result.responses
            where = replicas_of(replicas, result.session_id)
            assert len(where) == 1, (result.session_id, where)
            served |= where
        if served == {0, 1}:
            return
    pytest.fail(f"{ROUNDS * SESSIONS} sessions all reached replica {served}: affinity not shown")


@pytest.mark.parametrize("name", PROXIES)
def test_round_robin_loses_the_sessions(name: ProxyName, replicas: Replicas) -> None:
    """The other direction: the same config without its affinity (`mcp_affinity=False`: the
    proxy's round-robin) lost sessions ("Session not found"), so the test above passes because of
    it. Round-robin per worker (nginx runs two) or at random (Caddy) keeps a session by chance now
    and then (measured: 0 to 2 of 4 kept), so at least one lost is the bar. Lost is the probe's own
    reading (a later request of the session answered 404): a CI run saw a 404 in every session of
    four through nginx, yet each completed, its two tool calls on the right replica by chance."""
    with _on_route(name, replicas, mcp_affinity=False) as plain:
        results = sessions(plain, 70, calls=2)
    lost = [result for result in results if session_lost(result)]
    assert lost, [result.statuses for result in results]
    failed = [result.error for result in lost if not result.completed]
    assert all(NOT_FOUND in (error or "") for error in failed), failed


def test_progress_notifications_arrive_paced(proxy: LocalProxy) -> None:
    """Every notification the tool sent, one at a time as sent: over both calls fewer than
    COALESCED_EVENTS_PER_READ per lump (a lump: a gap under LUMP_GAP_SHARE of the pace; HAProxy
    without http-no-delay gave 4 or 5 per lump, docs/mcp.md), the first of each call ahead of its
    last by most of the tool's work. Pooled over the calls: one stall of the loaded test machine
    (measured once, 212 ms, through Caddy) lumps a few of one call."""
    (result,) = sessions(proxy, 40, count=1, calls=2)
    assert result.completed, (result.error, result.statuses)
    lumps = 0
    for call in result.calls:
        times = call.progress_at_s
        assert len(times) >= DURATION_S / INTERVAL_S - 1, times
        assert times[-1] - times[0] >= DURATION_S / 2, times
        lumps += 1 + sum(gap >= LUMP_GAP_SHARE * INTERVAL_S for gap in call.gaps_s)
    notifications = sum(len(call.progress_at_s) for call in result.calls)
    assert notifications / lumps < COALESCED_EVENTS_PER_READ, [call.gaps_s for call in result.calls]


def test_get_stream_stays_one_across_the_silence(proxy: LocalProxy, replicas: Replicas) -> None:
    """The session idles IDLE_S (pings every PING_S): its standalone GET stream stays one GET
    (no reconnect), and the server notification sent on it meanwhile arrives."""
    (result,) = sessions(proxy, 50, count=1, calls=1, hold_s=IDLE_S)
    assert result.completed and result.reconnects == 0, (result.error, result.responses)
    gets = [record for record in replicas.requests()
            if record["session"] == result.session_id and record["http_method"] == "GET"]
    assert len(gets) == 1, gets
    assert [method for method, _ in result.notifications] == ["notifications/tools/list_changed"]


@pytest.mark.parametrize("file", [name for name in exports() if exports()[name].proxy in PROXIES])
def test_route_limits_are_above_the_sdk_pings(file: str, tmp_path: Path) -> None:
    """verify's reader, on the exported file as users copy it, at `--path /mcp`: it chooses the
    MCP route, and finds nothing that cuts or holds a stream whose longest silence is the SDKs'
    15 s ping interval; asked for a silence above the chat route's SILENCE it does suspect the
    idle limit (so it really read the route's limit, above 15 s), where the proxy has one."""
    export = exports()[file]
    path = tmp_path / file
    path.write_text(export.text())
    reading = read_config(path, export.proxy, RouteWanted(path=MCP_PATH, series=export.series[-1]))
    assert MCP_PATH in reading.route or "mcp" in reading.route, reading.route
    quiet = {found.kind for found in suspicions(reading, Options(max_silence_s=SDK_KEEPALIVE_S * 2))}
    assert not quiet & STREAMING_KINDS, quiet
    loud = {found.kind for found in suspicions(reading, Options(max_silence_s=SILENCE + 1))}
    assert ("idle-timeout" in loud) == (export.proxy not in NO_SILENCE_LIMIT), loud
