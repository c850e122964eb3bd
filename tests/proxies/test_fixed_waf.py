"""The fixed Apache config's WAF block (ModSecurity 2 + the OWASP core rule set, off as exported:
`modsecurity_switchable`), switched on and run with Debian's module and rules in front of the lab
server: the stream still streams as with the block off, and the WAF really inspects: its log-only
rule reads a JSON answer, and a rule-set rule refuses an attack-looking request with 403, both in
its audit log."""
from __future__ import annotations

import os
import re
import shutil
from typing import Any, Iterator

import httpx
import pytest

from labs.catalogue import waf
from labs.client.results import StreamResult
from proxies.apache import fixed as fixed_apache
from proxies.apache.settings import MODULES_DIR, ApacheSettings
from proxies.export import FIXED_DIR
from proxies.runtime.local import LocalProxy, run_proxy
from server.processes import wait_until
from tests.reliability.proxy_faults import fixed, running_server
from tests.runtimes import stream

pytestmark = pytest.mark.skipif(
    shutil.which("apache2") is None or not os.path.exists(f"{MODULES_DIR}/mod_security2.so")
    or not os.path.exists(ApacheSettings.crs_setup),
    reason="apache2, libapache2-mod-security2 or modsecurity-crs is not installed (python -m labs setup waf-body-inspection)")

TOKENS, TOKENS_PER_S = 12, 10  # the stream's pacing: a token every 0.1 s, 1.2 s in all
INTERVAL = 1 / TOKENS_PER_S
CHAT: dict[str, Any] = {"model": "tiny", "stream": True, "max_tokens": TOKENS, "lab": {"tokens_per_s": TOKENS_PER_S},
                        "messages": [{"role": "user", "content": "Tell me a story."}]}
# What the rule set at paranoia level 1 refuses in the request phase (941100 and friends: XSS).
ATTACK = "/v1/models?q=<script>alert(1)</script>"
RECORD = re.compile(r"^--[0-9a-f]+-A--$", re.M)


@pytest.fixture(scope="module")
def server_port() -> Iterator[int]:
    with running_server() as handle:
        yield handle.port


def waf_on(server_port: int, **changes: Any):
    """The fixed config with its WAF block switched on (what uncommenting its LoadModule lines does)."""
    return run_proxy(fixed("apache", server_port, modsecurity_switchable=False, **changes))


def audit_records(proxy: LocalProxy, uri: str) -> list[str]:
    """The audit log's records (one per transaction) of requests to `uri`."""
    text = (proxy.workdir / "audit.log").read_text() if (proxy.workdir / "audit.log").exists() else ""
    return [record for record in RECORD.split(text) if f" {uri}" in record]


def rules_in(records: list[str]) -> set[str]:
    return {rule for record in records for rule in re.findall(r'\[id "(\d+)"\]', record)}


def test_the_exported_block_is_off_and_says_how_to_switch_it_on() -> None:
    text = (FIXED_DIR / "apache.conf").read_text()
    assert "\n# LoadModule security2_module" in text and "\nLoadModule security2_module" not in text
    inspected = re.search(r"^\s*SecResponseBodyMimeType\s+(.*)$", text, re.M).group(1).split()
    assert "text/event-stream" not in inspected and "application/json" in inspected
    assert "<IfModule security2_module>" in text and "SecRequestBodyNoFilesLimit       8388608" in text


# The block off, on as exported, and on with text/event-stream listed (the guard's other direction).
RUNS = {"off": {"modsecurity_switchable": True}, "on": {"modsecurity_switchable": False},
        "sse listed": {"modsecurity_switchable": False, "modsecurity_response_body_mime_types": (
            *fixed_apache.WAF_INSPECTED_TYPES, "text/event-stream")}}


def test_the_stream_streams_through_the_switched_on_waf(server_port: int) -> None:
    results: dict[str, StreamResult] = {}
    for label, changes in RUNS.items():
        with run_proxy(fixed("apache", server_port, modsecurity_lab_rules=True, **changes)) as proxy:
            results[label] = stream(proxy.url + "/v1/chat/completions", CHAT)
            if label == "on":
                # The precondition: the WAF ran on this stream (it read the prompt, 9001), and did
                # not read the streamed answer (9002 silent: text/event-stream is not listed).
                uri = "/v1/chat/completions"
                wait_until(lambda: str(waf.READ_REQUEST_RULE) in rules_in(audit_records(proxy, uri)),
                           timeout_s=5, describe="ModSecurity logged its read of the prompt")
                assert str(waf.READ_RESPONSE_RULE) not in rules_in(audit_records(proxy, uri))
    off, on, held = results["off"], results["on"], results["sse listed"]
    print(*(f"{label}: TTFT {r.ttft_s * 1000:.0f} ms, {r.bursts} reads" for label, r in results.items()), sep="; ")
    for result in results.values():
        assert result.saw_done and result.ttft_s is not None
    # Listed, the stream is held to its end: the first token comes with the last (its bytes may
    # still take several reads).
    assert held.ttft_s > (TOKENS - 2) * INTERVAL and held.e2e_s - held.ttft_s < 2 * INTERVAL, (held.ttft_s, held.e2e_s)
    # Held, the first token would come with the last, (TOKENS - 1) intervals late, in one read:
    # margins of half that, so a loaded machine's coalesced reads pass and a held stream does not.
    assert on.ttft_s < off.ttft_s + TOKENS * INTERVAL / 2, (on.ttft_s, off.ttft_s)
    assert on.e2e_s - on.ttft_s > (TOKENS - 3) * INTERVAL, (on.ttft_s, on.e2e_s)  # tokens spread as paced
    assert on.bursts >= min(off.bursts, TOKENS) // 2, (on.bursts, off.bursts)


def test_the_switched_on_waf_reads_a_json_answer_and_refuses_an_attack(server_port: int) -> None:
    with waf_on(server_port, modsecurity_lab_rules=True) as proxy:
        answer = httpx.post(proxy.url + "/v1/chat/completions", json={**CHAT, "stream": False}, timeout=30)
        # A 2 MB JSON prompt, above ModSecurity's default 1 MiB (SecRequestBodyNoFilesLimit: 413 from
        # Apache, measured), reaches the server, whose own answer is that it is too long for the model.
        long_prompt = {**CHAT, "stream": False, "messages": [{"role": "user", "content": "story " * 350_000}]}
        too_long = httpx.post(proxy.url + "/v1/chat/completions", json=long_prompt, timeout=30)
        assert too_long.json()["error"]["code"] == "context_length_exceeded", too_long.text
        refused = httpx.get(proxy.url + ATTACK, timeout=10)
        assert answer.status_code == 200 and answer.headers["content-type"].startswith("application/json")
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden"
        # The log-only rule read the JSON answer's body; the attack met the rule set (949110: the
        # anomaly score refused it in the request phase).
        wait_until(lambda: str(waf.READ_RESPONSE_RULE) in rules_in(audit_records(proxy, "/v1/chat/completions")),
                   timeout_s=5, describe="ModSecurity logged its read of the JSON answer")
        wait_until(lambda: "949110" in rules_in(audit_records(proxy, "/v1/models?q=")),
                   timeout_s=5, describe="the rule set's refusal in the audit log")
        blocked = audit_records(proxy, "/v1/models?q=")
        assert any("Access denied with code 403 (phase 2)" in record for record in blocked), blocked
        assert any(rule.startswith("941") for rule in rules_in(blocked)), rules_in(blocked)
