"""verify on Varnish: the VCL compiled by varnishd itself, the backend vcl_recv picks for verify's
request, the settings in effect with Varnish 7.1's defaults, the rewrite to loopback checked by
`varnishd -C`, and measured runs in front of the lab's server."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from labs.findings import UnusableInput
from labs.verify import read_config, verify_config
from labs.verify.detect import detect
from labs.verify.readers import READERS, suspicions
from labs.verify.launch import validate
from labs.verify.model import Options, RouteWanted
from labs.verify.plan import reason
from labs.verify.run import rewrite_config
from labs.verify.varnish import rewrite

REPO = Path(__file__).resolve().parents[2]
FIXED = REPO / "proxies" / "fixed" / "varnish.vcl"
pytestmark = pytest.mark.skipif(shutil.which("varnishd") is None and not Path("/usr/sbin/varnishd").exists(),
                                reason="varnishd is not installed")


def fixed_line(text: str) -> int:
    """The line of the fixed VCL that holds `text` (its comments change; the tests follow)."""
    return next(n for n, line in enumerate(FIXED.read_text().splitlines(), 1) if text in line)

SITE = """\
vcl 4.1;
import directors;
import std;

backend web { .host = "web.internal"; .port = "8080"; }

backend llm1 {
    .host = "10.0.0.5";
    .port = "8000";
    .between_bytes_timeout = 5s;
    .max_connections = 20;
    .probe = {
        .url = "/health";
        .interval = 5s;
    }
}
backend llm2 { .host = "10.0.0.6"; .port = "8000"; }

sub vcl_init {
    new llm = directors.round_robin();
    llm.add_backend(llm1);
    llm.add_backend(llm2);
}

sub vcl_recv {
    if (req.url ~ "^/v1/" && req.http.X-Team) {
        set req.backend_hint = llm.backend();
        std.log("api");
        return (pass);
    } elsif (req.http.host == "chat.example.com") {
        set req.backend_hint = llm2;
    } else {
        set req.backend_hint = web;
    }
}

