"""verify on the corpus of published configs (tests/data/wild/): every one it reads is read,
rewritten and accepted by its proxy's own check; a share is measured, and what verify finds is
held against the expectations written down before verify ever ran on them."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from labs.findings import FINDING_KINDS, UnusableInput
from labs.findings.report import CheckOutcome, Finding, PathReport
from labs.verify import read_config, verify_config
from labs.verify.readers import READERS
from labs.verify.launch import validate
from labs.verify.model import RouteWanted
from labs.verify.run import rewrite_config
from labs.verify.trials import CHECK_KINDS
from proxies.kinds import KINDS as PROXY_KINDS
from tests.ids import other_id

WILD = Path(__file__).resolve().parent.parent / "data" / "wild"
CORPUS = {d.name: json.loads((d / "wild.json").read_text()) for d in sorted(WILD.iterdir())
          if (d / "wild.json").is_file()}
# Traefik configs whose routers live in another provider's objects (Docker labels): verify reads
# the file provider only, and says so (test below).
ELSEWHERE = sorted(name for name, w in CORPUS.items()
                   if w["proxy"] == "traefik" and "labels" in w["route"]["why"].lower())
READ = sorted(name for name, w in CORPUS.items() if w["proxy"] in READERS and name not in ELSEWHERE)
# Measured in `make test` (quick: the checks the reading calls for): faults and clean paths of
# each shape (site files, whole configs, Envoy), chosen so each kind verify suspects here is held
# against a config that has it and one that does not.
# STREAMLAB_WILD_ALL=1 measures every config read with the default checks (2026-12-06: 921 s for the
# 31 in-sample configs, 335 s for the 10 held out, 35 s for the 3 held out later; 92 s for those
# 3 after their fixes, judged at last).
# rag-system-proxy-nginx (held out) adds a connection-limit fault, which quick mode suspects from its
# limit_conn; rag-system-haproxy (held out) one quick mode suspects from its stick-table rate limit
# (read since the first run: 73 of 100 streams got 429 in quick mode; docs/verify.md, "The configs
# it is tested on"), with its documented disconnect-not-propagated disagreement.
MEASURED = ("agenta-compose-nginx", "onyx-app-conf", "ragflow-python-site", "librechat-client-nginx",
            "envoy-ai-gateway-vcr", "dstack-gateway-entrypoint", "opea-edgecraftrag-ui",
            "semantic-router-bench-envoy", "rag-system-proxy-nginx", "rag-system-haproxy")

# After-fix records: a held-out config whose first run (`first_result`, never written over) a later
# change cured, held to what it gives now instead: its first refusal is no longer expected, and the
# kinds named here are measured (a check of theirs ran and could tell) in the full run. The figure
# after the fix stands beside the first one in docs/verify.md, "The configs it is tested on".
EVERY_KIND = FINDING_KINDS
AFTER_FIX = {
    # a dynamic file alone runs the entry points its routers name (`entrypoints: websecure`)
    "aijias-litellm-traefik": EVERY_KIND,
    # --proxy traefik on an IngressRoute runs its translation, as detection does
    "kreatoo-open-webui-ingressroute": EVERY_KIND,
    # a coalescing bind (3 events a read, first token on time) is no buffering hop to the burst's judge
    "dmr-ollama-haproxy": ("connection-limit",),
    # --proxy nginx on an HTTPRoute reads it as NGINX Gateway Fabric's (its Gateway is in another file)
    "inference-extension-ngf-httproute": EVERY_KIND,
}


# The releases the corpus runs on (labs/verify/releases.py): the expectations were written for
# the oldest, Debian 12's (their reasons cite nginx 1.22's HTTP/1.0 default and what HAProxy 2.6
# measured); the current one is what `labs verify` runs without --proxy-version.
RELEASES = ("oldest", "current")
# What the current release measures otherwise than the written expectation, config -> kind ->
# (what it shows there, why). Never an edit of wild.json: the expectation stays and the oldest
# release's run holds it. Measured 2026-12-06 (`labs verify --proxy-version` on each release,
# quick checks): nginx 1.30.6 speaks HTTP/1.1 to the server by default (1.29.7), so a route that
# leaves proxy_buffering and proxy_http_version at their defaults streams (12 events in 12 reads;
# 1.22.1: 1 read, held to the end); HAProxy 3.2.26 groups events on this ssl bind without
# http-no-delay (12 events in 5 reads, 102 ms late), where 2.6.12 sent 12 in 12.
NGINX_11 = ("clean", "nginx 1.30 speaks HTTP/1.1 to the server by default: the reply is chunked, not "
                     "close-delimited, and proxy_buffering on passes each event on (12 events in 12 reads)")
ON_CURRENT = {  # the nginx ones with the streaming check on every config expected to buffer
    **{name: {"buffering": NGINX_11} for name in (
        "agenta-compose-nginx", "agenta-railway-gateway", "bisheng-client-site", "chatgpt-web-nginx",
        "fastgpt-docs-nginx", "langflow-frontend-nginx", "librechat-client-nginx")},
    "rag-system-haproxy": {"coalescing": ("fault", "HAProxy 3.2.26 groups the events on the ssl bind "
                                                   "without option http-no-delay: 12 events in 5 reads")},
}


def expected_on(name: str, release: str) -> dict[str, str]:
    """The written expectation, with the current release's measured differences (ON_CURRENT)."""
    changed = ON_CURRENT.get(name, {}) if release == "current" else {}
    return {**CORPUS[name]["expected"], **{kind: said for kind, (said, _) in changed.items()}}


