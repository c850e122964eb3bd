"""verify on the corpus of published configs (tests/data/wild/): every one it reads is read,
rewritten and accepted by its proxy's own check; a share is measured, and what verify finds is
held against the expectations written down before verify ever ran on them."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from labs.findings import UnusableInput
from labs.verify import read_config, verify_config
from labs.verify.kinds import KINDS
from labs.verify.launch import validate
from labs.verify.model import RouteWanted
from labs.verify.run import rewrite_config
from labs.verify.trials import CHECK_KINDS
from tests.ids import other_id

WILD = Path(__file__).resolve().parent.parent / "data" / "wild"
CORPUS = {d.name: json.loads((d / "wild.json").read_text()) for d in sorted(WILD.iterdir())
          if (d / "wild.json").is_file()}
# Traefik configs whose routers live in another provider's objects (Docker labels): verify reads
# the file provider only, and says so (test below).
ELSEWHERE = sorted(name for name, w in CORPUS.items()
                   if w["proxy"] == "traefik" and "labels" in w["route"]["why"].lower())
READ = sorted(name for name, w in CORPUS.items() if w["proxy"] in KINDS and name not in ELSEWHERE)
# Measured in `make test` (quick: the checks the reading calls for): faults and clean paths of
# each shape (site files, whole configs, Envoy), chosen so each kind verify suspects here is held
# against a config that has it and one that does not.
# STREAMLAB_WILD_ALL=1 measures every config read (about 30 s each, the default checks: ~16 min).
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


def test_the_corpus_is_read_but_routers_in_docker_labels():
    assert len(READ) >= 31 and set(CORPUS) - set(READ) == set(ELSEWHERE)


@pytest.mark.parametrize("name", ELSEWHERE, ids=[other_id(n) for n in ELSEWHERE])
def test_routers_in_another_providers_labels_are_refused_in_one_line(name):
    with pytest.raises(UnusableInput, match="the routers come from the docker provider"):
        read_config(entry(name), CORPUS[name]["proxy"], wanted(name))


ALL = bool(os.environ.get("STREAMLAB_WILD_ALL"))


@pytest.mark.slow
@pytest.mark.parametrize("name", READ if ALL else MEASURED, ids=[other_id(n) for n in (READ if ALL else MEASURED)])
def test_what_verify_measures_agrees_with_the_written_expectation(verify_server, name):
    report = verify_config(entry(name), proxy=CORPUS[name]["proxy"], wanted=wanted(name), quick=not ALL,
                           server=verify_server)
    measured = {kind for c in report.checks if c.ran and not c.skipped for kind in CHECK_KINDS.get(c.name, ())}
    found = {f.kind for f in report.failures()}
    expected = {k for k, v in CORPUS[name]["expected"].items() if v == "fault"}
    assert found == expected & (measured | found), (report.checks, report.findings)
    assert next(c for c in report.checks if c.name == "loopback-only").passed
