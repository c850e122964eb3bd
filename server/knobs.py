"""Every knob a request's `lab` object may set, declared once.

A knob is either a per-stream setting (a server-wide `--flag` whose default a request may override
in `lab`, e.g. `heartbeat_s`) or a request-only lab field (pacing and injected faults, e.g.
`tokens_per_s`). From each declaration come: the `lab` schema field (server/apis/lab.py), the
`StreamSettings` field (server/config.py), the server flag (server/__main__.py) and the knob
table in docs/server.md (`python -m server.knobs --write`; a test keeps it in sync).

Ranges are part of the declaration and are what the server can honour: every wait stays within
`MAX_WAIT_S`, every rate gives a period within it, every token count within `MAX_TOKENS`.
"""
from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Literal, Mapping

# The longest silence a knob may ask for: a day (pause_s, delays, timers).
MAX_WAIT_S = 86_400.0
# Token positions a count may name; far above any context, far below where arithmetic misbehaves.
MAX_TOKENS = 1_000_000

# The headers a streaming response carries, each switchable off (`nginx-accel-header` needs
# X-Accel-Buffering missing). Lower-case: that is how they go on the wire and how they are named.
STREAMING_HEADER_NAMES: tuple[str, ...] = ("content-type", "cache-control", "x-accel-buffering")

KnobKind = Literal["float", "int", "bool", "str", "choice", "names"]


@dataclass(frozen=True)
class Knob:
    name: str
    kind: KnobKind
    default: Any
    help: str
    # Numbers: the inclusive range (a rate's minimum is above 0, so that its period is finite).
    minimum: float | None = None
    maximum: float | None = None
    # Timers: 0 (or null in `lab`) switches it off; a value that is on must be at least this.
    off_at_zero: bool = False
    smallest_on: float | None = None
    choices: tuple[str, ...] = ()  # "choice": one of them; "names": a list of them
    # True: a server-wide flag (`--name-with-dashes`) and a per-stream setting a request may
    # override in `lab`. False: a per-request `lab` field only.
    flag: bool = False
    flag_name: str | None = None  # when the flag is not `--<name>` (e.g. `--omit-header NAME`)

    @property
    def cli(self) -> str:
        if self.flag_name:
            return self.flag_name
        dashed = self.name.replace("_", "-")
        if self.kind == "bool" and self.default is True:
            return f"--no-{dashed}"
        return f"--{dashed}"

    def check(self, value: Any) -> Any:
        """`value` if this knob accepts it, else ValueError saying what it accepts."""
        if self.kind == "choice":
            if value not in self.choices:
                raise ValueError(f"must be one of {', '.join(self.choices)}")
            return value
        if self.kind == "names":
            for name in value or ():
                if str(name).lower() not in self.choices:
                    raise ValueError(f"{name!r} is not one of {', '.join(self.choices)}")
            return value
        if self.kind not in ("float", "int") or value is None:
            return value
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError("must be a finite number")
        if self.off_at_zero and value == 0:
            return value
        low = self.smallest_on if self.smallest_on is not None else self.minimum
        if low is not None and value < low:
            raise ValueError(f"must be {self.range_text()}")
        if self.maximum is not None and value > self.maximum:
            raise ValueError(f"must be {self.range_text()}")
        return value

    def range_text(self) -> str:
        if self.kind == "choice":
            return "one of " + ", ".join(f"`{c}`" for c in self.choices)
        if self.kind == "names":
            return "a list of " + ", ".join(f"`{c}`" for c in self.choices)
        if self.kind == "bool":
            return "true, false"
        if self.kind == "str":
            return "text"
        low = self.smallest_on if self.smallest_on is not None else self.minimum
        text = f"{_num(low)} to {_num(self.maximum)}"
        return f"0 (off) or {text}" if self.off_at_zero else text


def _num(value: float | None) -> str:
    if value is None:
        return "any"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:g}"


def _seconds(name: str, help: str, **extra: Any) -> Knob:
    return Knob(name, "float", 0.0, help, minimum=0.0, maximum=MAX_WAIT_S, **extra)


def _count(name: str, help: str) -> Knob:
    return Knob(name, "int", None, help, minimum=0, maximum=MAX_TOKENS)


