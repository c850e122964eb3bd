"""Traefik's reader on verify's one pipeline: --header reaches a router's `Header()` and
`HeaderRegexp()` matchers, a header the request does not carry is taken as matching and said, and
a config that serves none of the requests tried gets the shared error (labs/verify/route.py)."""
from __future__ import annotations

import pytest

from labs.findings import UnusableInput
from labs.verify import read_config
from labs.verify.model import RouteWanted
from tests.verify.test_static import write

BY_TEAM = """\
http:
  routers:
    research:
      rule: "PathPrefix(`/v1`) && %s"
      service: research
    everyone:
      rule: "PathPrefix(`/v1`)"
      service: everyone
  services:
    research: {loadBalancer: {servers: [{url: "http://10.0.0.1:8000"}]}}
    everyone: {loadBalancer: {servers: [{url: "http://10.0.0.2:8000"}]}}
"""


@pytest.mark.parametrize("matcher", ["Header(`X-Team`, `research`)", "HeaderRegexp(`X-Team`, `^res`)"])
@pytest.mark.parametrize("team, router", [("research", "research"), ("sales", "everyone")])
def test_a_header_given_with_header_picks_the_router(tmp_path, matcher, team, router):
    path = write(tmp_path, "dynamic.yml", BY_TEAM % matcher)
    reading = read_config(path, "traefik", RouteWanted(headers=(("x-team", team),)))
    assert f"router {router} " in reading.route and "--header x-team" in reading.why
    assert not any("taken as matching" in note for note in reading.notes)


def test_a_header_the_request_does_not_carry_is_taken_as_matching_and_said(tmp_path):
    path = write(tmp_path, "dynamic.yml", BY_TEAM % "Header(`X-Team`, `research`)")
    reading = read_config(path, "traefik")
    assert "router research " in reading.route
    assert any("taken as matching" in note and "Header(`X-Team`, `research`)" in note for note in reading.notes)


def test_a_header_verifys_request_carries_is_evaluated(tmp_path):
    """The Accept verify's measured requests send is what the matcher sees, never assumed."""
    path = write(tmp_path, "dynamic.yml", BY_TEAM % "Header(`Accept`, `application/json`)")
    assert "router everyone " in read_config(path, "traefik").route


def test_no_router_for_the_request_is_the_shared_error(tmp_path):
    path = write(tmp_path, "dynamic.yml", (BY_TEAM % "Method(`POST`)").replace("`/v1`", "`/admin`"))
    with pytest.raises(UnusableInput) as raised:
        read_config(path, "traefik", RouteWanted(path="/v1/chat/completions"))
    said = str(raised.value)
    assert "no route proxies POST /v1/chat/completions; the proxied routes are: router research:" in said
    assert "(choose one with --path, --host or --header)" in said


def test_a_catch_all_router_is_chosen_after_one_written_for_the_api(tmp_path):
    path = write(tmp_path, "dynamic.yml", """\
http:
  routers:
    everything:
      rule: "PathPrefix(`/`)"
      priority: 100
      service: ui
    api:
      rule: "PathPrefix(`/api/chat`)"
      priority: 200
      service: llm
  services:
    ui: {loadBalancer: {servers: [{url: "http://10.0.0.1:3000"}]}}
    llm: {loadBalancer: {servers: [{url: "http://10.0.0.2:8000"}]}}
""")
    reading = read_config(path, "traefik")
    assert "router api " in reading.route and reading.path == "/api/chat/completions"
