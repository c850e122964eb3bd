"""`python -m labs verify FILE`: the command line (arguments, progress, output, exit status)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

from labs.client.apis import add_api_option
from labs.findings import EXIT_UNUSABLE, UnusableInput
from labs.verify.readers import PROXIES, READERS
from labs.probe.mcp.names import CHECK_NAMES as MCP_CHECK_NAMES
from labs.verify.mcp.hint import MCP_PATH
from labs.verify.trials import CHECK_NAMES
from labs.verify.model import Options

FORMATS = ("text", "json", "sarif", "github")

HELP = """Read a proxy config exactly as written (includes, several servers, named upstreams,
listen 80/443, user, absolute paths, DNS clusters), run it here in front of the lab's server
with only what must change (shown as a diff; nothing but loopback is contacted), measure it
with the lab's client and name each fault with its kind, where, evidence and fix. A site file
(a server block for conf.d/) is judged inside its platform's stock nginx.conf (--main).
Kubernetes manifests (an Ingress with ingress-nginx's annotations and ConfigMap, an HTTPRoute with
Envoy Gateway's policies, a Traefik IngressRoute) are judged as the config their controller
runs, each finding at the manifest's field.
Exit status: 0 every check passed, 1 a failure found, 2 the input cannot be used, verify could
not handle it, or a check could not measure (inconclusive); the same in every --format."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = Options()
    examples = ", ".join(kind.example for kind in READERS.values())
    parser.add_argument("file", type=Path, help=f"the config file ({examples}, or Kubernetes manifests)")
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
    parser.add_argument("--heartbeat", type=float, default=defaults.heartbeat_s, metavar="S",
                        help="your server sends `: ping` heartbeats after S s of silence: the disconnect "
                             "check's silence carries them, and the departure must reach the server by the "
                             "heartbeat the proxy needs, plus 0.5 s (a proxy that notices it only at a write "
                             "passes only so); --quick runs that check too. The silence checks stay "
                             "without heartbeats (default: none, a silence without them)")
    parser.add_argument("--runtime", choices=("local", "docker"), default="local",
                        help="the proxy as a host process (local) or in its container (docker)")
    parser.add_argument("--quick", action="store_true",
                        help="only the checks the static reading calls for (plus streaming)")
    parser.add_argument("--check", action="append", choices=(*CHECK_NAMES, *MCP_CHECK_NAMES), dest="checks",
                        help=f"run only this check (repeatable; {', '.join(MCP_CHECK_NAMES)}: with --mcp)")
    parser.add_argument("--format", choices=FORMATS, default=None,
                        help="text: tables (default); json: one document; sarif: a SARIF 2.1.0 log "
                             "(code scanning); github: GitHub Actions annotations")
    parser.add_argument("--json", action="store_true", help="the same as --format json")
    add_api_option(parser.add_argument)

    route = parser.add_argument_group("which route (default: the one that serves the chat API, said in the output)")
    route.add_argument("--path", default=None, metavar="PATH",
                       help="judge the route that serves POST PATH (e.g. /api/chat/completions)")
    route.add_argument("--mcp", nargs="?", const=MCP_PATH, default=None, metavar="PATH",
                       help=f"judge the MCP route (Streamable HTTP) serving POST and GET PATH (default {MCP_PATH}) "
                            "instead of the chat route: run in front of replicas of the lab's MCP origin, as many as "
                            "its pool has servers, and measured with the probe's MCP checks (docs/verify.md)")
    route.add_argument("--host", default=None, metavar="NAME",
                       help="the Host the requests carry: picks the server (nginx server_name, "
                            "HAProxy host ACLs, Envoy virtual-host domains)")
    route.add_argument("--header", action="append", default=[], metavar="'NAME: VALUE'",
                       help="send this header with every measured request (a route behind "
                            "authentication); never stored, never printed (repeatable)")
    parser.add_argument("--proxy-version", default=None, metavar="X.Y[.Z]",
                        help="the proxy version the config is written for: the lab's release of that "
                             "series runs it, else the newest one not newer (else the oldest) stands in, "
                             "said in the output; nginx, HAProxy and Envoy are judged with that "
                             "version's defaults (written into the run where the binary has others). "
                             f"Default: each proxy's current release, the last of its releases here ({_releases()})")
    route.add_argument("--main", default=None, metavar="PLATFORM|FILE",
                       help="nginx site file: the main config it is included from: official-image "
                            "(default), debian, or your own nginx.conf")


def _releases() -> str:
    from proxies.kinds import KINDS as PROXY_KINDS
    return "; ".join(f"{kind.binary.title} " + ", ".join(r.series for r in kind.releases)
                     for kind in PROXY_KINDS.values())


def output_format(args: argparse.Namespace) -> str:
    """--format, with --json its older spelling (scripts and docs use it)."""
    return "json" if args.json else args.format or "text"


def headers_from(values: list[str]) -> dict[str, str]:
    headers = {}
    for value in values:
        name, sep, content = value.partition(":")
        if not sep or not name.strip() or any(c.isspace() for c in name.strip()):
            raise UnusableInput(f"--header must be 'Name: value' (got {value.split(':')[0]!r}...)")
        headers[name.strip()] = content.strip()
    return headers


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape

    from labs.verify import output
    from labs.verify.model import RouteWanted
    from labs.verify.run import verify_config

    fmt = output_format(args)
    # In every format but text stdout is the document alone: progress and errors go to stderr.
    console = Console(stderr=fmt != "text")
    try:
        wanted = RouteWanted(args.path, args.host, args.main, args.proxy_version, api=args.api)
        headers = headers_from(args.header)
        with console.status("verify: starting") as status:
            if _mcp_asked(args):
                from labs.verify.mcp.run import verify_mcp
                report = verify_mcp(args.file, mcp_path=args.mcp, proxy=args.proxy, checks=args.checks,
                                    runtime=args.runtime, wanted=wanted, headers=headers,
                                    progress=lambda message: status.update(f"verify: {message}"))
            else:
                    report = verify_config(args.file, proxy=args.proxy, max_silence_s=args.max_silence,
                                       max_stream_s=args.max_stream, streams=args.streams,
                                       heartbeat_s=args.heartbeat, runtime=args.runtime,
                                       quick=args.quick, checks=args.checks, wanted=wanted, headers=headers,
                                       progress=lambda message: status.update(f"verify: {message}"))
    except UnusableInput as exc:
        return _error(args, console, fmt, exc, "error")
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # verify's own failure: exit 2 with one line, never a traceback
        return _error(args, console, fmt, UnusableInput(own_error(exc)), "verify could not handle this config "
                      "(verify's own error, not one in your config; please report it)")
    if fmt == "json":
        print(output.to_json(report))
    elif fmt == "text":
        output.print_report(report, console)
    else:
        print(output.for_ci(report, fmt))
    return report.exit_status


def _mcp_asked(args: argparse.Namespace) -> bool:
    """--mcp given, and the other options consistent with it (UnusableInput says which is not)."""
    mcp_checks = [c for c in args.checks or [] if c in MCP_CHECK_NAMES]
    if args.mcp is None:
        if mcp_checks:
            raise UnusableInput(f"--check {mcp_checks[0]} is an MCP check: give --mcp [PATH] with it")
        return False
    if not args.mcp.startswith("/"):
        raise UnusableInput(f"--mcp takes the route's path, starting with '/' (got {args.mcp!r}); "
                            "put the file first: labs verify FILE --mcp")
    if args.path:
        raise UnusableInput("--mcp names the route's path itself: give --mcp PATH without --path")
    chat = [c for c in args.checks or [] if c not in MCP_CHECK_NAMES]
    if chat:
        raise UnusableInput(f"--check {chat[0]} judges the chat route; with --mcp: {', '.join(MCP_CHECK_NAMES)}")
    return True


def own_error(exc: BaseException) -> str:
    """One line for an error of verify's own: what it is and where in verify it happened."""
    import traceback
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if "/labs/" in f.filename]
    where = f" (at {frames[-1].filename.rsplit('/labs/', 1)[-1]}:{frames[-1].lineno})" if frames else ""
    message = " ".join(str(exc).split()) or "no message"
    return f"{type(exc).__name__}: {message}{where}"


def _error(args: argparse.Namespace, console, fmt: str, error: UnusableInput, label: str) -> int:
    """Exit status 2, one line on the console, and the document of the format asked for."""
    import json

    from rich.markup import escape

    from labs.verify import output
    if fmt == "json":
        document = json.loads(output.error_for(error, str(args.file), fmt))
        document.update(verdict="error", error_kind="input" if label == "error" else "verify")
        print(json.dumps(document, indent=2))
    elif fmt != "text":
        print(output.error_for(error, str(args.file), fmt))
    console.print(f"[red]{escape(label)}[/red]: {escape(str(error))}", highlight=False)
    return EXIT_UNUSABLE


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m labs verify", description=HELP)
    add_arguments(parser)
    args = parser.parse_args(argv)
    if args.json and args.format not in (None, "json"):
        parser.error(f"--json is --format json: give --format {args.format} alone")
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