KNOBS: tuple[Knob, ...] = (
    # Per-request lab fields: what the model emits and when, and injected faults.
    Knob("script", "str", None, "exact text to emit (teacher-forced: one real forward pass per "
         "token)"),
    Knob("tokens_per_s", "float", None, "pacing of emitted tokens (each computed when due); "
         "unset = as fast as the engine goes", minimum=0.001, maximum=1_000_000.0),
    _seconds("headers_delay_s", "silence before the response headers (the request waits, then "
             "is admitted)"),
    _seconds("first_token_delay_s", "silence after the headers and the role chunk, before the "
             "first token"),
    _count("pause_after_tokens", "one silence of `pause_s` after this many tokens"),
    _seconds("pause_s", "the length of that silence"),
    _count("error_after_tokens", "fail after this many tokens (an in-band error, or per "
           "`error_mode`)"),
    _count("abort_after_tokens", "drop the connection after this many tokens: no final chunk, no "
           "[DONE], no end of the chunked body"),
    Knob("stamp", "bool", False, "add `sent_at` (the server's wall clock at the write) to every "
         "data chunk"),
    Knob("pad_bytes", "int", 0, "add a `pad` field of this many bytes to the role chunk and every content chunk "
         "(large events, as tool-call arguments or images make them)", minimum=0,
         maximum=1_048_576),
    # Per-stream settings: a server-wide flag, overridable per request.
    Knob("detokenizer", "choice", "incremental", "`naive` decodes each token alone: U+FFFD "
         "wherever a character spans tokens", choices=("incremental", "naive"), flag=True),
    Knob("stop_holdback", "bool", True, "off: stop strings are checked after the text left, so "
         "a stop's beginning leaks", flag=True),
    Knob("disconnect", "choice", "abort", "`ignore`: the client's departure goes unnoticed; "
         "generation runs to the end for nobody", choices=("abort", "ignore"), flag=True),
    Knob("heartbeat_s", "float", 10.0, "an SSE comment `: ping` after this much silence",
         minimum=0.0, maximum=MAX_WAIT_S, off_at_zero=True, smallest_on=0.01, flag=True),
    Knob("error_mode", "choice", "inband", "how a failure after the first byte reaches the "
         "client: the protocol's in-band error and its end (chat: then [DONE]), a clean end "
         "without it, a fake success, or `hold-open`: the error event, then the socket held open "
         "and silent until the client leaves (a client that waits for the close waits for its "
         "idle timeout)", choices=("inband", "silent-close", "fake-done", "hold-open"), flag=True),
    Knob("coalesce_ms", "float", 0.0, "frames made within this window leave in one write; 0 = "
         "one write per frame", minimum=0.0, maximum=10_000.0, flag=True),
    Knob("omit_headers", "names", (), "streaming headers left out of the response",
         choices=STREAMING_HEADER_NAMES, flag=True, flag_name="--omit-header"),
    Knob("no_transform", "bool", False, "`Cache-Control: no-cache, no-transform`: hops that honour "
         "it leave the stream as it is (the `compression` middleware of Express and "
         "webpack-dev-server skips it); off by default, so a hop that compresses a stream shows it",
         flag=True),
    Knob("event_ids", "bool", False, "an `id:` line on every data frame, and a request carrying "
         "`Last-Event-ID: N` resumes after frame N (EventSource reconnects exactly)", flag=True),
    Knob("split_utf8_ms", "float", 0.0, "a frame holding a multi-byte character leaves in two "
         "writes this far apart, split inside the character (a hop that re-chunks); 0 = off",
         minimum=0.0, maximum=10_000.0, flag=True),
    Knob("role_chunk", "choice", "at-headers", "when the first data frame (the `role` chunk) "
         "leaves: with the headers, or with the first token as vLLM sends it (the headers then "
         "stand alone through the prefill)", choices=("at-headers", "with-first-token"), flag=True),
    Knob("hello", "bool", False, "an SSE comment `: ok` right after the headers, so a hop that "
         "holds the headers until the first body byte (nginx before 1.23 over HTTP/2) sends them at once; "
         "off by default: with the role chunk at the headers it adds a write and changes nothing",
         flag=True),
    Knob("stall_timeout_s", "float", 0.0, "no token for this long ends the stream with an "
         "in-band timeout error", minimum=0.0, maximum=MAX_WAIT_S, off_at_zero=True,
         smallest_on=0.01, flag=True),
)

BY_NAME: dict[str, Knob] = {knob.name: knob for knob in KNOBS}
STREAM_KNOBS: tuple[Knob, ...] = tuple(k for k in KNOBS if k.flag)
LAB_ONLY_KNOBS: tuple[Knob, ...] = tuple(k for k in KNOBS if not k.flag)


def setting_value(knob: Knob, value: Any) -> Any:
    """A flag's or a request's value as StreamSettings holds it (timers: 0 or None = off)."""
    if knob.off_at_zero and not value:
        return None
    if knob.kind == "names":
        return frozenset(str(name).lower() for name in value or ())
    return value


# -- the server's flags ------------------------------------------------------------------------

