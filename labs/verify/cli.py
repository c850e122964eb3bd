"""`python -m labs verify FILE`: the command line (arguments, progress, output, exit status)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from labs.findings import EXIT_UNUSABLE, UnusableInput
from labs.verify.kinds import KINDS, PROXIES
from labs.verify.trials import CHECK_NAMES
from labs.verify.model import Options

FORMATS = ("text", "json", "sarif", "github")

HELP = """Read a proxy config exactly as written (includes, several servers, named upstreams,
listen 80/443, user, absolute paths, DNS clusters), run it here in front of the lab's server
with only what must change (shown as a diff; nothing but loopback is contacted), measure it
with the lab's client and name each fault with its kind, where, evidence and fix.
Exit status: 0 no failure, 1 a failure, 2 the input cannot be used (in every --format)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = Options()
    examples = ", ".join(kind.example for kind in KINDS.values())
    parser.add_argument("file", type=Path, help=f"the config file ({examples})")
    parser.add_argument("--proxy", choices=PROXIES, default=None,
                        help="which proxy (default: detected from the file)")
    parser.add_argument("--max-silence", type=float, default=defaults.max_silence_s, metavar="S",
                        help="the longest silence the model may keep, before the first token and "
                             f"mid-stream, heartbeats off (default {defaults.max_silence_s:g} s)")
    parser.add_argument("--max-stream", type=float, default=defaults.max_stream_s, metavar="S",
                        help="the longest answer; a stream a little longer is sent (default "
                             f"{defaults.max_stream_s:g} s, above Envoy's 15 s route timeout)")
    parser.add_argument("--streams", type=int, default=defaults.streams, metavar="N",
                        help=f"concurrent streams the path must carry (default {defaults.streams})")
    parser.add_argument("--runtime", choices=("local", "docker"), default="local",
                        help="the proxy as a host process (local) or in its container (docker)")
    parser.add_argument("--quick", action="store_true",
                        help="only the checks the static reading calls for (plus streaming)")
    parser.add_argument("--check", action="append", choices=CHECK_NAMES, dest="checks",
                        help="run only this check (repeatable)")
    parser.add_argument("--format", choices=FORMATS, default=None,
                        help="text: tables (default); json: one document; sarif: a SARIF 2.1.0 log "
                             "(code scanning); github: GitHub Actions annotations")
    parser.add_argument("--json", action="store_true", help="the same as --format json")


def output_format(args: argparse.Namespace) -> str:
    """--format, with --json its older spelling (scripts and docs use it)."""
    return "json" if args.json else args.format or "text"


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape

    from labs.verify import output
    from labs.verify.run import verify_config

    fmt = output_format(args)
    # In every format but text stdout is the document alone: progress and errors go to stderr.
    console = Console(stderr=fmt != "text")
    try:
        with console.status("verify: starting") as status:
            report = verify_config(args.file, proxy=args.proxy, max_silence_s=args.max_silence,
                                   max_stream_s=args.max_stream, streams=args.streams, runtime=args.runtime,
                                   quick=args.quick, checks=args.checks,
                                   progress=lambda message: status.update(f"verify: {message}"))
    except UnusableInput as exc:
        if fmt != "text":
            print(output.error_for(exc, str(args.file), fmt))
        console.print(f"[red]error[/red]: {escape(str(exc))}", highlight=False)
        return EXIT_UNUSABLE
    if fmt == "json":
        print(output.to_json(report))
    elif fmt == "text":
        output.print_report(report, console)
    else:
        print(output.for_ci(report, fmt))
    return report.exit_status


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labs verify", description=HELP)
    add_arguments(parser)
    args = parser.parse_args(argv)
    if args.json and args.format not in (None, "json"):
        parser.error(f"--json is --format json: give --format {args.format} alone")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