def series(name: str, release: str) -> str:
    """The --proxy-version that picks that release of the config's proxy."""
    releases = PROXY_KINDS[CORPUS[name]["proxy"]].releases
    return (releases[0] if release == "oldest" else releases[-1]).series


def wanted(name: str, release: str = "current") -> RouteWanted:
    route = CORPUS[name]["route"]  # headers: what a user of that gateway sends (--header)
    return RouteWanted(path=route["path"], host=route["host"], headers=tuple(route.get("headers", {}).items()),
                       version=series(name, release))


def entry(name: str) -> Path:
    return WILD / name / CORPUS[name]["entry"]


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("name", READ, ids=[other_id(n) for n in READ])
def test_a_published_config_is_read_rewritten_and_accepted_by_its_proxy(name, release, tmp_path):
    proxy = CORPUS[name]["proxy"]
    try:
        reading = read_config(entry(name), proxy, wanted(name, release))
    except UnusableInput as refused:
        # a held-out config verify refused at its first run is refused as recorded (the agreement
        # test holds that both ways); any other refusal fails here
        assert str(refused).strip() == documented_error(name), refused
        return
    assert reading.path == CORPUS[name]["route"]["path"] and reading.routes
    # Where the expectation names the router it was written for, verify judges that one (the held-out
    # local-ai-podman-traefik was first judged on router langfuse, its Host(`${...}`) taken as a Host sent).
    router = re.match(r"router `([^`]+)`", CORPUS[name]["route"]["why"])
    assert router is None or f"router {router[1]} (" in reading.route, reading.route
    rewritten = rewrite_config(reading, 65000, tmp_path)  # refuses anything but loopback
    assert rewritten.series == series(name, release)
    validate(rewritten)  # that release's own check: the rewrite kept a config it accepts


def test_the_corpus_is_read_but_routers_in_docker_labels():
    assert len(READ) >= 42 and set(CORPUS) - set(READ) == set(ELSEWHERE)


@pytest.mark.parametrize("name", ELSEWHERE, ids=[other_id(n) for n in ELSEWHERE])
def test_routers_in_another_providers_labels_are_refused_in_one_line(name):
    with pytest.raises(UnusableInput, match="the routers come from the docker provider"):
        read_config(entry(name), CORPUS[name]["proxy"], wanted(name))


ALL = bool(os.environ.get("STREAMLAB_WILD_ALL"))


