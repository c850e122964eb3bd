"""HAProxy's defaults by version (`--proxy-version`): 3.3 turned abortonclose on in HTTP proxies,
2.8 offers h2 on an ssl bind without alpn; a release standing in for a version the lab has no
binary of (2.6 for 2.8, 3.2 for 3.3) behaves as the version the config is written for. And what
was measured: on 2.6 abortonclose works only on both sides, on 3.2 the backend's alone."""
from __future__ import annotations

import pytest

from labs.findings import UnusableInput
from labs.verify import read_config, verify_config
from labs.verify.model import RouteWanted
from tests.verify.test_haproxy_wild import run_here
from tests.verify.test_static import write

TOP = ("defaults\n    mode http\n    timeout connect 5s\n    timeout client 1h\n    timeout server 1h\n"
       "    option http-no-delay\n{defaults}")
PLAIN = TOP + "frontend fe\n    bind :80\n{frontend}    default_backend llm\nbackend llm\n{backend}" \
              "    server m1 10.0.0.7:8000\n"
ON = "    option abortonclose\n"


def config(tmp_path, defaults: str = "", frontend: str = "", backend: str = ""):
    return write(tmp_path, "haproxy.cfg", PLAIN.format(defaults=defaults, frontend=frontend, backend=backend))


def abortonclose(path, version: str | None = None):
    return read_config(path, "haproxy", RouteWanted(version=version)).get("option abortonclose")


@pytest.mark.parametrize("where, on_26, on_32, on_33", [
    ({}, False, False, True),  # 3.3's default in HTTP proxies
    ({"defaults": ON}, True, True, True),
    ({"backend": ON}, False, True, True),  # 2.6: the frontend lacks it; 3.2: enough (measured below)
    ({"frontend": ON}, False, False, True),  # 2.6 ignores a frontend's own line (3.2 refuses it)
    ({"defaults": ON, "backend": "    no option abortonclose\n"}, False, False, False),
    ({"frontend": "    no option abortonclose\n"}, False, False, False),  # 3.3: a frontend may say it
])
def test_abortonclose_is_read_on_both_sides_by_version(tmp_path, where, on_26, on_32, on_33):
    path = config(tmp_path, **where)
    assert abortonclose(path, "2.6").value is on_26
    assert abortonclose(path, "3.2").value is on_32
    assert abortonclose(path).value is on_32  # no flag: the current release, 3.2
    assert abortonclose(path, "3.3").value is on_33


def test_a_backend_only_abortonclose_is_named_and_a_listen_section_has_both_sides(tmp_path):
    setting = abortonclose(config(tmp_path, backend=ON), "2.6")
    assert "in backend llm only: frontend fe needs it too" in setting.text and setting.where.endswith(":11")
    listen = write(tmp_path, "listen.cfg", TOP.format(defaults="") + "listen chat\n    bind :80\n" + ON
                   + "    server m1 10.0.0.7:8000\n")
    assert abortonclose(listen).value is True


def test_the_rewrite_writes_33s_default_where_both_sides_inherit_it(tmp_path):
    reading, rewritten, text = run_here(config(tmp_path), tmp_path, RouteWanted(version="3.3"))
    assert reading.version == "3.3"
    assert text.index("option abortonclose  # streamlab verify: HAProxy 3.3's default") < text.index("frontend fe")
    assert any("3.3's defaults are written into the run" in n for n in rewritten.notes), rewritten.notes
    # Said either way by the user: kept as written.
    _, _, text = run_here(config(tmp_path, defaults="    no option abortonclose\n"), tmp_path / "b",
                          RouteWanted(version="3.4"))
    assert "3.4's default" not in text
    # No defaults section at all: one is added above the first proxy, accepted by `haproxy -c`.
    bare = write(tmp_path, "bare.cfg", "frontend fe\n    mode http\n    bind :80\n    default_backend llm\n"
                 "backend llm\n    mode http\n    server m1 10.0.0.7:8000\n")
    _, _, text = run_here(bare, tmp_path / "c", RouteWanted(version="3.3"))
    assert text.index("defaults  # streamlab verify: HAProxy 3.3's default") < text.index("frontend fe")


