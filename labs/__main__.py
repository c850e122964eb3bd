"""`python -m labs`: list the scenarios, run one (broken, then fixed) or all of them.

    python -m labs list [--json]
    python -m labs run nginx-buffering [--variant broken|fixed|both] [--runtime local|docker] [--json]
    python -m labs run-all
    python -m labs render nginx-buffering [--variant broken|fixed] [--proxy PROXY]
    python -m labs verify nginx.conf [--proxy nginx|haproxy|envoy|varnish|apache|caddy|traefik] [--quick] [--json]
    python -m labs setup nginx-buffering [NAME ...] | --all [--check]
    python -m labs serve [--host 127.0.0.1] [--port 8765] [--runtime local|docker]
    python -m labs load URL [--streams N[,N...]] [--locust --workers N] [--json]

Installed, the console command `streamlab` is the same: `streamlab verify nginx.conf`.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from pathlib import Path
from typing import Sequence

from proxies.releases import CHOICE_VARIABLE
from server.locations import checkout, reports_dir
from server.signals import run_stoppable

DEFAULT_REPORTS = reports_dir()  # the checkout's reports/, else ./reports


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=_prog(), description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    listing = sub.add_parser("list", help="every scenario with its one-line symptom")
    listing.add_argument("--json", action="store_true", help="the list as JSON (name, layer, path, symptom, command)")
    sub.add_parser("names", help="scenario names only, one per line (for the Makefile)")
    table = sub.add_parser("readme-table", help="the README's scenario table, in Markdown")
    table.add_argument("--write", action="store_true", help="update README.md in place")
    render = sub.add_parser("render", help="print the proxy config a scenario's variant runs")
    render.add_argument("name", help="scenario name, e.g. nginx-buffering")
    render.add_argument("--variant", choices=("broken", "fixed"), default="broken",
                        help="which variant's settings (default: broken)")
    render.add_argument("--proxy", help="which hop, when the scenario's path has several proxies")
    render.add_argument("--no-validate", action="store_true", help="skip the binary's check")
    render.add_argument("--proxy-version", default=None, metavar="CHOICE",
                        help="render and check for this release (as `run --proxy-version`; default: current)")
    from labs.view.cli import add_arguments as view_arguments
    view_arguments(sub.add_parser("serve", help="the browser view: broken and fixed side by side, "
                                  "measured by the browser (http://127.0.0.1:8765)"), DEFAULT_REPORTS)
    # The load lab (labs.load) and the benchmarks (labs.bench) take their own options.
    sub.add_parser("bench", help="every benchmark: reports/bench/*.json and bench.md "
                   "(options: python -m labs bench --help)", add_help=False)
    sub.add_parser("setup", help="install what a lab needs and nothing else: python -m labs setup "
                   "NAME | --all (options: python -m labs setup --help)", add_help=False)
    sub.add_parser("verify", help="your own proxy config: settings in effect, measured in front of the "
                   "lab's server (options: python -m labs verify --help)", add_help=False)
    sub.add_parser("probe", help="probe a deployed path: python -m labs probe URL [URL ...] "
                   "(options: python -m labs probe --help)", add_help=False)
    sub.add_parser("load", help="load a deployed path: python -m labs load URL --streams 100,300 "
                   "(options: python -m labs load --help)", add_help=False)
    for name, help_text in (("run", "run one scenario"), ("run-all", "run every scenario, write an index")):
        cmd = sub.add_parser(name, help=help_text)
        if name == "run":
            cmd.add_argument("name", help="scenario name, e.g. nginx-buffering")
            cmd.add_argument("--variant", choices=("broken", "fixed", "both"), default="both")
            cmd.add_argument("--json", action="store_true", help="print report.json to stdout instead of tables")
        cmd.add_argument("--runtime", choices=("local", "docker"), default=None,
                         help="how proxies run (default: $LAB_RUNTIME or local)")
        cmd.add_argument("--proxy-version", default=None, metavar="CHOICE",
                         help="which release of each proxy runs: current (default), oldest (Debian 12's), "
                         "X.Y (e.g. 1.22: nginx's) or PROXY=X.Y,... (default: $LAB_PROXY_VERSION or current)")
        cmd.add_argument("--out", type=Path, default=DEFAULT_REPORTS, help="reports folder (default: reports/)")
    return parser


def _prog() -> str:
    """`streamlab` when run as the console command, else `python -m labs`."""
    return "streamlab" if Path(sys.argv[0]).name == "streamlab" else "python -m labs"


def main(argv: Sequence[str] | None = None) -> int:
    """Every command; SIGTERM, SIGINT or SIGHUP stops it as a normal exit would, every server and
    proxy it started stopped, with exit status 128 + the signal's number (server.signals)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    command = " ".join([_prog(), *argv[:1]])
    return run_stoppable(lambda: _command(argv), command)


