"""Stop sequences: hold-back never leaks a stop, flushes a partial match; the naive one leaks."""
from __future__ import annotations

import pytest

from server.text.stops import NaiveStopMatcher, NoStops, StopMatcher, stop_handler


def run(matcher, pieces: list[str]) -> tuple[list[str], bool]:
    """Pieces as the client sees them (empty ones dropped), and whether a stop matched."""
    sent = []
    for piece in pieces:
        out = matcher.push(piece)
        if out:
            sent.append(out)
        if matcher.stopped:
            break
    tail = matcher.flush()
    if tail:
        sent.append(tail)
    return sent, matcher.stopped


CASES = [
    pytest.param(["Hello", " wor", "ld"], ["\n\nUser:"], "Hello world", False, id="no-match"),
    pytest.param(["Hi", "\n", "\nU", "ser", ":", " more"], ["\n\nUser:"], "Hi", True,
                 id="multi-token-stop"),
    pytest.param(["abcSTOPdef"], ["STOP"], "abc", True, id="stop-inside-one-piece"),
    pytest.param(["ab", "c\n", "\nUs"], ["\n\nUser:"], "abc\n\nUs", False,
                 id="partial-match-at-end-flushed"),
    pytest.param(["x", "ab", "ab", "abc"], ["ababc"], "xab", True, id="overlapping-prefix"),
    pytest.param(["aa", "a", "b"], ["aab"], "a", True, id="self-overlapping-prefix"),
    pytest.param(["one ", "tw", "o three"], ["three", "two"], "one ", True,
                 id="earliest-of-several"),
    pytest.param(["EN", "D!", "x"], ["END", "ND!"], "", True, id="first-stop-wins"),
    pytest.param(["🦩", "🧑🏿‍", "🚀"], ["🧑🏿‍🚀"], "🦩", True, id="emoji-stop"),
    pytest.param(["<", "<x"], ["<<<"], "<<x", False, id="prefix-then-ruled-out"),
]


@pytest.mark.parametrize(("pieces", "stops", "expected", "stopped"), CASES)
def test_holdback_sends_exactly_the_text_before_the_stop(pieces, stops, expected, stopped):
    sent, matched = run(StopMatcher(stops), pieces)
    assert "".join(sent) == expected
    assert matched is stopped
    if stopped:
        for stop in stops:
            # No piece, nor any concatenation of what was sent, contains a stop's beginning past
            # the expected text.
            assert stop not in "".join(sent)


def test_holdback_never_sends_any_part_of_a_multi_token_stop():
    stop = "<|end|>"
    pieces = ["answer", " is", " 4", "<", "|", "end", "|", ">", "junk"]
    sent, stopped = run(StopMatcher([stop]), pieces)
    assert stopped
    assert sent == ["answer", " is", " 4"]
    assert not any(ch in "".join(sent) for ch in "<|>")


def test_holdback_releases_as_soon_as_the_stop_is_ruled_out():
    matcher = StopMatcher(["STOP"])
    assert matcher.push("ST") == ""
    assert matcher.push("ATION") == "STATION"


def test_naive_leaks_the_beginning_of_a_stop():
    sent, stopped = run(NaiveStopMatcher(["<|end|>"]), ["4", "<", "|", "end", "|", ">", "junk"])
    assert stopped
    assert "".join(sent).startswith("4<|end")  # the failure the lab shows


def test_naive_cuts_a_stop_that_completes_inside_one_piece():
    sent, stopped = run(NaiveStopMatcher(["STOP"]), ["abcSTOPdef"])
    assert (sent, stopped) == (["abc"], True)


def test_no_stops_is_a_pass_through():
    handler = stop_handler([])
    assert isinstance(handler, NoStops)
    assert handler.push("abc") == "abc" and handler.flush() == "" and not handler.stopped


def test_factory_picks_holdback_or_naive():
    assert isinstance(stop_handler(["x"]), StopMatcher)
    assert isinstance(stop_handler(["x"], holdback=False), NaiveStopMatcher)


def test_after_a_stop_nothing_more_is_sent():
    matcher = StopMatcher(["x"])
    assert matcher.push("axb") == "a"
    assert matcher.push("more") == "" and matcher.flush() == ""
