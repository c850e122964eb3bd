"""`python -m labs load URL`: steps of concurrent streams against a deployed path, the first limit
it hits, and reports/load-<host>/ (report.json, report.md, load.png)."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from labs import provenance
from labs.client.apis import DEFAULT_API, add_api_option
from labs.findings import EXIT_UNUSABLE, UnusableInput
from labs.pathload.ramp import (LoadSettings, OwnPath, exit_status, findings, first_limit_hit,
                                inconclusive_json, run_load, run_step, verdict)
from labs.load.analysis import PathResult
from server.locations import reports_dir

STEP_OVERHEAD_S = 2.0  # connects, the drain, the pause between steps
LOCUST_OVERHEAD_S = 4.0  # Locust's master and workers start and meet once per step

EPILOG = """\
URL is an OpenAI base URL (http://host:port/v1). Behind it, the lab's server as a canary origin
paces every stream (--rate, --duration); any other origin gets an ordinary prompt with
max_tokens = rate x duration and streams at its own pace, which a one-stream baseline measures.
Every step is judged against that baseline by the load lab's rules (make lab-load).
With --locust the streams come from Locust (pip install 'streamlab[locust]'): a master and
--workers local workers, headless; across machines see docs/load.md (locust --master / --worker).
Exit status: 0 every step healthy, 1 the path hit a limit, 2 no verdict: the input cannot be
used, or the run was inconclusive (a step was limited only by the client machine's CPU and no
step showed a limit of the path's; JSON "verdict": "inconclusive", "ok": false).
"""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m labs load", description=__doc__.splitlines()[0],
                                epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("url", metavar="URL", help="OpenAI base URL of the path's entry")
    p.add_argument("--streams", default="10,100,300", metavar="N[,N...]",
                   help="concurrent streams per step, after a one-stream baseline (default 10,100,300)")
    p.add_argument("--rate", type=float, default=20.0, metavar="TOK_S",
                   help="tokens/s per stream a canary paces (default 20)")
    p.add_argument("--duration", type=float, default=8.0, metavar="S",
                   help="seconds each stream lasts (default 8)")
    p.add_argument("--ramp", type=float, default=0.0, metavar="S",
                   help="spread a step's starts over S seconds (default 0: all at once)")
    p.add_argument("--api-key-env", metavar="VAR", help="environment variable holding the API key")
    add_api_option(p.add_argument)
    p.add_argument("--model", metavar="M", help="model to ask for (default: the first listed)")
    p.add_argument("--lab-token-env", default="STREAMLAB_LAB_TOKEN", metavar="VAR",
                   help="environment variable holding the canary's lab token, sent as X-Lab-Token")
    p.add_argument("--locust", action="store_true", help="drive the streams with Locust")
    p.add_argument("--workers", type=int, default=2, metavar="N",
                   help="local Locust workers with --locust (default 2)")
    p.add_argument("--out", type=Path, help="report folder (default reports/load-<host>/)")
    p.add_argument("--json", action="store_true", help="print one JSON document instead of tables")
    p.add_argument("--print-body", action="store_true",
                   help="print the body every stream sends and exit (locust --stream-body)")
    return p


def _streams(text: str) -> list[int]:
    try:
        counts = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise UnusableInput(f"--streams {text!r}: give stream counts such as 100,300") from None
    if not counts or any(n < 1 for n in counts):
        raise UnusableInput(f"--streams {text!r}: give positive stream counts such as 100,300")
    return sorted(set(counts))


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    from rich.console import Console

    console = Console(stderr=args.json)
    try:
        settings = LoadSettings(streams=_streams(args.streams), tokens_per_s=args.rate,
                                duration_s=args.duration, ramp_s=args.ramp,
                                lab_token_env=args.lab_token_env, api_key_env=args.api_key_env,
                                model=args.model, api=args.api)
        settings.check()
        if args.workers < 1:
            raise UnusableInput("--workers: at least 1")
        if args.locust and args.api != DEFAULT_API:  # labs/load/locustfile.py reads chat's events
            raise UnusableInput(f"--locust streams {DEFAULT_API} only: drop --api {args.api} or --locust")
        if args.locust:
            from labs.pathload.locust_run import require_locust
            require_locust()
        path = OwnPath(args.url, settings)
        path.detect()
        if args.print_body:
            print(json.dumps(path.body(), separators=(",", ":")))
            return 0
        result, wall = _run(path, args, console)
    except (UnusableInput, RuntimeError, OSError) as exc:  # RuntimeError: Locust did not run
        if args.json:
            print(json.dumps({"url": args.url, "ok": False, "error": str(exc)}, indent=2))
        Console(stderr=True).print(f"[red]error[/red]: {exc}", highlight=False)
        return EXIT_UNUSABLE
    out = args.out or reports_dir() / f"load-{path.host}"
    written = write(path, result, out, args, wall)
    if args.json:
        print(json.dumps(document(path, result), indent=2, default=str))
    else:
        from labs.load import report
        report.print_path(result, console)
        console.print(f"report: {written['md']}  picture: {written['png']}  ({wall:.0f} s)")
    return exit_status(result.steps)


def _run(path: OwnPath, args: argparse.Namespace, console: Any) -> tuple[PathResult, float]:
    from labs.progress import WorkBar

    step_runner = run_step
    overhead = STEP_OVERHEAD_S
    if args.locust:
        from labs.pathload.locust_run import run_locust_step

        overhead += LOCUST_OVERHEAD_S

        def step_runner(p, n, rate, baseline):  # type: ignore[no-untyped-def]
            return run_locust_step(p, n, rate, baseline, workers=args.workers)

    each = path.settings.duration_s + path.settings.ramp_s + overhead
    plan = each * (1 + len(path.settings.streams))
    started = time.monotonic()
    client = f"Locust, {args.workers} workers" if args.locust else "the lab's client"
    with WorkBar(console, plan, f"load {path.host}") as bar:
        bar.say(f"{'canary' if path.canary else 'origin'} {path.probe.model}; {client}")
        result = run_load(path, progress=bar.say, on_step=lambda step: bar.advance(each),
                          step_runner=step_runner)
        bar.finish(f"{len(result.steps)} steps")
    return result, time.monotonic() - started


def document(path: OwnPath, result: PathResult) -> dict[str, Any]:
    """The --json document, shaped like probe's."""
    found = findings(result.steps)
    hit = first_limit_hit(result.steps)
    said = verdict(result.steps)
    return {"url": path.url, "ok": said == "ok", "verdict": said, "origin": path.probe.origin,
            "findings": [f.to_json() for f in found],
            "first_limit": None if hit is None else {
                "at_streams": hit.concurrency, "limits": [vars(x) for x in hit.limits]},
            "inconclusive": inconclusive_json(result.steps),
            "steps": [s.to_dict() for s in result.steps]}


def write(path: OwnPath, result: PathResult, out: Path, args: argparse.Namespace,
          wall: float) -> dict[str, Path]:
    from labs.load import report

    client = (f"Locust ({args.workers} local workers, labs/load/locustfile.py)" if args.locust
              else "the lab's lean asyncio client on uvloop")
    pace = (f"the canary paces each stream at {path.settings.tokens_per_s:g} tok/s for "
            f"{path.settings.duration_s:g} s" if path.canary else
            f"the origin streams at its own pace ({result.steps[0].tokens_per_s:.1f} tok/s in the "
            f"baseline); each stream asks for max_tokens {path.tokens()}")
    intro = (f"Load on your own path {path.url}: a one-stream baseline, then steps of N streams at "
             f"once ({pace}). The same rules as the load lab: a step is healthy when every "
             f"stream completed, >= 90% of the ideal N x the per-stream rate arrived, TTFT p99 <= "
             f"1 s and gap p99 <= 2 token intervals. Only the client's side is measured: CPU "
             f"columns show the client (and the whole machine), so a client out of CPU is never "
             f"taken for the path's limit. The client is {client}.")
    given = list(sys.argv[1:])
    meta = {"duration_s": path.settings.duration_s, "tokens_per_s": path.settings.tokens_per_s,
            "wall_s": wall, "intro": intro, "client": "locust" if args.locust else "lab",
            "command": "python -m labs " + " ".join(given) if given[:1] == ["load"] else
                       "python -m labs load " + " ".join(given),
            "origin": path.probe.origin, "url": path.url, "started": provenance.started_now()}
    return report.write_report([result], out, meta)


if __name__ == "__main__":
    sys.exit(main())