def _command(argv: list[str]) -> int:
    if argv[:1] == ["bench"]:  # labs.bench parses its own options
        from labs import bench
        return bench.main(argv[1:])
    if argv[:1] == ["verify"]:  # labs.verify.cli parses its own options
        from labs.verify import cli
        return cli.main(argv[1:])
    if argv[:1] == ["probe"]:  # labs.probe parses its own options
        from labs.probe.cli import main as probe
        return probe(argv[1:])
    if argv[:1] == ["setup"]:  # labs.needs parses its own options
        from labs.needs import main as setup
        return setup(argv[1:])
    if argv[:1] == ["load"]:  # labs.pathload.cli parses its own options
        from labs.pathload.cli import main as load
        return load(argv[1:])
    args = _parser().parse_args(argv)
    from labs import catalogue

    if getattr(args, "proxy_version", None) is not None:  # the labs read it, child processes too
        os.environ[CHOICE_VARIABLE] = args.proxy_version
    if args.command in ("run", "run-all", "list", "serve", "render") and (problem := _release_problem(args, catalogue)):
        print(f"error: {problem}", file=sys.stderr)
        return 2

    if args.command == "names":
        print("\n".join([*(s.name for s in catalogue.ALL), "load"]))
        return 0
    if args.command == "list":
        from labs.scenario.listing import print_list
        return print_list(catalogue.ALL, json_output=args.json)
    if args.command == "run" and args.name == "load":
        from labs import load
        return load.main(["--out", str(args.out / "load")]
                         + (["--runtime", args.runtime] if args.runtime else []))
    if args.command == "serve":
        if not _model_ready():
            return 2
        from labs.view.cli import serve
        return serve(args.host, args.port, args.runtime, args.out)
    if args.command == "render":
        from labs.catalogue import render
        return render.main(args.name, args.variant, args.proxy, check=not args.no_validate)
    if args.command == "readme-table":
        from labs.catalogue.readme_table import scenario_table, update_readme
        if args.write:
            root = checkout()
            if root is None:
                print("error: --write updates a checkout's README.md; this is an installed package",
                      file=sys.stderr)
                return 2
            changed = update_readme(root / "README.md")
            print("README.md updated" if changed else "README.md already up to date")
        else:
            print(scenario_table())
        return 0
    from labs.scenario import play
    if args.command == "run":
        try:
            scenario = catalogue.find(args.name)
        except catalogue.UnknownScenario as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        if play.needs_model(scenario) and not _model_ready():
            return 2
        variants = ("broken", "fixed") if args.variant == "both" else (args.variant,)
        return _run([scenario], variants, args.runtime, args.out, as_json=args.json)
    if not _model_ready():
        return 2
    from labs.scenario.run_all import run_all
    return run_all(list(catalogue.ALL), args.runtime, args.out)


def _release_problem(args: argparse.Namespace, catalogue) -> str | None:  # type: ignore[no-untyped-def]
    """Why the chosen releases cannot run here (a release no proxy on the scenario's path has, or
    none the lab has at all), None when they can."""
    from proxies.kinds import KINDS, choose_releases
    from labs.scenario.play import proxy_kinds

    choice = os.environ.get(CHOICE_VARIABLE)
    if not choice:
        return None
    try:
        scenario = catalogue.find(args.name) if args.command in ("run", "render") and args.name != "load" else None
        # (list, serve and run-all span every scenario: a choice any proxy of the lab has will do)
    except catalogue.UnknownScenario:
        return None  # said below, as for any run
    kinds = proxy_kinds(scenario) if scenario else list(KINDS)
    try:
        choose_releases(choice, kinds)
    except ValueError as exc:
        return f"--proxy-version (or LAB_PROXY_VERSION) {choice}: {exc}"
    return None


def _model_ready() -> bool:
    """The scenarios' server runs the transformers engine ($LAB_ENGINE, else the default):
    its extra installed and the default model built before any server starts (else says why)."""

    from server.config import DEFAULT_MODEL
    from server.tools.model_builder import prepare

    problem = prepare(os.environ.get("LAB_ENGINE", "transformers"), DEFAULT_MODEL, say_as="labs")
    if problem is not None:
        print(f"error: {problem}", file=sys.stderr)
    return problem is None


def _run(scenarios, variants, runtime, out: Path, *, as_json: bool = False) -> int:
    from rich.console import Console
    from rich.markup import escape

    from labs import provenance
    from labs.scenario import play
    from labs.scenario.runner import Lab

    console = Console(stderr=as_json)
    # The report's picture needs matplotlib (~1 s to import): imported while the model server
    # starts (seconds of waiting), not after the runs.
    threading.Thread(target=_import_the_picture, daemon=True).start()
    failed = False
    with console.status("starting") as status, Lab(runtime=runtime, progress=status.update) as lab:
        for scenario in scenarios:
            if (reason := play.cannot_run(scenario, lab)) is not None:
                print(f"error: {reason}", file=sys.stderr)
                return 2
            # With no --proxy-version, a scenario whose lesson changed between releases runs on
            # the older ones too (Scenario.since), its report a table by release.
            outcome = play.run(lab, scenario, variants, by_release=True)
            status.update(f"{scenario.name}: writing the report")
            paths = play.write_report(outcome, out / scenario.name)
            if as_json:
                print(json.dumps(play.report_dict(outcome), indent=2, default=str))
            else:
                status.stop()
                play.print_outcome(outcome, console)
                pictures = "  ".join(str(paths[k]) for k in ("png", "hops") if k in paths)
                console.print(f"report: {paths['md']}" + (f"  pictures: {pictures}" if pictures else ""))
                console.print(f"[dim]{escape(provenance.one_line(outcome.provenance))}[/]")
                status.start()
            # As expected on each release: the symptom reproduces (not where the release fixed it,
            # Since.ends_symptom), the fix cures.
            gone = [each.releases for each in outcome.every_release if scenario.symptom_ended(each.releases)]
            if gone and not as_json:
                shown = "; ".join(", ".join(f"{kind} {series}" for kind, series in r.items()) for r in gone)
                console.print(f"[dim]{scenario.name}: the symptom is gone on {shown}, a release that fixed it[/]")
            failed |= any(each.passed(v) == (v == "broken" and scenario.symptom_ended(each.releases))
                          for each in outcome.every_release for v in each.runs)
    return 1 if failed else 0


def _import_the_picture() -> None:
    """Import the report's picture (matplotlib) on a thread, while the server starts."""
    import labs.scenario.timeline  # noqa: F401


if __name__ == "__main__":
    sys.exit(main())
