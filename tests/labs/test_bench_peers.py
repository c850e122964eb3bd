"""`make bench-peers`: the peers' output parsers on trimmed real outputs, the side-by-side table
with a peer missing, the process-tree CPU measurement and the commands each peer gets.

The fixtures in tests/data/peers/ are trimmed from one real run here (5 streams, 10 requests,
the synthetic server at 200 ms to the first token and 20 tokens at 20 tok/s): AIPerf 0.13.0's
profile_export_aiperf.json, guidellm 0.8.1's benchmarks.json, the lab client's JSON. The real
peer run is `make bench-peers` (big installs), never part of `make test`.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from labs.bench.peers import compare as peers
from labs.bench.peers import aiperf as peer_aiperf
from labs.bench.peers import guidellm as peer_guidellm
from labs.bench.peers import lab as peer_lab
from labs.bench.peers import install as peers_install
from labs.bench.peers.figures import Figures
from labs.bench.peers.table import ToolRun, markdown, missing_lines, table
from labs.bench.tree_cpu import run_tree

DATA = Path(__file__).resolve().parents[1] / "data" / "peers"


def test_aiperf_export_parsed_in_seconds_with_its_own_counts() -> None:
    figures = peer_aiperf.parse(DATA / "aiperf-5-streams.json")
    assert (figures.requests, figures.failed) == (10, 0)
    # AIPerf writes milliseconds; the figures are seconds.
    assert figures.ttft_mean_s == pytest.approx(0.2178677416)
    assert figures.ttft_p50_s == pytest.approx(0.2163886015)
    assert figures.ttft_p99_s == pytest.approx(0.22950141512)
    assert figures.itl_mean_s == pytest.approx(0.05030816953157895)  # per request (E2E-TTFT)/(OSL-1)
    assert figures.gap_p99_s == pytest.approx(0.06307504096999991)  # inter_chunk_latency: single gaps
    assert figures.e2e_mean_s == pytest.approx(1.1737229627)
    assert (figures.output_tokens, figures.usage_tokens) == (200, 200)
    # The 10 flagged requests differ in prompt tokens only (the chat template), not completion.
    assert len(figures.notes) == 1 and "prompt tokens by 69%" in figures.notes[0]
    assert "completion tokens by 0%" in figures.notes[0]


def test_aiperf_parser_refuses_what_is_not_its_export(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="AIPerf wrote no profile_export_aiperf.json"):
        peer_aiperf.parse(tmp_path)
    (tmp_path / peer_aiperf.EXPORT).write_text(json.dumps({"benchmarks": []}))
    with pytest.raises(ValueError, match="not an AIPerf profile export"):
        peer_aiperf.parse(tmp_path)
    bad_unit = json.loads((DATA / "aiperf-5-streams.json").read_text())
    bad_unit["time_to_first_token"]["unit"] = "fortnights"
    (tmp_path / peer_aiperf.EXPORT).write_text(json.dumps(bad_unit))
    with pytest.raises(ValueError, match="unexpected time unit 'fortnights'"):
        peer_aiperf.parse(tmp_path)


def test_guidellm_benchmarks_parsed_with_no_single_gaps() -> None:
    figures = peer_guidellm.parse(DATA / "guidellm-5-streams.json")
    assert (figures.requests, figures.failed) == (10, 0)
    assert figures.ttft_mean_s == pytest.approx(0.22175869941711426)
    assert figures.ttft_p99_s == pytest.approx(0.235443115234375)
    assert figures.e2e_mean_s == pytest.approx(1.174405837059021)  # request_latency is in seconds
    assert figures.itl_mean_s == pytest.approx(0.05, abs=0.002)
    assert figures.gap_p99_s is None  # guidellm keeps only the first and last token times
    assert (figures.output_tokens, figures.usage_tokens) == (200, 200)


def test_guidellm_parser_wants_exactly_one_benchmark(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="guidellm wrote no benchmarks.json"):
        peer_guidellm.parse(tmp_path)
    (tmp_path / peer_guidellm.EXPORT).write_text(json.dumps({"benchmarks": []}))
    with pytest.raises(ValueError, match="expected one benchmark, found 0"):
        peer_guidellm.parse(tmp_path)


def test_lab_client_file_parsed() -> None:
    figures = peer_lab.parse(DATA / "lab-5-streams.json")
    assert (figures.requests, figures.failed) == (10, 0)
    assert figures.ttft_p50_s == pytest.approx(0.2019432550005149)
    assert figures.gap_p99_s == pytest.approx(0.057001752000360284)
    assert (figures.output_tokens, figures.usage_tokens) == (200, 200)


def _result(streams: list[int]) -> dict:
    return {"command": "python -m labs.bench.peers", "wall_s": 1.0,
            "setup": {"engine": "synthetic", "server_args": "--engine synthetic", "lab_shown": "{}",
                      "first_token_delay_s": 0.2, "tokens": 20, "tokens_per_s": 20.0, "ideal_ttft_s": 0.2,
                      "ideal_e2e_s": 1.15, "streams": streams, "requests": {str(s): 10 for s in streams}}}


def test_table_keeps_a_missing_peers_column_and_says_why() -> None:
    lab = ToolRun("lab", 1, figures=peer_lab.parse(DATA / "lab-5-streams.json"), cpu_s=0.2, wall_s=2.0,
                  processes=1, server={"requests": 10.0, "tokens": 200.0, "ttft_mean_s": 0.2018})
    failed = ToolRun("aiperf", 1, missing="install failed: pip exited 1")
    header, rows = table([lab, failed], 1)
    assert header == ["metric", "lab client", "AIPerf 0.13.0", "guidellm 0.8.1"]
    cells = {row[0]: row[1:] for row in rows}
    assert cells["TTFT p50 (ms)"] == ["201.9", "n/a", "n/a"]
    assert cells["server: TTFT mean (ms) over the run"][0] == "201.8"
    assert cells["server: tokens / request over the run"][0] == "20.00 (10 requests)"
    assert cells["TTFT mean minus the server's (ms)"] == ["+2.1", "n/a", "n/a"]
    assert cells["tool CPU s (% of one core)"][0] == "0.20 (10%)"
    lines = missing_lines([lab, failed])
    assert lines == ["- AIPerf 0.13.0 at 1 stream: **no figures** (install failed: pip exited 1)"]
    text = markdown(_result([1]), [lab, failed])
    assert "**no figures** (install failed: pip exited 1)" in text
    assert "| TTFT p50 (ms) | 201.9 | n/a | n/a |" in text  # guidellm was not run at all


def test_a_peer_that_failed_to_install_is_reported_not_run(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(peer: peers_install.Peer) -> None:
        raise RuntimeError(f"pip install {peer.pin} failed with status 1")

    monkeypatch.setattr(peers_install, "install", broken)
    missing = peers_install.install_all(["guidellm"])
    assert missing == {"guidellm": "install failed: pip install guidellm==0.8.1 failed with status 1"}
    # No server is touched for a missing peer: the run only carries the reason.
    run = peers.run_tool("guidellm", 50, 200, server=None, model="tiny", out=Path("unused"), missing=missing)
    assert run.figures is None and run.missing == missing["guidellm"]


def test_server_delta_is_the_servers_own_ttft_over_one_run() -> None:
    keys = peers.SERVER_KEYS
    before = {keys["ttft_sum"]: 1.0, keys["ttft_count"]: 5, keys["tokens"]: 100, keys["requests"]: 5}
    after = {keys["ttft_sum"]: 3.0, keys["ttft_count"]: 15, keys["tokens"]: 300, keys["requests"]: 15}
    assert peers.server_delta(before, after) == {"requests": 10, "tokens": 200, "ttft_count": 10,
                                                 "ttft_mean_s": pytest.approx(0.2)}
    assert peers.server_delta(after, after)["ttft_mean_s"] is None


BURN = "import time\nend = time.process_time() + 0.25\nwhile time.process_time() < end: pass\n"


def test_tree_cpu_counts_the_grandchildren(tmp_path: Path) -> None:
    # A parent that burns 0.25 s of CPU and starts a child that burns another 0.25 s: the
    # parent alone would read ~0.25 s, the tree reads both.
    script = ("import subprocess, sys\n" + BURN +
              f"subprocess.run([sys.executable, '-c', {BURN!r}], check=True)\n")
    run = run_tree([sys.executable, "-c", script], env={}, cwd=tmp_path, log=tmp_path / "log",
                   timeout_s=60)
    assert run.returncode == 0 and not run.timed_out
    assert run.cpu_s >= 0.45
    assert run.cpu_s < run.wall_s + 1  # one core at most, sequentially


def test_tree_cpu_stops_a_tool_past_its_time(tmp_path: Path) -> None:
    run = run_tree([sys.executable, "-c", "import time; time.sleep(600)"], env={}, cwd=tmp_path,
                   log=tmp_path / "log", timeout_s=0.5)
    assert run.timed_out and run.returncode != 0
    assert run.wall_s < 30


def test_each_peer_gets_the_lab_object_through_its_own_option(tmp_path: Path) -> None:
    lab = peers.lab_object()
    assert lab["first_token_delay_s"] == 0.2 and lab["tokens_per_s"] == 20.0
    argv = peer_aiperf.command(Path("aiperf"), "http://127.0.0.1:1", "tiny", 50, 200, lab, 20, 16, tmp_path)
    assert json.loads(argv[argv.index("--extra-inputs") + 1]) == {"lab": lab}
    assert argv[argv.index("--concurrency") + 1] == "50" and argv[argv.index("--request-count") + 1] == "200"
    argv = peer_guidellm.command(Path("guidellm"), "http://127.0.0.1:1", "tiny", 50, 200, lab, 20, 16,
                                 tmp_path / "model", tmp_path)
    backend = json.loads(argv[argv.index("--backend") + 1])
    assert backend["extras"] == {"body": {"lab": lab}} and backend["target"] == "http://127.0.0.1:1"
    assert json.loads(argv[argv.index("--profile") + 1]) == {"kind": "concurrent", "streams": [50]}
    assert json.loads(argv[argv.index("--constraint") + 1]) == {"kind": "max_requests", "count": 200}


def test_aiperf_gets_the_lab_tokenizer_as_a_cached_hub_snapshot(tmp_path: Path) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "tokenizer.json").write_text("{}")
    (model / "tokenizer_config.json").write_text("{}")
    cache = peer_aiperf.hub_cache(model, tmp_path / "hub")
    repo = cache / "models--streamlab--tiny"
    assert (repo / "refs" / "main").read_text() == peer_aiperf.SNAPSHOT
    assert sorted(p.name for p in (repo / "snapshots" / peer_aiperf.SNAPSHOT).iterdir()) == [
        "tokenizer.json", "tokenizer_config.json"]
    with pytest.raises(FileNotFoundError, match="has no tokenizer.json"):
        peer_aiperf.hub_cache(tmp_path / "empty", tmp_path / "hub2")


def test_figures_default_to_not_reported() -> None:
    figures = Figures(requests=0, failed=3)
    header, rows = table([ToolRun("lab", 1, figures=figures)], 1)
    assert dict((row[0], row[1]) for row in rows)["TTFT mean (ms)"] == "-"


class FakeServer:
    url = "http://127.0.0.1:9"

    def metrics(self) -> dict[str, float]:
        return {}


def test_a_tool_that_fails_or_writes_nothing_has_its_reason_in_the_report(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def plan(argv: list[str]):
        return lambda tool, url, model, streams, requests, out_dir: (argv, peer_guidellm.parse)

    monkeypatch.setattr(peers, "_plan", plan([sys.executable, "-c", "print('no such model'); raise SystemExit(3)"]))
    run = peers.run_tool("guidellm", 1, 3, FakeServer(), "tiny", tmp_path, missing={})
    assert run.figures is None and run.missing.startswith("exited 3;")
    assert "no such model" in run.missing  # the end of the tool's own log
    assert run.cpu_s is not None and run.processes >= 1

    monkeypatch.setattr(peers, "_plan", plan([sys.executable, "-c", "pass"]))
    run = peers.run_tool("guidellm", 1, 3, FakeServer(), "tiny", tmp_path, missing={})
    assert run.missing.startswith("its output could not be read: FileNotFoundError: guidellm wrote no "
                                  "benchmarks.json")
