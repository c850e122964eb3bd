"""verify on the corpus of published configs (tests/data/wild/): every one it reads is read,
rewritten and accepted by its proxy's own check; a share is measured, and what verify finds is
held against the expectations written down before verify ever ran on them."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from labs.verify import read_config, verify_config
from labs.verify.kinds import KINDS
from labs.verify.launch import validate
from labs.verify.model import RouteWanted
from labs.verify.run import rewrite_config
from tests.ids import other_id

WILD = Path(__file__).resolve().parent.parent / "data" / "wild"
CORPUS = {d.name: json.loads((d / "wild.json").read_text()) for d in sorted(WILD.iterdir())
          if (d / "wild.json").is_file()}
READ = sorted(name for name, w in CORPUS.items() if w["proxy"] in KINDS)
# Measured in `make test` (quick: the checks the reading calls for): faults and clean paths of
# each shape (site files, whole configs, Envoy), chosen so each kind verify suspects here is held
# against a config that has it and one that does not.
MEASURED = ("agenta-compose-nginx", "onyx-app-conf", "ragflow-python-site", "librechat-client-nginx",
            "envoy-ai-gateway-vcr", "dstack-gateway-entrypoint", "opea-edgecraftrag-ui",
            "semantic-router-bench-envoy")


def wanted(name: str) -> RouteWanted:
    route = CORPUS[name]["route"]  # headers: what a user of that gateway sends (--header)
    return RouteWanted(path=route["path"], host=route["host"], headers=tuple(route.get("headers", {}).items()))


def entry(name: str) -> Path:
    return WILD / name / CORPUS[name]["entry"]


@pytest.mark.parametrize("name", READ, ids=[other_id(n) for n in READ])
def test_a_published_config_is_read_rewritten_and_accepted_by_its_proxy(name, tmp_path):
    proxy = CORPUS[name]["proxy"]
    reading = read_config(entry(name), proxy, wanted(name))
    assert reading.path == CORPUS[name]["route"]["path"] and reading.routes
    rewritten = rewrite_config(entry(name), reading, 65000, tmp_path)  # refuses anything but loopback
    validate(rewritten)  # the proxy's own check: the rewrite kept a config it accepts


def test_the_corpus_is_mostly_read():
    """The proxies verify reads cover the corpus but its Traefik (issue of its own) and Caddy files."""
    assert len(READ) >= 28 and {CORPUS[n]["proxy"] for n in set(CORPUS) - set(READ)} <= {"caddy", "traefik"}


@pytest.mark.slow
@pytest.mark.parametrize("name", MEASURED, ids=[other_id(n) for n in MEASURED])
def test_what_verify_measures_agrees_with_the_written_expectation(verify_server, name):
    report = verify_config(entry(name), proxy=CORPUS[name]["proxy"], wanted=wanted(name), quick=True,
                           server=verify_server)
    measured = {c.kind for c in report.checks if c.kind and not c.skipped}
    found = {f.kind for f in report.failures()}
    expected = {k for k, v in CORPUS[name]["expected"].items() if v == "fault"}
    assert found == expected & (measured | found), (report.checks, report.findings)
    assert next(c for c in report.checks if c.name == "loopback-only").passed
