"""proxies/fixed/ equals a fresh export, runs as it is, and streams by construction; the CLI works."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from proxies import variant
from proxies.binaries import binary
from proxies.export import FIXED_DIR, export, export_for, exports, fresh_exports, release_file, stale_files
from proxies.fixed_settings import CERTIFICATE, HEADERS, IDLE, MAX_BODY, PRIVATE_KEY
from proxies.kinds import KINDS
from proxies.tls import self_signed
from proxies.variants import UnknownVariant, register_variant, variant_names

REPO = Path(__file__).resolve().parents[2]
# What proxies/fixed/ holds (its kubernetes/ folder is test_kubernetes.py's).
FILES = sorted(path.name for path in FIXED_DIR.iterdir() if path.is_file())
# Each file and each release it claims: the binary of every one of them runs it.
CLAIMS = [(name, series) for name in FILES for series in exports()[name].series]
# The TLS exports name the user's certificate and key; this machine has neither.
USER_TLS_FILES = (CERTIFICATE, PRIVATE_KEY)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "proxies", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=60)


def test_fixed_files_equal_a_fresh_export() -> None:
    """Every kind's fixed variants are there, and no file a kind no longer exports."""
    assert {kind.config_name for kind in KINDS.values()} <= set(FILES)
    assert sorted(fresh_exports()) == FILES
    assert stale_files() == [], "run `python -m proxies export`"


def test_each_release_has_one_file_and_its_header_says_which() -> None:
    """Every release of every kind finds its fixed files; a file claims the releases that render
    it alike, says so in its header, and names the file of the others; the current release's
    file has the kind's own name."""
    for proxy, kind in KINDS.items():
        for name, own in kind.exports().items():
            held = [export_for(proxy, name, release.series) for release in kind.releases]
            assert held[-1].file == own
            for release, export in zip(kind.releases, held):
                text = (FIXED_DIR / export.file).read_text()
                assert release.label in text.split("\n\n")[0], (export.file, release.label)
                if export.file != own:
                    assert export.file == release_file(own, export.series[-1])
                    assert f"{own}; the two differ" in (FIXED_DIR / export.file).read_text()
                    assert f"{export.file}; the two differ" in (FIXED_DIR / own).read_text()
    # Caddy 2.7 renamed buffer_requests: two files. nginx 1.29.6 added `sticky` (the MCP route's
    # affinity): two files. HAProxy, Varnish: one for both.
    assert exports()["Caddyfile"].series == ("2.11",) and exports()["Caddyfile-2.6"].series == ("2.6",)
    assert "request_buffers 8388608" in (FIXED_DIR / "Caddyfile").read_text()
    assert "\n        buffer_requests\n" in (FIXED_DIR / "Caddyfile-2.6").read_text()
    assert exports()["nginx.conf"].series == ("1.30",) and exports()["nginx-1.22.conf"].series == ("1.22",)
    assert "sticky                   learn" in (FIXED_DIR / "nginx.conf").read_text()
    assert "hash                     $remote_addr consistent;" in (FIXED_DIR / "nginx-1.22.conf").read_text()
    assert [exports()[name].series for name in ("haproxy.cfg", "varnish.vcl")] == [("2.6", "3.2"), ("7.1", "7.7")]