sub vcl_backend_response {
    if (beresp.http.Content-Type ~ "text/event-stream") {
        set beresp.do_stream = false;
        set beresp.do_gzip = true;
    }
}
"""


def _write(tmp_path: Path, text: str, name: str = "default.vcl") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_the_backend_is_the_branch_of_vcl_recv_the_request_takes(tmp_path):
    path = _write(tmp_path, SITE)
    assert detect(path) == "varnish"
    reading = read_config(path, wanted=RouteWanted(headers=(("X-Team", "a"),)))
    assert reading.proxy == "varnish" and reading.value("backend") == "llm1"
    assert 'if (req.url ~ "^/v1/" && req.http.X-Team)' in reading.scope and "round_robin llm" in reading.route
    assert reading.value("between_bytes_timeout") == 5 and reading.get("between_bytes_timeout").where.endswith(":10")
    assert reading.value("first_byte_timeout") == 60 and reading.get("first_byte_timeout").is_default
    assert reading.value("max_connections") == 20 and reading.value("vcl_recv") == "pass"
    assert reading.value("do_stream") is False and reading.get("do_stream").where.endswith(":39")
    assert reading.value("do_gzip") is True
    kinds = {s.kind for s in suspicions(reading, Options(heartbeat_s=10))}
    assert kinds == {"buffering", "compression-delay", "idle-timeout", "connection-limit"}


def test_without_the_header_the_host_or_the_default_branch(tmp_path):
    """--header reaches `req.http.X-Team` as it reaches Varnish when verify measures: without it the
    request takes the default branch."""
    path = _write(tmp_path, SITE)
    assert read_config(path).value("backend") == "web"
    assert "--header X-Team" in read_config(path, wanted=RouteWanted(headers=(("X-Team", "a"),))).why
    reading = read_config(path, wanted=RouteWanted(host="chat.example.com"))
    assert reading.value("backend") == "llm2" and reading.value("vcl_recv") == "pass"
    assert "built-in" in reading.get("vcl_recv").text  # no return: the built-in VCL passes a POST


API_PASS = 'if (req.url ~ "^/v1/")'  # the chat route's branch (its `return (pass);` on the next line)


def test_the_fixed_vcl_reads_clean():
    reading = read_config(FIXED)
    assert reading.value("backend") == "upstream" and reading.value("do_stream") is True
    assert reading.value("send_timeout") == 3600 and reading.value("between_bytes_timeout") == 300
    assert suspicions(reading, Options(heartbeat_s=10)) == []
    # Varnish notices a departure only at a write, whatever the VCL: suspected at the route's
    # vcl_recv unless the server's heartbeats are stated, so --quick measures it.
    [departure] = suspicions(reading, Options())
    assert departure.kind == "disconnect-not-propagated" and departure.where.endswith(f"varnish.vcl:{fixed_line(API_PASS) + 1}")
    assert "only when a write to it fails" in departure.evidence and "--heartbeat" in departure.fix
    assert any("taken as not holding" in n for n in reading.notes)  # the 413 branch on std.integer()


def test_defaults_when_nothing_is_set(tmp_path):
    reading = read_config(_write(tmp_path, 'vcl 4.1;\nbackend b { .host = "api"; }\n'))
    assert reading.value("between_bytes_timeout") == 60 and reading.value("send_timeout") == 600
    assert reading.value("do_stream") is True and reading.get("do_stream").is_default
    assert [s.kind for s in suspicions(reading, Options(max_stream_s=900, heartbeat_s=10))] == ["total-timeout"]


def test_include_is_followed_and_rewrite_is_loopback_checked_by_varnishd(tmp_path):
    (tmp_path / "conf").mkdir()
    _write(tmp_path / "conf", 'backend api { .host = "api.internal"; .port = "9000"; }\n', "backends.vcl")
    path = _write(tmp_path, 'vcl 4.1;\ninclude "/etc/varnish/conf/backends.vcl";\n'
                  'sub vcl_backend_response { set beresp.do_stream = false; }\n')
    reading = read_config(path)
    assert reading.get("backend").where.endswith("backends.vcl:1")
    folder = tmp_path / "run"
    folder.mkdir()
    rewritten = rewrite_config(reading, 8000, folder)
    assert {host for _, host in rewrite.addresses(rewritten)} == {"127.0.0.1"}
    assert '.port = "8000"' in rewritten.diff and "backends.vcl" in rewritten.diff
    validate(rewritten)


def test_probes_are_dropped_and_lines_kept(tmp_path):
    path = _write(tmp_path, SITE)
    reading = read_config(path)
    folder = tmp_path / "run"
    folder.mkdir()
    rewritten = rewrite_config(reading, 8000, folder)
    text = rewritten.main.read_text()
    assert text.count(reason("health-check")) == 1 and len(text.splitlines()) == len(SITE.splitlines())
    assert reason("health-check") in rewritten.notes
    assert 'std.log("api")' in text and "import directors;" in text
    validate(rewritten)


@pytest.mark.parametrize("text, line", [('vcl 4.1;\nbackend a {\n  .host = "x";\n  .bogus = 1;\n}\n', 4),
                                        ('vcl 4.1;\nbackend a { .host = "x"; }\nsub vcl_recv {\n  set req.foo = 1;\n}\n', 4)])
def test_what_varnishd_rejects_is_unusable_at_its_line(tmp_path, text, line):
    with pytest.raises(UnusableInput) as raised:
        read_config(_write(tmp_path, text), proxy="varnish")
    assert raised.value.line == line and str(raised.value.file).endswith("default.vcl")
    assert "varnish rejected" in str(raised.value)


def test_a_path_vcl_recv_answers_itself_gets_the_shared_error(tmp_path):
    """A request vcl_recv answers with synth is not proxied: the one search's error
    (labs/verify/route.py) names the path asked, every backend and the flags."""
    text = 'vcl 4.1;\nbackend b { .host = "api"; }\nsub vcl_recv {\n  if (req.url ~ "^/v1/") { return (synth(404)); }\n}\n'
    with pytest.raises(UnusableInput) as raised:
        read_config(_write(tmp_path, text), wanted=RouteWanted(path="/v1/chat/completions"))
    assert str(raised.value).endswith("no route proxies POST /v1/chat/completions; the proxied routes are: "
                                      f"backend b api:80 ({tmp_path / 'default.vcl'}:2) (choose one with --path, "
                                      "--host or --header)")


def test_garbage_missing_include_and_no_backend(tmp_path):
    with pytest.raises(UnusableInput, match="no backend"):
        read_config(_write(tmp_path, "vcl 4.1;\nsub vcl_recv { }\n"), proxy="varnish")
    with pytest.raises(UnusableInput) as raised:
        read_config(_write(tmp_path, 'vcl 4.1;\ninclude "nowhere.vcl";\nbackend a { .host = "x"; }\n'))
    assert raised.value.line == 2
    with pytest.raises(UnusableInput):
        read_config(_write(tmp_path, "vcl 4.1;\nbackend a { .host = \"x\"; }\nthis is not vcl\n"), proxy="varnish")


@pytest.mark.slow
@pytest.mark.parametrize("version", ["7.1", "7.7"])
def test_the_fixed_vcl_passes_a_departure_on_at_the_second_heartbeat(verify_server, version):
    """Measured on Varnish 7.1.1, as its kind declares (labs/verify/varnish/kind.py), and 7.7.0
    alike (2026-12-06): a client that leaves during the server's silence is noticed only at a
    write to it, and with heartbeats every second the departure reached the server at the second
    one, exactly 2 sent (without them, at the silence's end: tests/verify/test_fixed.py). No VCL
    setting changes it."""
    before = verify_server.metrics().get("streamlab_heartbeats_total", 0)
    report = verify_config(FIXED, server=verify_server, checks=["disconnect"], heartbeat_s=1.0,
                           wanted=RouteWanted(version=version))
    sent = verify_server.metrics().get("streamlab_heartbeats_total", 0) - before
    [check] = [c for c in report.checks if c.name == "disconnect"]
    assert check.passed and not check.skipped and report.ok, check.observed
    assert sent == READERS["varnish"].departure_at_write.heartbeats == 2, check.observed
    loopback = next(c for c in report.checks if c.name == "loopback-only")
    assert loopback.passed and not loopback.skipped, loopback.observed


@pytest.mark.slow
def test_do_stream_false_is_measured_buffering(verify_server, tmp_path):
    text = FIXED.read_text().replace("set beresp.do_stream = true;", "set beresp.do_stream = false;")
    report = verify_config(_write(tmp_path, text), checks=["streaming"], server=verify_server)
    [finding] = [f for f in report.findings if f.kind == "buffering"]
    assert finding.severity == "failure", finding
    assert finding.where.endswith(f"default.vcl:{fixed_line('do_stream = true')}"), finding.where
