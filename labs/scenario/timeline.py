"""The timeline picture: when each token reached the client, one panel per variant.

One stream per variant: a staircase of content events received against time. Each event is a
dot at its arrival; events that came in the same socket read sit on top of each other, so a
buffering hop shows as a flat line and then a cliff, a streaming one as an even staircase.
Many streams per variant: one row per stream, each content event a tick, reads that carried
several events drawn as orange blocks sized by their count, TTFT as a green dot.
Every panel shares the time axis, so broken and fixed compare by eye.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Mapping, Sequence

import matplotlib

matplotlib.use("Agg")  # files only: never needs a display
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from labs.client.durations import milliseconds  # noqa: E402
from labs.client.results import StreamResult, percentile  # noqa: E402

STREAMED = "#1f77b4"  # blue: an event that had a read to itself
SENT = "#9e9e9e"  # grey rings: when the server wrote an event (lab.stamp)
LUMPED = "#e66101"  # orange: an event that shared its read with others (a hop coalesced them)
TTFT_C = "#1a9850"
E2E_C = "#404040"
BAD = "#c0392b"
GOOD = "#1a9850"
HEARTBEAT = "#8c8c8c"
NEUTRAL = "#555555"

_OUTCOME_TEXT = {
    "complete": "complete: saw [DONE]",
    "truncated": "truncated: no [DONE]",
    "error-in-band": "in-band error",
    "http-error": "HTTP error",
    "reset": "connection reset",
    "timeout": "client timed out",
    "disconnected": "client left on purpose",
    "connect-error": "could not connect",
}


def outcome_label(r: StreamResult) -> str:
    """A short line a learner can read: what happened to this stream."""
    text = _OUTCOME_TEXT.get(r.outcome, r.outcome)
    if r.outcome == "http-error":
        page_title = _title(r).removeprefix(str(r.status)).strip()
        text = f"HTTP {r.status}" + (f": {page_title}" if page_title else "")
    elif r.outcome in ("error-in-band", "reset", "timeout") and r.error:
        text += f" ({_short(r.error)})"
    elif r.outcome == "disconnected" and r.disconnect_s is not None:
        text += f" at {_duration(r.disconnect_s)}"
    return text


def _title(r: StreamResult) -> str:
    snippet = r.body_snippet or ""
    if "<title>" in snippet:
        return snippet.split("<title>", 1)[1].split("</title>", 1)[0].strip()
    return ""


def _short(text: str, n: int = 40) -> str:
    return text if len(text) <= n else text[: n - 1] + "…"


def _duration(s: float | None) -> str:
    """Milliseconds, and seconds from 10 s on, where five digits of ms would crowd a label."""
    return f"{s:.1f} s" if s is not None and s >= 10 else milliseconds(s)


def _end(r: StreamResult) -> float:
    # end_s shows how long a cut stream sat silent before the FIN, RST or timeout came
    candidates = [r.end_s, r.e2e_s, r.disconnect_s] + [e.t for e in r.events[-1:]]
    return max([c for c in candidates if c is not None] or [0.0])


_END_MARK = {"truncated": "closed: no [DONE]", "reset": "reset", "timeout": "client gave up",
             "error-in-band": "in-band error"}


def _single(ax: Axes, r: StreamResult, top: float) -> None:
    content = r.content
    per_read = Counter(e.read for e in content)
    xs = [e.t for e in content]
    ys = list(range(1, len(content) + 1))
    if content:
        ax.step([0.0] + xs + [_end(r)], [0] + ys + [ys[-1]], where="post", color=STREAMED,
                alpha=0.35, linewidth=1.2, zorder=1)
        colors = [LUMPED if per_read[e.read] > 1 else STREAMED for e in content]
        ax.scatter(xs, ys, s=18, c=colors, zorder=3, linewidths=0)
        read, count = per_read.most_common(1)[0]
        if count > 1:
            first = next(i for i, e in enumerate(content) if e.read == read)
            ax.annotate(f"{count} events\nin one read", xy=(content[first].t, first + count / 2),
                        xytext=(-10, 0), textcoords="offset points", ha="right", va="center",
                        fontsize=8, color=LUMPED)
    if r.outcome in _END_MARK:
        # where the stream stopped without [DONE]: the thing a learner should look at
        ax.plot([_end(r)], [len(content)], marker="X", markersize=9, color=BAD, zorder=4)
        label = _END_MARK[r.outcome]
        if r.end_s is not None and r.e2e_s is not None and r.end_s - r.e2e_s > 0.05:
            label += f"\nafter {_duration(r.end_s - r.e2e_s)} of silence"
        ax.annotate(label, xy=(_end(r), len(content)), xytext=(8, -4),
                    textcoords="offset points", fontsize=8, color=BAD, va="top")
    stamped = [(e.t - e.hop_s, e.t, y) for e, y in zip(content, ys) if e.hop_s is not None]
    if stamped:
        # When the server wrote each event (its `sent_at` stamp): the gap to the dot is the time
        # the event spent on the way, so an event held one interval shows one interval of line.
        ax.hlines([y for _, _, y in stamped], [s for s, _, _ in stamped], [t for _, t, _ in stamped],
                  color=SENT, linewidth=1, zorder=2)
        ax.scatter([s for s, _, _ in stamped], [y for _, _, y in stamped], s=14, facecolors="none",
                   edgecolors=SENT, linewidths=0.8, zorder=2)
    beats = [e.t for e in r.events if e.kind == "comment"]
    if beats:
        ax.scatter(beats, [0] * len(beats), marker="|", s=60, color=HEARTBEAT, zorder=2)
    _marks(ax, r, top)
    lines = [f"TTFB {_duration(r.ttfb_s)}   TTFT {_duration(r.ttft_s)}   E2E {_duration(r.e2e_s)}",
             f"{r.bursts} burst{'s' if r.bursts != 1 else ''} for {len(content)} events"]
    if r.heartbeats:
        lines.append(f"{r.heartbeats} heartbeats (grey ticks)")
    if stamped:
        delays = sorted(t - s for s, t, _ in stamped)
        lines.append(f"on the way: median {_duration(delays[(len(delays) - 1) // 2])}, max {_duration(delays[-1])}")
    ax.text(0.02, 0.97, "\n".join(lines), transform=ax.transAxes, va="top", fontsize=9,
            bbox=dict(boxstyle="round,pad=0.3", facecolor="white", edgecolor="#cccccc"))
    ax.set_ylabel("content events received")


def _marks(ax: Axes, r: StreamResult, top: float) -> None:
    if r.ttft_s is not None:
        ax.axvline(r.ttft_s, color=TTFT_C, linestyle="--", linewidth=1)
    if r.e2e_s is not None:
        ax.axvline(r.e2e_s, color=E2E_C, linestyle=":", linewidth=1)
    if r.disconnect_s is not None:
        ax.axvline(r.disconnect_s, color=NEUTRAL, linestyle="-.", linewidth=1)
        ax.text(r.disconnect_s, top * 0.5, " client left", color=NEUTRAL, fontsize=8)
    if r.outcome == "http-error" and r.ttfb_s is not None:
        ax.axvline(r.ttfb_s, color=BAD, linewidth=1.5)
        ax.text(r.ttfb_s, top * 0.5, f" HTTP {r.status}\n error page,\n no stream", color=BAD,
                fontsize=9, va="center")


def _rows(ax: Axes, results: Sequence[StreamResult]) -> None:
    tick_x: list[float] = []
    tick_y: list[float] = []
    lump_x: list[float] = []
    lump_y: list[float] = []
    lump_s: list[float] = []
    for row, r in enumerate(results):
        # rows share the batch clock: a stream the client sent late starts late on its row
        off = r.start_s
        ok = r.outcome == "complete"
        ax.hlines(row, off, off + _end(r), color=GOOD if ok else BAD, alpha=0.25, linewidth=3)
        per_read = Counter(e.read for e in r.content)
        seen: set[int] = set()
        for e in r.content:
            if per_read[e.read] == 1:
                tick_x.append(off + e.t)
                tick_y.append(row)
            elif e.read not in seen:
                seen.add(e.read)
                lump_x.append(off + e.t)
                lump_y.append(row)
                lump_s.append(12 + 6 * per_read[e.read])
        if r.outcome != "complete":
            ax.plot([off + _end(r)], [row], marker="x", color=BAD, markersize=5)
    ax.scatter(tick_x, tick_y, marker="|", s=30, color=STREAMED, linewidths=1, zorder=2)
    ax.scatter(lump_x, lump_y, marker="s", s=lump_s, color=LUMPED, zorder=3, linewidths=0)
    ttft = [(r.ttft_s, r.start_s, i) for i, r in enumerate(results) if r.ttft_s is not None]
    if ttft:
        ax.scatter([t + o for t, o, _ in ttft], [i for *_, i in ttft], s=14, color=TTFT_C, zorder=4)
    ax.set_ylim(len(results) - 0.5, -0.5)  # first stream on top
    ax.set_ylabel("stream")


def _rows_status(results: Sequence[StreamResult]) -> str:
    """Outcome counts and TTFT spread: the line above a many-stream panel."""
    counts = Counter(r.outcome for r in results)
    line = ", ".join(f"{n} {k}" for k, n in counts.most_common())
    ttfts = [r.ttft_s for r in results if r.ttft_s is not None]
    if ttfts:
        line += f"\nTTFT p50 {_duration(percentile(ttfts, 50))}, max {_duration(max(ttfts))}"
    return line


def plot_timeline(variants: Mapping[str, Sequence[StreamResult]], path: str | Path, title: str,
                  subtitle: str | None = None) -> Path:
    """Draw token arrival against time, one panel per variant (in the mapping's order).

    Panels share the time axis (seconds since the request was sent). A variant with one
    stream gets the staircase view, one with several gets one row per stream. Returns the path.
    """
    names = list(variants)
    if not names:
        raise ValueError("no variants to plot")
    many = max(len(v) for v in variants.values()) > 1
    rows = max(len(v) for v in variants.values())
    height = 4.2 if not many else min(14.0, max(4.2, 1.6 + 0.16 * rows))
    fig, axes = plt.subplots(1, len(names), figsize=(6.2 * len(names), height), sharex=True,
                             sharey=not many, squeeze=False)
    horizon = max((_end(r) + (r.start_s if many else 0.0) for v in variants.values() for r in v),
                  default=1.0) or 1.0
    most = max((r.content_events for v in variants.values() for r in v), default=0)
    top = most * 1.45 + 1.5
    for ax, name in zip(axes[0], names):
        results = list(variants[name])
        if not results:
            ax.text(0.5, 0.5, "no streams", transform=ax.transAxes, ha="center")
        elif many:
            _rows(ax, results)
        else:
            _single(ax, results[0], top)
            # head room above the staircase keeps the numbers box clear of the data
            ax.set_ylim(-0.5, top)
        ok = bool(results) and all(r.outcome == "complete" for r in results)
        neutral = bool(results) and all(r.outcome == "disconnected" for r in results)
        status = outcome_label(results[0]) if len(results) == 1 else _rows_status(results)
        ax.set_title(name, fontsize=12, fontweight="bold", loc="left")
        ax.set_title(status, fontsize=10, color=GOOD if ok else NEUTRAL if neutral else BAD, loc="right")
        ax.set_xlabel("seconds since the batch started" if many else "seconds since the request was sent")
        ax.set_xlim(-0.02 * horizon, horizon * 1.05)
        ax.grid(axis="x", color="#eeeeee")
        ax.spines[["top", "right"]].set_visible(False)
    handles = [
        Line2D([], [], marker="o" if not many else "|", linestyle="", color=STREAMED,
               label="event in its own read"),
        Line2D([], [], marker="o" if not many else "s", linestyle="", color=LUMPED,
               label="events that shared a read (coalesced)" + (", size = count" if many else "")),
        Line2D([], [], color=TTFT_C, linestyle="--" if not many else "", marker="" if not many else "o",
               label="TTFT (first content)"),
    ]
    if not many:
        handles.append(Line2D([], [], color=E2E_C, linestyle=":", label="E2E (last byte)"))
    if not many and any(e.hop_s is not None for v in variants.values() for r in v for e in r.content):
        handles.append(Line2D([], [], marker="o", markerfacecolor="none", color=SENT,
                              label="written by the server (its stamp)"))
    fig.legend(handles=handles, loc="lower center", ncol=len(handles), frameon=False, fontsize=9)
    # Title block in inches from the top, so it reads the same at every figure height.
    fig.text(0.01, 1 - 0.12 / height, title, fontsize=14, fontweight="bold", ha="left", va="top")
    header_in = 0.5
    if subtitle:
        fig.text(0.01, 1 - 0.45 / height, subtitle, fontsize=10, color="#444444", ha="left", va="top")
        header_in = 0.8
    fig.tight_layout(rect=(0, 0.35 / height, 1, 1 - header_in / height))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