@pytest.mark.parametrize(("name", "series"), CLAIMS, ids=[f"{name}-{series}" for name, series in CLAIMS])
def test_fixed_file_validates_as_a_user_would_run_it(name: str, series: str, tmp_path: Path) -> None:
    """As a user runs each binary of a release the file claims (an unpacked Varnish is told
    where its own vmods are, as the lab tells it)."""
    proxy = exports()[name].proxy
    release = KINDS[proxy].release(series)
    path = FIXED_DIR / name
    text = path.read_text()
    if any(user_path in text for user_path in USER_TLS_FILES):
        # As a user who put a certificate where the file names it: the lab's, at those lines only.
        path = tmp_path / name
        for user_path, lab_path in zip(USER_TLS_FILES, self_signed()):
            text = text.replace(user_path, lab_path)
        path.write_text(text)
    program = binary(proxy, series)
    if proxy == "nginx":
        # `nginx -p DIR -c FILE`: every path relative to the prefix, no root paths.
        command = [program, "-t", "-p", f"{tmp_path}/", "-c", str(path), "-e", "stderr"]
    elif proxy == "haproxy":
        command = [program, "-c", "-f", str(path)]
    elif proxy == "varnish":
        command = [program, "-C", "-j", "none", "-f", str(path)]
    elif proxy == "apache":
        command = [program, "-t", "-d", str(tmp_path), "-f", str(path)]
    elif proxy == "caddy":
        command = [program, "validate", "--config", str(path), "--adapter", "caddyfile"]
    elif proxy == "traefik":
        command = [program, "healthcheck", f"--configFile={path}"]
    else:
        command = [program, "--mode", "validate", "-c", str(path)]
    command += KINDS[proxy].release_args(release)
    env = {**os.environ, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path)}
    result = subprocess.run(command, capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
    # Traefik has no check-only mode: its `healthcheck` decodes the file strictly, then asks for
    # ping; its kind reads that as passed.
    refusal = KINDS[proxy].check_refusal(result.returncode, result.stderr + result.stdout)
    assert refusal is None, refusal[-2000:]
    if proxy in ("apache", "caddy", "traefik"):
        # Relative to the ServerRoot / the working folder: no root paths but the modules' and
        # the WAF's rule set (Debian's, where its package puts it).
        directives = [line.split("#")[0] for line in path.read_text().splitlines()
                      if not line.lstrip().startswith(("LoadModule", "Include "))]
        assert not any("/var/" in line or "/etc/" in line or "/run/" in line for line in directives)
    if proxy == "nginx":
        # Only the certificate lines (swapped above) name a system path.
        directives = [line.split("#")[0] for line in path.read_text().splitlines()]
        assert not any("/var/" in line or "/etc/" in line or "/run/" in line for line in directives)


@pytest.mark.parametrize("name", FILES)
def test_fixed_file_listens_on_the_contract_addresses(name: str) -> None:
    text = (FIXED_DIR / name).read_text()
    assert "127.0.0.1:8080" in text or "address: 127.0.0.1, port_value: 8080" in text
    assert "127.0.0.1:8000" in text or "address: 127.0.0.1, port_value: 8000" in text
    if name.startswith("envoy"):  # the admin on a Unix socket, on no TCP port
        assert "pipe: { path: admin.sock, mode: 384 }" in text and "9901" not in text


def test_fixed_settings_stream_well() -> None:
    nginx, haproxy, envoy = (variant(p, "fixed") for p in ("nginx", "haproxy", "envoy"))
    assert not nginx.proxy_buffering and nginx.proxy_http_version == "1.1"
    assert nginx.proxy_connection_header == "" and nginx.upstream_keepalive
    assert "text/event-stream" not in nginx.gzip_types and not nginx.proxy_ignore_client_abort
    assert nginx.proxy_read_timeout.endswith("s") and int(nginx.proxy_read_timeout[:-1]) >= 60
    assert nginx.worker_connections // 2 >= 1000 and (nginx.worker_rlimit_nofile or 0) >= 2 * nginx.worker_connections
    assert haproxy.http_no_delay and haproxy.abortonclose and haproxy.timeout_server
    assert "text/event-stream" not in haproxy.compression_types and haproxy.compression_types
    assert (haproxy.maxconn_frontend or 0) >= 1000 and (haproxy.maxconn_global or 0) >= 2000
    assert envoy.route_timeout == "0s" and envoy.route_idle_timeout
    assert "text/event-stream" not in envoy.compressor_content_types
    assert min(envoy.max_connections, envoy.max_pending_requests, envoy.max_requests) >= 1000
    assert not envoy.body_inspection
    varnish, apache, caddy = (variant(p, "fixed") for p in ("varnish", "apache", "caddy"))
    assert varnish.pass_event_streams and varnish.do_stream
    assert varnish.between_bytes_timeout == varnish.first_byte_timeout == "300s"
    assert varnish.send_timeout is not None and int(varnish.send_timeout[:-1]) >= 3600
    assert apache.proxy_timeout == 300 and "text/event-stream" not in apache.deflate_types
    assert apache.max_request_workers >= 1000
    assert caddy.encode and caddy.encode_skip_event_streams and caddy.read_timeout == "300s"


def test_export_rewrites_only_changed_files(tmp_path: Path) -> None:
    assert sorted(p.name for p in export(tmp_path)) == sorted(FILES)
    assert export(tmp_path) == []
    (tmp_path / "haproxy.cfg").write_text("stale\n")
    assert stale_files(tmp_path) == [tmp_path / "haproxy.cfg"]
    assert [p.name for p in export(tmp_path)] == ["haproxy.cfg"]


def test_cli_export_check_passes() -> None:
    result = cli("export", "--check")
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("name", FILES)
def test_cli_render_prints_the_variant(name: str) -> None:
    """Each file, by its variant and release; the TLS ones too, although this machine lacks the
    certificate they name: the binary checks the text with the lab's certificate in its place (a
    missing file is an error when it runs)."""
    held = exports()[name]
    result = cli("render", held.proxy, "--variant", held.variant, "--proxy-version", held.series[0])
    assert result.returncode == 0, result.stderr
    assert result.stdout == (FIXED_DIR / name).read_text()


def test_cli_render_of_a_release_the_lab_lacks_is_one_line() -> None:
    result = cli("render", "caddy", "--proxy-version", "9.9")
    assert result.returncode == 2 and not result.stdout
    assert result.stderr.strip().splitlines() == ["error: the lab runs caddy 2.6 (Debian 12), 2.11 (Debian sid), not 9.9"]


@pytest.mark.parametrize("proxy", ["nginx", "envoy"])
def test_tls_exports_are_the_fixed_configs_on_a_tls_listener(proxy: str) -> None:
    plain, tls = variant(proxy, "fixed"), variant(proxy, "fixed-tls")  # type: ignore[arg-type]
    changed = {field for field in type(tls).model_fields if getattr(plain, field) != getattr(tls, field)}
    assert changed <= {"tls_http2", *tls.tls_fields, "ssl_protocols", "ssl_session_cache"}
    assert tuple(tls.tls_files().values()) == USER_TLS_FILES
    text = (FIXED_DIR / export_for(proxy, "fixed-tls").file).read_text()  # type: ignore[arg-type]
    assert all(path in text for path in USER_TLS_FILES)
    if proxy == "nginx":
        assert tls.ssl_protocols == ("TLSv1.2", "TLSv1.3") and tls.ssl_session_cache.startswith("shared:")
        assert "listen                   127.0.0.1:8080 ssl http2 backlog=4096;" in text
    else:
        assert 'alpn_protocols: ["h2", "http/1.1"]' in text and "codec_type: AUTO" in text


def test_cli_render_unknown_variant_lists_the_names() -> None:
    result = cli("render", "envoy", "--variant", "no-such-variant")
    assert result.returncode != 0
    assert "no-such-variant" in result.stderr and "defaults" in result.stderr and "fixed" in result.stderr


def test_registry_is_extensible() -> None:
    name = "test-unbuffered"
    register_variant("nginx", name, lambda: variant("nginx", "defaults").with_(proxy_buffering=False),
                     replace=True)
    assert name in variant_names("nginx")
    assert variant("nginx", name).proxy_buffering is False
    # The message lists every known name; nothing but this module registers variants.
    with pytest.raises(UnknownVariant, match=r"known: defaults, fixed$"):
        variant("haproxy", name)


def test_cli_render_sends_a_scenario_variant_to_the_labs() -> None:
    """The proxies know no scenarios (the layer above): the error says which command does."""
    result = cli("render", "nginx", "--variant", "nginx-buffering:broken")
    assert result.returncode == 2
    assert "python -m labs render SCENARIO --variant broken|fixed" in result.stderr


def test_fixed_settings_hold_against_hostile_clients() -> None:
    """Client timeouts short enough to shed slow or silent clients, long enough for SDK pools
    (5 s idle expiry) and never on a stream; bodies capped at the server's own limit."""
    nginx, haproxy, envoy = (variant(p, "fixed") for p in ("nginx", "haproxy", "envoy"))
    assert HEADERS <= 10 and IDLE >= 30 and MAX_BODY == 8 * 1024 * 1024
    assert (nginx.client_header_timeout, nginx.keepalive_timeout) == (f"{HEADERS}s", f"{IDLE}s")
    assert (haproxy.timeout_http_request, haproxy.timeout_http_keep_alive) == (f"{HEADERS}s", f"{IDLE}s")
    assert (envoy.request_headers_timeout, envoy.downstream_idle_timeout) == (f"{HEADERS}s", f"{IDLE}s")
    assert nginx.client_max_body_size == "8m" and haproxy.max_body_bytes == envoy.max_request_bytes == MAX_BODY
    assert nginx.json_errors and haproxy.json_errors and envoy.json_errors and not nginx.server_tokens
    assert envoy.admin_allow_paths and not any(
        path in envoy.admin_allow_paths for path in ("/quitquitquit", "/healthcheck/fail", "/drain_listeners"))
    varnish, apache, caddy = (variant(p, "fixed") for p in ("varnish", "apache", "caddy"))
    # Varnish's first request's header wait is the runtime parameter timeout_idle (5 s), which a
    # VCL cannot set; the VCL sets the idle wait between requests.
    assert varnish.timeout_idle == f"{IDLE}s" and varnish.max_body_bytes == MAX_BODY and varnish.json_errors
    assert (apache.request_header_timeout, apache.keepalive_timeout) == (HEADERS, IDLE)
    assert apache.limit_request_body == MAX_BODY and apache.json_errors
    assert (caddy.read_header_timeout, caddy.idle_timeout) == (f"{HEADERS}s", f"{IDLE}s")
    assert caddy.max_body_bytes == MAX_BODY and caddy.json_errors
    # What still bounds a stream is unchanged: silences only, 300 s, far above the heartbeats.
    assert envoy.route_timeout == "0s" and haproxy.timeout_server == nginx.proxy_read_timeout == "300s"