def add_flags(group: Any) -> None:
    """One argparse option per per-stream knob (dest = the knob's name), range-checked."""
    for knob in STREAM_KNOBS:
        if knob.kind == "bool":
            action = "store_false" if knob.default else "store_true"
            group.add_argument(knob.cli, dest=knob.name, action=action, help=knob.help)
        elif knob.kind == "choice":
            group.add_argument(knob.cli, dest=knob.name, choices=knob.choices,
                               default=knob.default, help=f"{knob.help} (default {knob.default})")
        elif knob.kind == "names":
            group.add_argument(knob.cli, dest=knob.name, action="append", default=[],
                               type=str.lower, choices=knob.choices, metavar="NAME",
                               help=f"{knob.help} (repeatable): {', '.join(knob.choices)}")
        else:
            group.add_argument(knob.cli, dest=knob.name, type=_flag_type(knob),
                               default=knob.default,
                               help=f"{knob.help}; {knob.range_text()} (default {_num(knob.default)})")


def _flag_type(knob: Knob) -> Any:
    def parse(text: str) -> float:
        try:
            value = float(text) if knob.kind == "float" else int(text)
            return knob.check(value)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None
    parse.__name__ = knob.kind
    return parse


def settings_from_flags(namespace: argparse.Namespace) -> dict[str, Any]:
    return {k.name: setting_value(k, getattr(namespace, k.name)) for k in STREAM_KNOBS}


def flag_args(lab: Mapping[str, Any]) -> list[str]:
    """The server flags that make these per-stream `lab` values the server-wide defaults: the same
    settings a request carrying them gets (`{"heartbeat_s": 0}` -> `--heartbeat-s 0`). ValueError
    for a request-only field (it has no flag) or a value the flag cannot say."""
    args: list[str] = []
    for name, value in lab.items():
        knob = BY_NAME.get(name)
        if knob is None or not knob.flag:
            raise ValueError(f"lab.{name} is not a per-stream knob: no server flag sets it")
        value = knob.check(value)
        if knob.kind == "bool":
            if value is not knob.default:
                args.append(knob.cli)
        elif knob.kind == "names":
            for item in value or ():
                args += [knob.cli, str(item).lower()]
        elif value is None:
            if not knob.off_at_zero:
                raise ValueError(f"lab.{name}: null keeps the server's default; no flag says that")
            args += [knob.cli, "0"]
        else:
            args += [knob.cli, str(value)]
    return args


# -- the knob table in docs/server.md ----------------------------------------------------------

# The page the table lives on, and the command that rewrites it there.
DOC = Path(__file__).resolve().parent.parent / "docs" / "server.md"
BEGIN = "<!-- knob-table:begin (generated by `python -m server.knobs --write`) -->"
END = "<!-- knob-table:end -->"


def doc_table() -> str:
    lines = [BEGIN, "", "| `lab` field | server flag | accepts | default | what it does |",
             "|---|---|---|---|---|"]
    for knob in KNOBS:
        flag = f"`{knob.cli}`" if knob.flag else "(per request only)"
        if knob.default is None or knob.default == ():
            default = "unset"
        elif knob.kind == "bool":
            default = "on" if knob.default else "off"
        elif knob.kind in ("float", "int"):
            default = "off" if knob.off_at_zero and not knob.default else _num(knob.default)
        else:
            default = f"`{knob.default}`"
        lines.append(f"| `{knob.name}` | {flag} | {knob.range_text()} | {default} | "
                     f"{knob.help.replace('|', '&#124;')} |")
    return "\n".join(lines + ["", END])


def update_doc(path: Path = DOC) -> bool:
    """Replace the table between the markers in `path` (docs/server.md); True when it changed."""
    text = path.read_text(encoding="utf-8")
    if BEGIN not in text or END not in text:
        raise ValueError(f"{path} lacks the knob-table markers {BEGIN!r} ... {END!r}")
    updated = text[:text.index(BEGIN)] + doc_table() + text[text.index(END) + len(END):]
    if updated != text:
        path.write_text(updated, encoding="utf-8")
    return updated != text


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m server.knobs",
                                     description="the table of lab knobs (docs/server.md)")
    parser.add_argument("--write", type=Path, nargs="?", const=DOC, metavar="FILE",
                        help="replace the table in FILE (default docs/server.md) instead of "
                             "printing it")
    args = parser.parse_args(list(argv) if argv is not None else None)
    if args.write:
        print(f"{args.write}: {'updated' if update_doc(args.write) else 'already current'}")
    else:
        print(doc_table())
    return 0


if __name__ == "__main__":
    sys.exit(main())
