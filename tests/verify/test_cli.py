"""`python -m labs verify`: exit statuses, the JSON document, errors with the file and line."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def verify(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "labs", "verify", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=120)


def unusable(path: Path, text: str, *args: str) -> dict:
    """Write `text` to `path`, verify it: exit status 2 and the JSON error document."""
    path.write_text(text)
    result = verify(str(path), "--json", *args)
    assert result.returncode == 2, result.stdout + result.stderr
    return json.loads(result.stdout)


def test_missing_file_and_unknown_proxy_are_unusable(tmp_path):
    result = verify(str(tmp_path / "nope.conf"))
    assert result.returncode == 2 and "no such file" in result.stdout + result.stderr
    result = verify(str(tmp_path), "--proxy", "squid")
    assert result.returncode == 2 and "squid" in result.stderr


def test_the_proxys_own_error_names_the_users_file_and_line(tmp_path):
    document = unusable(tmp_path / "nginx.conf", "events {}\nhttp {\n  server {\n    listen 80;\n"
                        "    location /v1/ {\n      proxy_pass http://a:1;\n      proxy_bufering off;\n"
                        "    }\n  }\n}\n", "--quick")
    assert 'unknown directive "proxy_bufering"' in document["error"]
    assert document["error_file"].endswith("nginx.conf") and document["error_line"] == 7


@pytest.mark.slow
def test_json_document_and_exit_status_of_a_failure():
    config = REPO / "tests" / "data" / "user-configs" / "nginx-location-override" / "nginx.conf"
    result = verify(str(config), "--json", "--quick")
    assert result.returncode == 1, result.stderr
    document = json.loads(result.stdout)
    assert set(document) >= {"proxy", "file", "ok", "findings", "checks", "rewrites"}
    assert document["proxy"] == "nginx" and document["ok"] is False
    finding = next(f for f in document["findings"] if f["severity"] == "failure")
    assert finding["kind"] == "buffering" and finding["where"].endswith("nginx.conf:38")
    assert finding["scenario"] == "nginx-buffering" and "proxy_buffering off" in finding["fix"]
    assert {"name", "passed", "observed"} == set(document["checks"][0])
    assert "+    listen 127.0.0.1:" in document["rewrites"] or "+        listen 127.0.0.1:" in document["rewrites"]


@pytest.mark.parametrize("name, text, line, said", [
    ("haproxy.cfg", "defaults\n    mode http\nfrontend fe\n    bind :80\n    default_backend b\nbackend b\n"
     "    server s 10.0.0.1:80\n    option http-no-dely\n", 8, "unknown option 'http-no-dely'"),
    ("envoy.yaml", (REPO / "proxies" / "fixed" / "envoy.yaml").read_text().replace(
        "stream_idle_timeout:", "stream_idle_timout:"), None, "stream_idle_timout"),
])
def test_haproxy_and_envoy_errors_name_the_line(tmp_path, name, text, line, said):
    document = unusable(tmp_path / name, text)
    assert said in document["error"] and document["error_file"].endswith(name)
    expected = line or next(i for i, t in enumerate(text.splitlines(), 1) if "stream_idle_timout" in t)
    assert document["error_line"] == expected


@pytest.mark.slow
def test_a_config_that_does_not_serve_the_route_here_is_unusable(tmp_path):
    """A location that answers 403 to everyone (an allow-list) cannot be measured: exit 2, saying so."""
    document = unusable(tmp_path / "nginx.conf", "events {}\nhttp {\n  server {\n    listen 80;\n"
                        "    location /v1/ {\n      deny all;\n      proxy_pass http://10.0.0.1:8000;\n"
                        "    }\n  }\n}\n", "--quick")
    assert "does not serve POST /v1/chat/completions here: HTTP 403" in document["error"]


def test_verifys_own_error_is_exit_2_with_one_line_never_a_traceback(tmp_path, monkeypatch, capsys):
    """A crash inside verify is not "a failure found" (exit 1): exit 2, one line, said to be verify's."""
    from labs.verify import cli, run as verify_run

    def broken(*args, **kwargs):
        raise KeyError("no such thing")
    monkeypatch.setattr(verify_run, "verify_config", broken)
    path = tmp_path / "nginx.conf"
    path.write_text("events {}\nhttp { server { listen 80; location / { proxy_pass http://a; } } }\n")
    assert cli.main([str(path)]) == 2
    printed = capsys.readouterr()
    said = (printed.out + printed.err).strip()
    assert "verify's own error" in said and "KeyError" in said and "Traceback" not in said
    assert cli.main([str(path), "--json"]) == 2
    document = json.loads(capsys.readouterr().out)
    assert document["error_kind"] == "verify" and document["verdict"] == "error"


def test_route_options_are_checked_before_anything_runs(tmp_path):
    path = tmp_path / "nginx.conf"
    path.write_text("events {}\nhttp { server { listen 80; location / { proxy_pass http://a; } } }\n")
    for args, said in ((("--path", "v1/chat"), "--path must start with '/'"),
                       (("--host", "http://x/"), "--host must be a host name"),
                       (("--header", "no colon here"), "--header must be 'Name: value'")):
        result = verify(str(path), *args)
        assert result.returncode == 2 and said in result.stdout + result.stderr, args


def test_a_header_value_is_never_printed_nor_stored(tmp_path):
    path = tmp_path / "nginx.conf"
    path.write_text("events {}\nhttp { server { listen 80; location /v1/ { proxy_pass http://a; } } }\n")
    result = verify(str(path), "--json", "--header", "Authorization: Bearer s3cret-token", "--check", "streaming")
    assert "s3cret-token" not in result.stdout + result.stderr
