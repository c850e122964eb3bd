"""`python -m labs`: list the scenarios, run one (broken, then fixed) or all of them.

    python -m labs list
    python -m labs run nginx-buffering [--variant broken|fixed|both] [--runtime local|docker] [--json]
    python -m labs run-all
    python -m labs render nginx-buffering [--variant broken|fixed] [--proxy PROXY]
    python -m labs serve [--host 127.0.0.1] [--port 8765] [--runtime local|docker]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Sequence

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_REPORTS = REPO_ROOT / "reports"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m labs", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("list", help="every scenario with its one-line symptom")
    sub.add_parser("names", help="scenario names only, one per line (for the Makefile)")
    table = sub.add_parser("readme-table", help="the README's scenario table, in Markdown")
    table.add_argument("--write", action="store_true", help="update README.md in place")
    render = sub.add_parser("render", help="print the proxy config a scenario's variant runs")
    render.add_argument("name", help="scenario name, e.g. nginx-buffering")
    render.add_argument("--variant", choices=("broken", "fixed"), default="broken",
                        help="which variant's settings (default: broken)")
    render.add_argument("--proxy", help="which hop, when the scenario's path has several proxies")
    render.add_argument("--no-validate", action="store_true", help="skip the binary's check")
    from labs.view.cli import add_arguments as view_arguments
    view_arguments(sub.add_parser("serve", help="the browser view: broken and fixed side by side, "
                                  "measured by the browser (http://127.0.0.1:8765)"), DEFAULT_REPORTS)
    # The load lab (labs.load) and the benchmarks (labs.bench) take their own options.
    sub.add_parser("bench", help="every benchmark: reports/bench/*.json and bench.md "
                   "(options: python -m labs bench --help)", add_help=False)
    for name, help_text in (("run", "run one scenario"), ("run-all", "run every scenario, write an index")):
        cmd = sub.add_parser(name, help=help_text)
        if name == "run":
            cmd.add_argument("name", help="scenario name, e.g. nginx-buffering")
            cmd.add_argument("--variant", choices=("broken", "fixed", "both"), default="both")
            cmd.add_argument("--json", action="store_true", help="print report.json to stdout instead of tables")
        cmd.add_argument("--runtime", choices=("local", "docker"), default=None,
                         help="how proxies run (default: $LAB_RUNTIME or local)")
        cmd.add_argument("--out", type=Path, default=DEFAULT_REPORTS, help="reports folder (default: reports/)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["bench"]:  # labs.bench parses its own options
        from labs import bench
        return bench.main(argv[1:])
    args = _parser().parse_args(argv)
    from labs import catalogue

    if args.command == "names":
        print("\n".join([*(s.name for s in catalogue.SCENARIOS), "load"]))
        return 0
    if args.command == "list":
        status = _list(catalogue.SCENARIOS)
        print("load: ramp 10 -> 1,000 concurrent streams per path; what breaks first (python -m labs run load)")
        return status
    if args.command == "run" and args.name == "load":
        from labs import load
        return load.main(["--out", str(args.out / "load")]
                         + (["--runtime", args.runtime] if args.runtime else []))
    if args.command == "serve":
        from labs.view.cli import serve
        return serve(args.host, args.port, args.runtime, args.out)
    if args.command == "render":
        from labs import render
        return render.main(args.name, args.variant, args.proxy, check=not args.no_validate)
    if args.command == "readme-table":
        from labs.docs import scenario_table, update_readme
        if args.write:
            changed = update_readme(REPO_ROOT / "README.md")
            print("README.md updated" if changed else "README.md already up to date")
        else:
            print(scenario_table())
        return 0
    if args.command == "run":
        try:
            scenario = catalogue.get(args.name)
        except catalogue.UnknownScenario as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        variants = ("broken", "fixed") if args.variant == "both" else (args.variant,)
        return _run([scenario], variants, args.runtime, args.out, as_json=args.json)
    return _run(list(catalogue.SCENARIOS), ("broken", "fixed"), args.runtime, args.out, index=True)


def _list(scenarios) -> int:
    from rich.console import Console
    from rich.table import Table

    table = Table(show_header=True, header_style="bold")
    for column in ("scenario", "layer", "path", "symptom"):
        table.add_column(column)
    for s in scenarios:
        table.add_row(s.name, s.layer, " -> ".join((*s.path, "server")), s.symptom)
    Console().print(table)
    return 0


def _run(scenarios, variants, runtime, out: Path, *, as_json: bool = False, index: bool = False) -> int:
    from rich.console import Console

    from labs import report
    from labs.runner import Lab

    console = Console(stderr=as_json)
    outcomes = []
    failed = False
    with console.status("starting") as status, Lab(runtime=runtime, progress=status.update) as lab:
        for scenario in scenarios:
            outcome = lab.run(scenario, variants)
            outcomes.append(outcome)
            status.update(f"{scenario.name}: writing the report")
            paths = report.write_report(outcome, out / scenario.name)
            if as_json:
                print(json.dumps(report.report_dict(outcome), indent=2, default=str))
            else:
                status.stop()
                report.print_outcome(outcome, console)
                pictures = "  ".join(str(paths[k]) for k in ("png", "hops") if k in paths)
                console.print(f"report: {paths['md']}  pictures: {pictures}")
                status.start()
            failed |= not all(outcome.passed(v) for v in outcome.runs)
    if index:
        console.print(f"index: {report.write_index(outcomes, out)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
