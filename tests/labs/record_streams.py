"""Record the streams tests/data/streams/ holds: real runs of catalogue scenarios on this machine.

    python -m tests.labs.record_streams            # every recording below (about a minute)
    python -m tests.labs.record_streams nginx-gzip

Each file is one variant's run: the streams as the measuring client saw them (`StreamResult`,
the per-event text dropped), the seconds the server kept working after the clients were done
(`release_s`) and the `lab` knobs the requests carried. The findings tests feed them to verify's
and probe's judgement (tests/labs/test_findings_agree.py).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from labs import catalogue
from labs.client.results import StreamResult
from labs.scenario.model import Run
from labs.scenario.runner import Lab

FOLDER = Path(__file__).resolve().parents[1] / "data" / "streams"
# (scenario, variant): a buffered stream and a clean one, grouped events, a compressed stream held
# to its end, a stream cut in a silence, a departure noticed late and one noticed at once, and a
# burst whose first tokens came in waves.
RECORDINGS = [("nginx-buffering", "broken"), ("haproxy-nodelay", "broken"), ("haproxy-nodelay", "fixed"),
              ("nginx-gzip", "broken"), ("nginx-read-timeout", "broken"), ("nginx-read-timeout", "fixed"),
              ("haproxy-abortonclose", "broken"), ("haproxy-abortonclose", "fixed"),
              ("haproxy-maxconn", "broken"), ("haproxy-maxconn", "fixed")]


def path_of(scenario: str, variant: str) -> Path:
    return FOLDER / f"{scenario}-{variant}.json"


def recorded(run: Run) -> dict[str, Any]:
    streams = []
    for result in run.results:
        data = result.to_dict()
        data.pop("summary")
        for event in data["events"]:
            event["text"] = ""
        streams.append(data)
    return {"release_s": run.release_s, "lab": run.knobs, "streams": streams}


def dumped(data: dict[str, Any]) -> str:
    """One stream per line: small enough to keep, and a diff still shows which stream moved."""
    head = {k: v for k, v in data.items() if k != "streams"}
    lines = [json.dumps(s, separators=(",", ":")) for s in data["streams"]]
    return json.dumps(head)[:-1] + ', "streams": [\n' + ",\n".join(lines) + "\n]}\n"


def load(scenario: str, variant: str) -> tuple[list[StreamResult], dict[str, Any]]:
    """The recorded streams of one variant, and the rest of its recording."""
    data = json.loads(path_of(scenario, variant).read_text())
    return [StreamResult.from_dict(s) for s in data["streams"]], data


def main(names: list[str]) -> None:
    by_name = {s.name: s for s in catalogue.SCENARIOS}
    with Lab() as lab:
        for scenario, variant in RECORDINGS:
            if names and scenario not in names:
                continue
            run = lab.run_variant(by_name[scenario], variant)  # type: ignore[arg-type]
            path_of(scenario, variant).write_text(dumped(recorded(run)))
            print(f"{path_of(scenario, variant)}: {len(run.results)} streams, release {run.release_s}")


if __name__ == "__main__":
    main(sys.argv[1:])
