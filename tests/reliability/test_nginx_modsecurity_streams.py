"""Guard: nginx's ModSecurity v3 connector does not hold an event stream it inspects (docs/proxies.md,
"A WAF in front"; mod_security2 on Apache does, waf-body-inspection). Each release the lab runs,
with its own module, `text/event-stream` in SecResponseBodyMimeType and the 4 KiB limit the stream
outgrows: the events come as they are made, and the connector really read the body (its log-only
phase-4 rule is in nginx's error.log). A blocking response rule comes too late: every byte has
gone out, then nginx cuts the chunked body. The day either stops being true, this fails."""
from __future__ import annotations

import os
import shutil

import pytest

from labs.scenario.runner import Lab
from proxies.kinds import KINDS
from tests.reliability.modsecurity_nginx import MODULE, READ_RESPONSE_RULE, Case, Outcome, run_case

TOKENS, TOKENS_PER_S = 20, 20  # a 1 s stream of ~5.7 KB, past the 4 KiB limit
LIMIT = 4096
LOGGED = f'[id "{READ_RESPONSE_RULE}"]'


def _nginx_and_module(series: str) -> tuple[str, str]:
    """The release's nginx and its own module (one built for another nginx does not load), or skip."""
    [release] = [r for r in KINDS["nginx"].releases if r.series == series]
    if release.unpacked:
        binary, module = release.program("nginx"), str(release.in_root(MODULE))
    else:
        binary, module = shutil.which("nginx"), MODULE
    if binary is None or not os.path.isfile(module):
        pytest.skip(f"nginx {release.label} or its libnginx-mod-http-modsecurity is not installed here")
    return binary, module


@pytest.fixture(scope="module")
def upstream():
    with Lab() as lab:
        args = ("--engine", "synthetic")
        yield lab.server(args).port, lab.model_name(args)


def _streamed(outcome: Outcome) -> bool:
    """The first byte came in the stream's first half and the events in many reads (held: one, at the end)."""
    return (outcome.first_byte_s is not None and outcome.first_byte_s < outcome.total_s / 2
            and outcome.reads >= TOKENS // 2)


SERIES = [release.series for release in KINDS["nginx"].releases]


@pytest.mark.parametrize("series", SERIES)
@pytest.mark.parametrize("action", ["ProcessPartial", "Reject"])
def test_the_connector_inspects_the_stream_and_passes_it_on(series, action, upstream):
    nginx, module = _nginx_and_module(series)
    outcome = run_case(nginx, module, Case("On", LIMIT, action, "pass"), *upstream, TOKENS, TOKENS_PER_S)
    assert LOGGED in outcome.error_log, "the precondition: the connector read the response body"
    assert outcome.size > LIMIT, "the precondition: the stream outgrew SecResponseBodyLimit"
    assert outcome.status == 200 and _streamed(outcome), outcome
    # Reject does not cut it either: the connector judges the limit after the body has gone out.
    assert outcome.done_seen and not outcome.cut, outcome


@pytest.mark.parametrize("series", SERIES)
def test_a_blocking_response_rule_comes_after_the_stream(series, upstream):
    nginx, module = _nginx_and_module(series)
    outcome = run_case(nginx, module, Case("On", 1 << 20, "ProcessPartial", "deny,status:403"), *upstream,
                       TOKENS, TOKENS_PER_S)
    assert "Access denied with code 403 (phase 4)" in outcome.error_log, "the precondition: the rule blocked"
    assert outcome.status == 200 and _streamed(outcome) and outcome.done_seen, outcome
    assert outcome.cut, "the block ends the connection without the last chunk"
