"""The table of hostile inputs (tests/reliability/cases.py): each gets a clear answer, and after
each the server still streams to the next client with every gauge back at 0."""
from __future__ import annotations

import pytest

from tests.reliability.cases import CASES, HOLD, SERVE
from tests.reliability.conftest import assert_server_fine, open_and_leave, post, status_of


def test_the_table_is_large_enough() -> None:
    assert len(CASES) >= 60
    assert len({c.id for c in CASES}) == len(CASES), "case ids repeat"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_hostile_input_gets_a_clear_answer_and_hurts_nobody(hardened, case) -> None:
    if case.expect == HOLD:
        seen = open_and_leave(hardened, case.body)
        # Accepted and still running when the client leaves (headers_delay_s holds even the
        # headers; coalescing holds the first frames).
        assert status_of(seen) in (None, 200), seen[:300]
        assert b"[DONE]" not in seen, seen[:300]
    else:
        # Over the body limit, the server answers on the announced length and closes, dropping
        # what still arrives (a lingering close, server/http/lingering.py; a client uploading on is
        # tests/server/test_fast_lane.py's case): here the announcement alone is sent.
        announce = case.expect == 413
        reply = post(hardened, case.body, case.headers, announce_only=announce)
        if case.expect == SERVE:
            assert reply.status == 200, reply.body[:300]
            assert reply.body.rstrip().endswith(b"data: [DONE]"), reply.body[-300:]
        else:
            assert reply.status == case.expect, reply.body[:300]
            assert reply.headers["content-type"].startswith("application/json")
            error = reply.json()["error"]
            assert set(error) == {"message", "type", "param", "code"}
            assert error["message"] and "Traceback" not in error["message"]
    assert_server_fine(hardened)