@pytest.mark.slow
@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("name", READ if ALL else MEASURED, ids=[other_id(n) for n in (READ if ALL else MEASURED)])
def test_what_verify_measures_agrees_with_the_written_expectation(verify_server, request, name, release):
    if (error := documented_error(name)) is not None:
        # A held-out config verify could not judge at its first run (exit 2, `first_result.error`)
        # is refused with that same line until a change makes it judge it: a cure fails here too.
        with pytest.raises(UnusableInput) as refused:
            verify_config(entry(name), proxy=CORPUS[name]["proxy"], wanted=wanted(name, release), quick=not ALL,
                          server=verify_server)
        assert str(refused.value).strip() == error
        return
    if CORPUS[name]["proxy"] == "traefik":
        # Traefik on Go's proxy ends a few streams in a thousand just after their headers when the
        # server answers at once (docs/field-notes.md#traefiks-early-cut; verify reports it, and
        # tests/verify/test_early_cut.py shows so): the corpus's Traefik runs ask for the headers a
        # little late, as the suite's other clean Traefik runs do (conftest.HEADERS_LATE_S).
        request.getfixturevalue("headers_late")
    report = verify_config(entry(name), proxy=CORPUS[name]["proxy"], wanted=wanted(name, release), quick=not ALL,
                           server=verify_server)
    assert report.measured_on["series"] == series(name, release)
    agreement = agreement_of(report, expected_on(name, release))
    # A held-out config's disagreement stays as its first run recorded it (never written over): the
    # run must show exactly the documented ones, so a cure shows as well as a new disagreement.
    disagreeing = agreement["false"] | agreement["missed"]
    assert disagreeing == documented_disagreements(name), (agreement, report.checks, report.findings)
    # An expected fault no check measured is not an agreement: quick mode must suspect it from the
    # reading (else `make test` would pass a verify that never looks), the full run runs every check.
    assert not agreement["not measured"], ("expected fault not measured", agreement, report.checks)
    assert next(c for c in report.checks if c.name == "loopback-only").passed
    if ALL and name in AFTER_FIX:  # what the fix made measurable is measured
        assert set(AFTER_FIX[name]) <= measured_kinds(report), (AFTER_FIX[name], report.checks)


def documented_error(name: str) -> str | None:
    """The one line a held-out config's first verify run exited 2 with (`first_result.error`), if
    any, and no fix since has cured it (AFTER_FIX)."""
    return None if name in AFTER_FIX else CORPUS[name].get("first_result", {}).get("error")


def documented_disagreements(name: str) -> set[str]:
    """The kinds a held-out config's first verify run (`first_result`) disagreed on; none in-sample."""
    kinds = CORPUS[name].get("first_result", {}).get("kinds", {})
    return {kind for kind, said in kinds.items() if said.startswith("disagrees")}


def agreement_of(report, expected: dict[str, str]) -> dict[str, set[str]]:
    """Each expected fault is found, missed (a check measured its kind and found nothing) or not
    measured (no check of its kind ran or could tell); a kind found where clean was expected is false."""
    measured = measured_kinds(report)
    found = {f.kind for f in report.failures()}
    faults = {k for k, v in expected.items() if v == "fault"}
    return {"found": faults & found, "missed": (faults & measured) - found,
            "not measured": faults - measured - found, "false": found - faults}


def measured_kinds(report) -> set[str]:
    """The kinds a check of the report measured: it ran and could tell (not skipped)."""
    return {kind for c in report.checks if c.ran and not c.skipped for kind in CHECK_KINDS.get(c.name, ())}


def test_an_expected_fault_no_check_measured_is_not_measured_never_agreed():
    expected = {"buffering": "fault", "total-timeout": "fault", "idle-timeout": "clean", "coalescing": "clean"}
    # quick mode ran only the stream: total-timeout's check never ran, so it cannot count as agreeing
    streamed = PathReport(checks=[CheckOutcome("streaming", False, "held", kind="buffering")],
                          findings=[Finding("buffering", "failure", "held 8 KB")])
    assert agreement_of(streamed, expected) == {"found": {"buffering"}, "missed": set(),
                                                "not measured": {"total-timeout"}, "false": set()}
    # the long stream ran and passed: the fault was measured and missed; a skipped check measured nothing
    both = PathReport(checks=[CheckOutcome("streaming", True, "paced"),
                              CheckOutcome("long-stream", True, "22 s whole"),
                              CheckOutcome("silence-mid-stream", False, "", skipped="no stream", ran=True)],
                      findings=[Finding("idle-timeout", "failure", "cut at 10 s")])
    assert agreement_of(both, expected) == {"found": set(), "missed": {"buffering", "total-timeout"},
                                            "not measured": set(), "false": {"idle-timeout"}}
