"""Each knob is declared once (server/knobs.py); the schema, the flags and the settings honour
that declaration: its range at both ends, its default, its "0 = off"."""
from __future__ import annotations

import pytest
from pydantic import ValidationError

from server.__main__ import parse_args
from server.config import StreamSettings
from server.apis.lab import LabOptions
from server.knobs import KNOBS, STREAM_KNOBS

NUMERIC = [k for k in KNOBS if k.kind in ("float", "int")]


def edges(knob):
    """(accepted, refused) values at both ends of the knob's range."""
    low = knob.smallest_on if knob.smallest_on is not None else knob.minimum
    step = 1 if knob.kind == "int" else max(abs(low) * 1e-6, 1e-9) if low else 1e-9
    accepted = [low, knob.maximum] + ([0] if knob.off_at_zero else [])
    refused = [low - step, knob.maximum + (1 if knob.kind == "int" else knob.maximum * 1e-9)]
    if knob.kind == "int":
        accepted, refused = [int(v) for v in accepted], [int(v) for v in refused]
    return accepted, refused


@pytest.mark.parametrize("knob", NUMERIC, ids=[k.name for k in NUMERIC])
def test_the_lab_schema_honours_each_range_at_both_ends(knob) -> None:
    accepted, refused = edges(knob)
    for value in accepted:
        assert getattr(LabOptions.model_validate({knob.name: value}), knob.name) == value
    for value in refused:
        with pytest.raises(ValidationError) as caught:
            LabOptions.model_validate({knob.name: value})
        assert caught.value.errors()[0]["loc"] == (knob.name,)
    if knob.kind == "float":
        for value in (float("nan"), float("inf")):
            with pytest.raises(ValidationError):
                LabOptions.model_validate({knob.name: value})


FLAGGED_NUMERIC = [k for k in STREAM_KNOBS if k.kind in ("float", "int")]


@pytest.mark.parametrize("knob", FLAGGED_NUMERIC, ids=[k.name for k in FLAGGED_NUMERIC])
def test_the_server_flag_honours_the_same_range(knob) -> None:
    accepted, refused = edges(knob)
    for value in accepted:
        parse_args([knob.cli, repr(value)])
    for value in refused:
        with pytest.raises(SystemExit):
            parse_args([knob.cli, repr(value)])


def test_every_per_stream_knob_is_a_setting_a_flag_and_an_override() -> None:
    defaults = parse_args([]).stream
    assert defaults == StreamSettings()
    for knob in STREAM_KNOBS:
        assert knob.name in LabOptions.model_fields
        assert hasattr(defaults, knob.name)
    lab = LabOptions.model_validate({"heartbeat_s": 0, "stall_timeout_s": None,
                                     "omit_headers": ["Cache-Control"], "detokenizer": None})
    merged = defaults.merged(lab.stream_overrides())
    # A timer's 0 or null switches it off; null for anything else keeps the server's flag.
    assert merged.heartbeat_s is None and merged.stall_timeout_s is None
    assert merged.omit_headers == frozenset({"cache-control"})
    assert merged.detokenizer == defaults.detokenizer


def test_flags_set_the_server_wide_defaults() -> None:
    stream = parse_args(["--heartbeat-s", "0", "--no-stop-holdback", "--omit-header",
                         "X-Accel-Buffering", "--stall-timeout-s", "2.5"]).stream
    assert stream.heartbeat_s is None and stream.stop_holdback is False
    assert stream.omit_headers == frozenset({"x-accel-buffering"})
    assert stream.stall_timeout_s == 2.5
