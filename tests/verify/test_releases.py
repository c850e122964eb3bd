"""verify runs the release the user names (`--proxy-version`, labs/verify/releases.py): the lab's
release of that series, else the one that stands in, said in every format; no flag: the current
release, said too. Versions neither the releases nor a defaults table know are refused in one line."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from labs.findings import UnusableInput
from labs.verify import output, read_config, verify_config
from labs.verify.cli import main
from labs.verify.readers import READERS
from labs.verify.launch import validate
from labs.verify.model import RouteWanted
from labs.verify.releases import chosen
from labs.verify.run import rewrite_config
from proxies.binaries import check_binary

ROOT = Path(__file__).resolve().parents[2]
# A published config that leaves proxy_buffering and proxy_http_version at nginx's defaults.
AGENTA = ROOT / "tests" / "data" / "wild" / "agenta-compose-nginx" / "nginx.conf"
AGENTA_PATH = "/services/chat/v0/invoke"


def runs(proxy: str, asked: str | None, runtime: str = "local"):
    return chosen(proxy, asked, READERS[proxy].defaults, runtime)


@pytest.mark.parametrize("proxy, asked, series, rule", [
    ("nginx", None, "1.30", "current"),
    ("nginx", "1.22", "1.22", "asked"),
    ("nginx", "1.22.0", "1.22", "asked"),  # a patch release of a series the lab has: that series
    ("nginx", "1.26", "1.22", "older"),  # the newest release not newer than asked
    ("nginx", "1.31.2", "1.30", "older"),
    ("haproxy", "3.3", "3.2", "older"),
    ("haproxy", "2.8", "2.6", "older"),
    ("envoy", "1.30", "1.40", "oldest"),  # the table knows 1.30; the lab runs 1.40 alone
    ("caddy", "2.6", "2.6", "asked"),  # no defaults table: the flag picks the binary
    ("caddy", "2.8", "2.6", "older"),
    ("varnish", "7.7.0", "7.7", "asked"),
    ("traefik", "3.7", "3.7", "asked"),
])
@pytest.mark.parametrize("runtime", ["local", "docker"])  # each release has its own image
def test_the_release_that_runs_and_why(proxy, asked, series, rule, runtime):
    chosen_one = runs(proxy, asked, runtime)
    assert (chosen_one.series, chosen_one.rule) == (series, rule)
    assert chosen_one.stands_in is (rule in ("older", "oldest"))
    assert ("standing in for" in chosen_one.said) is chosen_one.stands_in, chosen_one.said


@pytest.mark.parametrize("proxy, asked, says", [
    ("nginx", "1.20", "verify knows nginx's defaults from 1.22 on"),
    ("nginx", "2.0", "verify knows no nginx 2"),
    ("caddy", "2.4", "the lab runs Caddy 2.6 (Debian 12), 2.11 (Debian sid); verify knows no Caddy before 2.6"),
    ("varnish", "8.0", "verify knows no Varnish 8"),
    ("apache", "2.2", "verify knows no Apache httpd before 2.4"),
    ("caddy", "latest", "--proxy-version must look like 2.6"),
])
def test_a_version_outside_what_verify_knows_is_refused_in_one_line(proxy, asked, says):
    with pytest.raises(UnusableInput, match=says.replace(".", r"\.").replace("(", r"\(").replace(")", r"\)")) as refused:
        runs(proxy, asked)
    assert "\n" not in str(refused.value)


def test_no_flag_measures_the_current_release_and_the_reading_uses_its_defaults():
    current = runs("nginx", None)
    path, version = check_binary("nginx", "1.30")
    assert current.said.startswith(f"measured on nginx {'.'.join(map(str, version))} (Debian sid, {path})")
    assert "the current release" in current.said and not current.stands_in
    reading = read_config(AGENTA, "nginx", RouteWanted(path=AGENTA_PATH))
    assert reading.version == ".".join(map(str, version)) and reading.wanted.series == "1.30"
    assert reading.get("proxy_http_version").value == "1.1"  # 1.30's default, not 1.22's


def test_the_flag_picks_the_binary_for_a_proxy_without_a_defaults_table(tmp_path):
    """The fixed Caddyfile names request_buffers (Caddy 2.7's name): 2.11 reads and accepts it, 2.6
    refuses it with Caddy's own message, so the binary that reads and runs it is the release asked."""
    fixed = ROOT / "proxies" / "fixed" / "Caddyfile"
    for asked in (None, "2.11"):
        reading = read_config(fixed, "caddy", RouteWanted(version=asked))
        rewritten = rewrite_config(reading, 65000, tmp_path / str(asked))
        assert rewritten.series == "2.11"
        validate(rewritten)
    with pytest.raises(UnusableInput, match="unrecognized subdirective request_buffers") as refused:
        read_config(fixed, "caddy", RouteWanted(version="2.6"))
    assert refused.value.line == next(n for n, line in enumerate(fixed.read_text().splitlines(), 1)
                                      if line.strip().startswith("request_buffers"))


@pytest.mark.slow
def test_the_release_named_is_the_one_measured_and_every_format_says_so(verify_server, capsys):
    """One config, two releases, two measurements: nginx 1.22 holds the stream (HTTP/1.0 to the
    server, close-delimited, buffered), 1.30 streams it (HTTP/1.1 by default)."""
    old = verify_config(AGENTA, checks=["streaming"], server=verify_server,
                        wanted=RouteWanted(path=AGENTA_PATH, version="1.22"))
    assert [f.kind for f in old.failures()] == ["buffering"], old.checks
    assert old.measured_on["series"] == "1.22" and old.measured_on["binary"] == check_binary("nginx", "1.22")[0]
    new = verify_config(AGENTA, checks=["streaming"], server=verify_server, wanted=RouteWanted(path=AGENTA_PATH))
    assert not new.failures() and new.measured_on["series"] == "1.30", new.checks
    stood_in = verify_config(AGENTA, checks=["streaming"], server=verify_server,
                             wanted=RouteWanted(path=AGENTA_PATH, version="1.26"))
    assert [f.kind for f in stood_in.failures()] == ["buffering"]
    assert stood_in.measured_on["stands_in"] and "standing in for nginx 1.26" in stood_in.measured_on["said"]
    document = json.loads(output.to_json(stood_in))
    assert document["measured_on"]["version"].startswith("1.22.") and document["measured_on"]["asked"] == "1.26"
    sarif = json.loads(output.for_ci(new, "sarif"))
    assert sarif["runs"][0]["properties"]["measuredOn"]["series"] == "1.30"
    assert "measured on nginx 1.30" in output.for_ci(new, "github").splitlines()[-1]
    from rich.console import Console
    output.print_report(new, Console(width=200))
    assert "measured on nginx 1.30." in capsys.readouterr().out


def test_the_cli_refuses_an_unknown_version_in_one_line_in_every_format(capsys):
    assert main([str(AGENTA), "--proxy-version", "1.20", "--format", "json"]) == 2
    assert "verify knows nginx's defaults from 1.22 on" in json.loads(capsys.readouterr().out)["error"]


def test_a_caddyfile_for_the_older_release_names_the_flag_that_reads_it():
    """Caddy 2.7 renamed buffer_requests: Debian 12's fixed file is valid for 2.6 only. Without the
    flag the current Caddy's adapter refuses it, and the line says which Caddy read it and what to
    ask; with --proxy-version 2.6 the same file is read by 2.6."""
    path = ROOT / "proxies" / "fixed" / "Caddyfile-2.6"
    with pytest.raises(UnusableInput, match=r"buffer_requests.*read by Caddy 2\.11 \(Debian sid\); "
                       r"a Caddyfile for another release: --proxy-version 2\.6") as caught:
        read_config(path)
    assert caught.value.line is not None
    assert read_config(path, wanted=RouteWanted(version="2.6")).proxy == "caddy"
