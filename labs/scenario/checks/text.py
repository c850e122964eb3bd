"""What the user reads: mojibake, leaked stop text, exact scripts, answers cut short."""
from __future__ import annotations

from labs.scenario.model import Check, Run


def replacement_chars_at_least(count: int = 1) -> Check:
    def measure(run: Run) -> tuple[str, bool]:
        seen = sum(r.replacement_chars for r in run.results)
        return f"{seen} U+FFFD in {len(run.first.text)} characters", seen >= count
    return Check(f"the client renders U+FFFD (>= {count})", measure)


def text_is_script(index: int = 0, script: str | None = None, label: str | None = None) -> Check:
    """Stream `index` delivered exactly `script` (default: the workload's), with no U+FFFD."""
    def measure(run: Run) -> tuple[str, bool]:
        result, expected = run.results[index], script if script is not None else run.knobs["script"]
        shown = f"{result.text!r}" if len(result.text) <= 60 else f"{len(result.text)} characters"
        return (f"{shown}, {result.replacement_chars} U+FFFD, "
                f"{'exact' if result.text == expected else 'differs from ' + repr(expected)}"), (
            result.text == expected)
    return Check(label or "the text is exactly the script, character for character", measure)


def stop_leaked(index: int, stops: str | tuple[str, ...]) -> Check:
    """Part of a stop sequence reached the client in stream `index`."""
    def measure(run: Run) -> tuple[str, bool]:
        result = run.results[index]
        leak = result.stop_leak(stops)
        return f"text {result.text!r}: leaked {leak!r}", leak is not None
    return Check("part of the stop sequence reaches the client", measure)


def no_stop_leak(index: int, stops: str | tuple[str, ...]) -> Check:
    def measure(run: Run) -> tuple[str, bool]:
        result = run.results[index]
        leak = result.stop_leak(stops)
        return f"text {result.text!r}: leaked {leak!r}", leak is None and result.content_events > 0
    return Check("no part of the stop sequence reaches the client", measure)


def text_cut_short() -> Check:
    """Fewer characters than the script arrived: the answer is incomplete whatever the ending said."""
    def measure(run: Run) -> tuple[str, bool]:
        result, script = run.first, run.knobs["script"]
        return f"{len(result.text)} of {len(script)} characters", len(result.text) < len(script)
    return Check("the answer is cut short (less text than the script)", measure)


def resume_joins(index: int) -> Check:
    """Stream 0 was cut short and stream `index` resumed it (a Responses `GET ... starting_after=N`):
    the resumed text starts exactly where the cut one ended, and the two make the whole script."""
    def measure(run: Run) -> tuple[str, bool]:
        cut, resumed, script = run.results[0], run.results[index], run.knobs["script"]
        joined = cut.text + resumed.text
        return (f"{len(cut.text)} + {len(resumed.text)} of {len(script)} characters, resume {resumed.outcome}, "
                f"{'joined exactly' if joined == script else 'joined differs'}"), (
            0 < len(cut.text) < len(script) and joined == script and resumed.outcome == "complete")
    return Check(f"resume {index} continues the cut stream: together exactly the script", measure)
