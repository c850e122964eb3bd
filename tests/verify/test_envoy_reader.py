"""Envoy's reader on verify's one pipeline: --header reaches its route's `headers` matchers, and a
config that serves none of the requests tried gets the shared error (labs/verify/route.py)."""
from __future__ import annotations

import pytest

from labs.findings import UnusableInput
from labs.verify import read_config
from labs.verify.model import RouteWanted
from tests.verify.test_envoy_wild import chosen_cluster, envoy
from tests.verify.test_static import write

BY_TEAM = """              - match: {prefix: /v1/, headers: [{name: x-team, string_match: {exact: research}}]}
                route: {cluster: other}
              - match: {prefix: /v1/}
                route: {cluster: c}"""


@pytest.mark.parametrize("headers, cluster", [
    ((("X-Team", "research"),), "other"),  # --header X-Team: research reaches the matcher
    ((("X-Team", "sales"),), "c"),
    ((), "c"),  # no such header: the matcher does not hold
])
def test_a_header_given_with_header_picks_the_route(tmp_path, headers, cluster):
    path = write(tmp_path, "envoy.yaml", envoy(BY_TEAM))
    reading = read_config(path, "envoy", RouteWanted(headers=headers))
    assert chosen_cluster(reading) == cluster
    if headers:
        assert "--header X-Team" in reading.why


def test_no_route_for_the_request_is_the_shared_error(tmp_path):
    path = write(tmp_path, "envoy.yaml", envoy("""              - match: {prefix: /admin/}
                route: {cluster: c}"""))
    with pytest.raises(UnusableInput) as raised:
        read_config(path, "envoy", RouteWanted(path="/v1/chat/completions"))
    said = str(raised.value)
    assert "no route proxies POST /v1/chat/completions; the proxied routes are: listener l > virtual host v" in said
    assert "(choose one with --path, --host or --header)" in said


def test_a_config_that_proxies_nothing_says_so(tmp_path):
    path = write(tmp_path, "envoy.yaml", envoy("""              - match: {prefix: /}
                direct_response: {status: 200}"""))
    with pytest.raises(UnusableInput, match="nothing is proxied: no route of a listener's HTTP connection manager"):
        read_config(path, "envoy")


def test_a_catch_all_route_is_chosen_after_one_written_for_the_api(tmp_path):
    path = write(tmp_path, "envoy.yaml", envoy("""              - match: {prefix: /api/chat/}
                route: {cluster: other}
              - match: {prefix: /}
                route: {cluster: c}"""))
    reading = read_config(path, "envoy")
    assert chosen_cluster(reading) == "other" and reading.path == "/api/chat/completions"
