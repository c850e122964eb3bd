"""`python -m labs probe URL [URL ...]`: probe a deployed streaming path, name each fault and its hop."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Sequence

from labs.client.apis import add_api_option
from labs.findings import EXIT_UNUSABLE, UnusableInput
from labs.probe.base import DEFAULT_BUDGET_S, DEFAULT_MAX_SILENCE_S, DEFAULT_MAX_STREAM_S, DEFAULT_STREAMS
from labs.probe.mcp.names import CHECK_NAMES as MCP_CHECK_NAMES
from labs.probe.mcp.names import DEFAULT_MCP_MAX_SILENCE_S, DEFAULT_SESSIONS

TOOL = "streamlab probe"

EPILOG = """\
URLs are OpenAI base URLs (http://host:port/v1), the outermost entry first, optionally followed
by inner entries of the same path (each finding then names the innermost entry that still shows
it). Behind the path, the lab's server as a canary origin lets the probe steer every check:
    python -m server --engine synthetic --http h11 --slots 64
(--http h11 answers HTTP/1.0 close-delimited, as most servers do, so a buffering hop shows).
Against any other origin only what a client can see is measured.
With --mcp the URLs are MCP endpoints (http://host:port/mcp), checked with the official MCP client:
a session survives several requests, progress notifications stream, the silent GET stream lives
up to --max-silence (default 20 s for MCP) and its headers are not held.
Exit status: 0 no failure, 1 a failure found, 2 the input cannot be used.
"""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m labs probe", description=__doc__.splitlines()[0],
                                epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("urls", nargs="+", metavar="URL", help="OpenAI base URLs (with --mcp: MCP endpoints), "
                                                          "outermost first")
    p.add_argument("--max-silence", "--max-silence-s", type=float, default=None, metavar="S",
                   help=f"longest silence to try, before the headers, after them and in mid-stream "
                        f"(default {DEFAULT_MAX_SILENCE_S:g}); with --mcp, how long the GET stream is held "
                        f"open (default {DEFAULT_MCP_MAX_SILENCE_S:g})")
    p.add_argument("--mcp", action="store_true",
                   help="the URLs are MCP endpoints (Streamable HTTP): run the MCP checks "
                        f"({', '.join(MCP_CHECK_NAMES)})")
    p.add_argument("--mcp-tool", metavar="NAME",
                   help="with --mcp: the tool whose progress notifications are timed (default: the lab "
                        "origin's slow_task when the server lists it)")
    p.add_argument("--mcp-args", metavar="JSON", help="with --mcp: the tool's arguments, a JSON object")
    p.add_argument("--mcp-sessions", type=int, default=DEFAULT_SESSIONS, metavar="N",
                   help=f"with --mcp: sessions opened one after another, each initialize and two "
                        f"tools/list requests (default {DEFAULT_SESSIONS})")
    p.add_argument("--max-stream", type=float, default=DEFAULT_MAX_STREAM_S, metavar="S",
                   help=f"a stream longer than this looks for a total-duration limit "
                        f"(default {DEFAULT_MAX_STREAM_S:g}, above Envoy's 15 s route timeout)")
    p.add_argument("--streams", type=int, default=DEFAULT_STREAMS, metavar="N",
                   help=f"concurrent streams for the connection-limit check (default {DEFAULT_STREAMS})")
    p.add_argument("--budget", type=float, default=DEFAULT_BUDGET_S, metavar="S",
                   help=f"bound on the whole run; checks that do not fit are skipped "
                        f"(default {DEFAULT_BUDGET_S:g})")
    p.add_argument("--api-key-env", metavar="VAR", help="environment variable holding the API key")
    add_api_option(p.add_argument)
    p.add_argument("--model", metavar="M", help="model to ask for (default: the first listed)")
    p.add_argument("--lab-token-env", default="STREAMLAB_LAB_TOKEN", metavar="VAR",
                   help="environment variable holding the canary's lab token, sent as X-Lab-Token "
                        "(default STREAMLAB_LAB_TOKEN)")
    p.add_argument("--check", action="append", dest="checks", metavar="NAME",
                   help="run only this check or finding kind (repeatable; default: all)")
    p.add_argument("--format", choices=("text", "json", "sarif", "github"), default=None,
                   help="text: tables (default); json: one document; sarif: a SARIF 2.1.0 log "
                        "(each finding at its hop's URL); github: GitHub Actions annotations")
    p.add_argument("--json", action="store_true", help="the same as --format json")
    p.add_argument("--http1-only", action="store_true",
                   help="on an https:// entry that offers h2 (ALPN), do not also run the streaming "
                        "checks over HTTP/2")
    p.add_argument("--insecure", action="store_true",
                   help="accept any TLS certificate (a self-signed one on a test entry)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    if args.json and args.format not in (None, "json"):
        p.error(f"--json is --format json: give --format {args.format} alone")
    fmt = "json" if args.json else args.format or "text"
    if args.mcp and fmt in ("sarif", "github"):  # they would show a lost session as "ok: no finding"
        p.error(f"--format {fmt} does not carry the MCP faults yet: give --mcp with text or --json")
    from rich.console import Console

    from labs.findings import ci
    from labs.probe.mcp.report import print_mcp_report
    from labs.probe.mcp.run import probe_mcp
    from labs.probe.report import print_report
    from labs.probe.run import probe_path

    console = Console(stderr=fmt != "text")
    errors = Console(stderr=True)
    try:
        with console.status("probing") as status:
            report = probe_mcp(
                args.urls, max_silence_s=args.max_silence, budget_s=args.budget, sessions=args.mcp_sessions,
                tool=args.mcp_tool, arguments=args.mcp_args, api_key_env=args.api_key_env,
                insecure=args.insecure, checks=args.checks, progress=status.update) if args.mcp else probe_path(
                args.urls, max_silence_s=args.max_silence, max_stream_s=args.max_stream,
                streams=args.streams, budget_s=args.budget, api_key_env=args.api_key_env,
                lab_token_env=args.lab_token_env, model=args.model, checks=args.checks,
                progress=status.update, http1_only=args.http1_only, insecure=args.insecure,
                api=args.api)
    except UnusableInput as exc:
        if fmt == "json":
            print(json.dumps({"urls": args.urls, "ok": False, "error": str(exc)}, indent=2))
        elif fmt == "sarif":
            print(json.dumps(ci.unusable_sarif_log(exc, tool=TOOL, file=None), indent=2))
        elif fmt == "github":
            print("\n".join(ci.unusable_workflow_commands(exc, tool=TOOL, file=None)))
        errors.print(f"[red]error[/red]: {exc}", highlight=False)
        return EXIT_UNUSABLE
    if fmt == "json":
        print(json.dumps(report.to_json(), indent=2, default=str))
    elif fmt == "sarif":
        print(json.dumps(ci.sarif_log(report, tool=TOOL, place=report.place, exit_code=report.exit_status),
                         indent=2))
    elif fmt == "github":
        print("\n".join(ci.workflow_commands(report, tool=TOOL, place=report.place)))
    elif args.mcp:
        print_mcp_report(report, console)  # type: ignore[arg-type]
    else:
        print_report(report, console)
    return report.exit_status


if __name__ == "__main__":
    sys.exit(main())
