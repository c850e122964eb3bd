"""The one milliseconds formatter: the figure every report, verdict and table prints, and no
module of labs/ writing its own."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from labs.client.durations import milliseconds

LABS = Path(__file__).resolve().parents[2] / "labs"


@pytest.mark.parametrize(("seconds", "options", "written"), [
    pytest.param(None, {}, "-", id="not-measured"),
    pytest.param(0.0, {}, "0 ms", id="zero"),
    pytest.param(0.0125, {}, "12 ms", id="half-to-even-down"),
    pytest.param(0.0135, {}, "14 ms", id="half-to-even-up"),
    pytest.param(1.2344, {}, "1234 ms", id="verdict-text-ungrouped"),
    pytest.param(1.2344, {"grouped": True}, "1,234 ms", id="report-grouped"),
    pytest.param(1.2344, {"unit": False}, "1234", id="table-cell"),
    pytest.param(0.0034, {"digits": 1}, "3.4 ms", id="one-decimal"),
    pytest.param(0.00012345, {"digits": 3, "unit": False}, "0.123", id="three-decimals"),
    pytest.param(None, {"digits": 2, "unit": False, "grouped": True}, "-", id="not-measured-in-a-table"),
])
def test_seconds_are_written_in_milliseconds(seconds: float | None, options: dict, written: str) -> None:
    assert milliseconds(seconds, **options) == written


# A figure turned from seconds into "... ms" by hand: `{x * 1e3:.0f} ms`, `{1000 * x:,.1f} ms`
# (a proxy's duration syntax, Caddy's "500ms", is a config value, not a figure for people).
BY_HAND = re.compile(r"\{[^{}]*(\* *(1e3|1000(\.0)?)\b|\b(1e3|1000(\.0)?) *\*)[^{}]*:[^{}]*\} ms\b")


def test_no_module_writes_milliseconds_by_hand() -> None:
    found = [f"{path.relative_to(LABS.parent)}:{number}: {line.strip()}"
             for path in sorted(LABS.rglob("*.py"))
             for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if BY_HAND.search(line)]
    assert not found, "write them with labs.client.durations.milliseconds:\n" + "\n".join(found)


def test_the_guard_sees_a_figure_written_by_hand() -> None:
    assert BY_HAND.search('f"TTFT {result.ttft_s * 1e3:.0f} ms"')
    assert BY_HAND.search('f"gap {1e3 * (gap or 0):,.1f} ms"')
    assert not BY_HAND.search('f"TTFT {milliseconds(result.ttft_s)}"')
    assert not BY_HAND.search('f"{s * 1000:g}ms"')