def test_alpn_by_version(tmp_path):
    """An ssl bind without alpn offers h2 from 2.8 (short name: the run folder holds a unix socket)."""
    path = write(tmp_path, "haproxy.cfg", PLAIN.format(defaults="", frontend="", backend="").replace(
        "    bind :80\n", "    bind :80\n    bind :443 ssl crt /etc/haproxy/site.pem\n"))
    _, _, text = run_here(path, tmp_path, RouteWanted(version="2.8"))
    assert "alpn h2,http/1.1" in text
    _, _, text = run_here(path, tmp_path / "o", RouteWanted(version="2.6"))
    assert " alpn " not in text


@pytest.mark.slow
def test_http2_is_measured_on_an_ssl_bind_written_for_28_and_not_offered_on_26(verify_server, tmp_path):
    """2.6 offers no h2; 2.8's default written into 2.6 (standing in) offers it; 3.2 of itself."""
    path = write(tmp_path, "haproxy.cfg", PLAIN.format(defaults=ON, frontend="", backend="").replace(
        "    bind :80\n", "    bind :443 ssl crt /etc/haproxy/site.pem\n"))
    old = verify_config(path, checks=["streaming", "streaming-h2"], server=verify_server,
                        wanted=RouteWanted(version="2.6"))
    h2 = next(c for c in old.checks if c.name == "streaming-h2")
    assert h2.skipped and "no HTTP/2 here" in h2.observed and old.ok, h2
    for asked, series in (("2.8", "2.6"), (None, "3.2")):
        new = verify_config(path, checks=["streaming-h2"], server=verify_server, wanted=RouteWanted(version=asked))
        h2 = next(c for c in new.checks if c.name == "streaming-h2")
        assert h2.passed and h2.observed.startswith("over HTTP/2"), (asked, h2)
        assert new.measured_on["series"] == series and new.measured_on["stands_in"] is (asked is not None)


def test_versions_verify_does_not_know_are_refused_in_one_line(tmp_path):
    with pytest.raises(UnusableInput, match="verify knows HAProxy's defaults from 2.6 on"):
        abortonclose(config(tmp_path), "2.4")


@pytest.mark.slow
def test_the_same_config_holds_the_server_on_26_and_lets_it_go_with_33s_defaults(verify_server, tmp_path):
    """Measured both ways on one file: with nothing said, 3.2 (the current release) keeps the server
    generating after the client left; written for 3.3, 3.2 stands in with 3.3's default written in
    and the server is let go. A backend-only `option abortonclose` is the failure the reading names
    on 2.6, and lets the server go on 3.2."""
    path = config(tmp_path)
    old = verify_config(path, checks=["disconnect"], server=verify_server)
    assert [f.kind for f in old.failures()] == ["disconnect-not-propagated"], old.checks
    new = verify_config(path, checks=["disconnect"], server=verify_server, wanted=RouteWanted(version="3.3"))
    assert not new.failures() and new.version == "3.3", new.checks
    assert next(c for c in new.checks if c.name == "disconnect").passed and new.measured_on["series"] == "3.2"
    backend = config(tmp_path / "be", backend=ON)
    on_26 = verify_config(backend, checks=["disconnect"], server=verify_server, wanted=RouteWanted(version="2.6"))
    failure = next(f for f in on_26.failures() if f.kind == "disconnect-not-propagated")
    assert failure.where.endswith("haproxy.cfg:11") and "defaults section" in failure.fix, failure
    on_32 = verify_config(backend, checks=["disconnect"], server=verify_server)
    assert not on_32.findings and next(c for c in on_32.checks if c.name == "disconnect").passed, on_32.checks
