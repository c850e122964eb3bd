"""verify on Apache httpd configs: the reading (VirtualHost, rule, settings, defaults), a site file
inside Debian's apache2.conf, the rewrite apache2 accepts, and runs against the lab's server."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from labs.findings import UnusableInput
from labs.verify import read_config, verify_config
from labs.verify.detect import detect
from labs.verify.readers import READERS, suspicions
from labs.verify.launch import check_args, validate
from labs.verify.model import Options, RouteWanted
from labs.verify.rewrite import is_loopback
from labs.verify.run import rewrite_config

REPO = Path(__file__).resolve().parents[2]
FIXED = REPO / "proxies" / "fixed" / "apache.conf"
needs_apache = pytest.mark.skipif(shutil.which("apache2") is None, reason="apache2 is not installed")

WHOLE = """\
ServerRoot "/etc/apache2"
LoadModule mpm_event_module /usr/lib/apache2/modules/mod_mpm_event.so
LoadModule proxy_module /usr/lib/apache2/modules/mod_proxy.so
LoadModule proxy_http_module /usr/lib/apache2/modules/mod_proxy_http.so
LoadModule authz_core_module /usr/lib/apache2/modules/mod_authz_core.so
Listen 80
Timeout 45
MaxRequestWorkers 50
IncludeOptional conf.d/*.conf
<VirtualHost *:80>
    ServerName other.example.com
    ProxyPass / http://10.0.0.9:80/
</VirtualHost>
<VirtualHost *:80>
    ServerName chat.example.com
    ServerAlias *.chat.example.com
    ProxyPass /v1/models http://10.0.0.1:8000/v1/models
    ProxyPass /v1/ http://10.0.0.2:8000/v1/ timeout=5
    ProxyPass /v1/chat/completions http://10.0.0.3:8000/never
    <Location /api/>
        ProxyPass http://10.0.0.4:8080/api/
    </Location>
</VirtualHost>
"""

SITE = """\
<VirtualHost *:80>
    ServerName chat.example.com
    ErrorLog ${APACHE_LOG_DIR}/chat-error.log
    CustomLog ${APACHE_LOG_DIR}/chat-access.log combined
    ProxyPreserveHost On
    ProxyPass /health !
    ProxyPass /v1/ http://10.0.0.5:8000/v1/ \\
        flushpackets=on
    ProxyPassReverse /v1/ http://10.0.0.5:8000/v1/
</VirtualHost>
<VirtualHost *:443>
    ServerName chat.example.com
    SSLEngine on
    SSLCertificateFile /etc/letsencrypt/live/chat.example.com/fullchain.pem
    ProxyPass / https://backend.internal:8443/
</VirtualHost>
"""


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_vhost_by_servername_and_the_first_proxypass_that_matches(tmp_path):
    write(tmp_path, "conf.d/proxy.conf", "ProxyTimeout 12\n")
    path = write(tmp_path, "httpd.conf", WHOLE)
    assert detect(path) == "apache"
    reading = read_config(path, wanted=RouteWanted(host="chat.example.com"))
    assert reading.proxy == "apache" and "chat.example.com" in reading.route
    # Config order, first match wins: /v1/ before the longer /v1/chat/completions.
    assert reading.get("ProxyPass").value == "http://10.0.0.2:8000/v1/"
    assert reading.get("timeout").value == "5" and reading.get("timeout").where.endswith("httpd.conf:18")
    assert reading.get("ProxyTimeout").value == "12" and reading.get("ProxyTimeout").where.endswith("proxy.conf:1")
    assert reading.get("Timeout").value == "45"
    assert reading.get("MaxRequestWorkers").value == "50"
    assert reading.get("flushpackets").value == "off" and reading.get("flushpackets").is_default
    assert reading.get("DEFLATE").value == "off"
    kinds = {s.kind for s in suspicions(reading, Options(max_silence_s=20, streams=100))}
    assert kinds == {"idle-timeout", "connection-limit", "disconnect-not-propagated"}
    # A wildcard alias reaches the same VirtualHost; no --host: the first that proxies the API.
    assert "chat.example.com" in read_config(path, wanted=RouteWanted(host="a.chat.example.com")).route
    assert "other.example.com" in read_config(path).route


def test_location_proxypass_wins_over_the_servers(tmp_path):
    path = write(tmp_path, "httpd.conf", WHOLE)
    reading = read_config(path, wanted=RouteWanted(path="/api/chat/completions", host="chat.example.com"))
    assert reading.get("ProxyPass").value == "http://10.0.0.4:8080/api/"
    assert "<Location /api/>" in reading.route
    # Nothing sets ProxyTimeout there but the include: the rule has no timeout= key.
    assert reading.get("timeout").text.endswith("(ProxyTimeout's)")


def test_defaults_of_httpd_24(tmp_path):
    path = write(tmp_path, "httpd.conf", "LoadModule proxy_module modules/mod_proxy.so\n"
                                         "ProxyPass / http://10.0.0.1/\n")
    reading = read_config(path)
    assert reading.get("Timeout").value == "60" and reading.get("Timeout").is_default
    assert reading.get("ProxyTimeout").value == "60"
    assert reading.get("MaxRequestWorkers").value == "400"  # event: 16 x 25
    assert reading.get("ProxyIOBufferSize").value == "8192"
    # httpd notices a departure only at a write, whatever the config: suspected unless the
    # server's heartbeats are stated (--heartbeat), which the disconnect check then measures.
    [departure] = suspicions(reading, Options())
    assert departure.kind == "disconnect-not-propagated" and departure.checks == ("disconnect",)
    assert departure.where.endswith("httpd.conf:2") and "only when a write to it fails" in departure.evidence
    assert "--heartbeat" in departure.fix
    assert not suspicions(reading, Options(heartbeat_s=10))


def test_site_file_is_judged_inside_debians_apache2_conf(tmp_path):
    path = write(tmp_path, "sites-available/chat.conf", SITE)
    reading = read_config(path)
    assert reading.proxy == "apache" and "debian apache2.conf" not in reading.route
    assert reading.get("Timeout").value == "300" and reading.get("Timeout").where == "debian apache2.conf:92"
    assert reading.get("MaxRequestWorkers").value == "150"
    assert reading.get("MaxRequestWorkers").where == "debian mods-enabled/mpm_event.conf:13"
    assert reading.get("flushpackets").value == "on"
    assert any("Debian 12" in note for note in reading.notes)
    with pytest.raises(UnusableInput, match="--main is for a site file"):
        read_config(write(tmp_path, "whole.conf", WHOLE), wanted=RouteWanted(main="debian"))


def test_deflate_on_event_streams_is_suspected(tmp_path):
    path = write(tmp_path, "site.conf", SITE.replace("ProxyPreserveHost On",
                                                     "AddOutputFilterByType DEFLATE text/event-stream"))
    reading = read_config(path)
    assert reading.get("DEFLATE").value == "on"
    assert [s.kind for s in suspicions(reading, Options(heartbeat_s=10))] == ["compression-delay"]
    no_gzip = write(tmp_path, "site2.conf", path.read_text().replace("    ProxyPass /health", "    SetEnv no-gzip 1\n    ProxyPass /health"))
    assert not suspicions(read_config(no_gzip), Options(heartbeat_s=10))


def test_garbage_is_unusable_with_file_and_line(tmp_path):
    path = write(tmp_path, "site.conf", "<VirtualHost *:80>\n    ProxyPass / http://x/\n</Location>\n")
    with pytest.raises(UnusableInput) as raised:
        read_config(path, proxy="apache")
    assert raised.value.file.endswith("site.conf") and raised.value.line == 3
    unclosed = write(tmp_path, "open.conf", "<VirtualHost *:80>\nProxyPass / http://x/\n")
    with pytest.raises(UnusableInput, match="was not closed"):
        read_config(unclosed, proxy="apache")


@needs_apache
def test_rewrite_is_loopback_only_and_accepted_by_apache2(tmp_path):
    path = write(tmp_path, "sites-available/chat.conf", SITE)
    reading = read_config(path, wanted=RouteWanted(host="chat.example.com"))
    folder = tmp_path / "run"
    folder.mkdir()
    rewritten = rewrite_config(reading, 8000, folder)
    validate(rewritten)  # apache2 -t
    written = "".join(new for _, new, _ in rewritten.files.values())
    assert "10.0.0.5" not in written and "backend.internal" not in written
    assert "# SSLEngine on  # streamlab verify" in rewritten.diff
    assert any("TLS is off" in note for note in rewritten.notes)
    # The binary's own view of the rewritten VirtualHosts: loopback ports only.
    dumped = subprocess.run(["apache2", *check_args(rewritten)[1:], "-t", "-D", "DUMP_VHOSTS"],
                            capture_output=True, text=True, cwd=folder)
    addresses = [line.split()[0] for line in dumped.stdout.splitlines() if line.strip().startswith("127.")
                 or ":" in line.split()[0]] if dumped.stdout else []
    assert f"127.0.0.1:{rewritten.listen_port}" in dumped.stdout, dumped.stdout + dumped.stderr
    assert all(is_loopback(a.rsplit(":", 1)[0]) for a in addresses if a[0].isdigit())


@needs_apache
@pytest.mark.slow
def test_fixed_config_passes_a_departure_on_at_the_first_heartbeat(verify_server):
    """Measured with httpd 2.4.71, as its kind declares (labs/verify/apache/kind.py): a client that
    leaves during the server's silence is noticed only when a write to it fails; with heartbeats
    every second the departure reached the server at the first one, exactly 1 sent (without
    them, at the silence's end: tests/verify/test_fixed.py). No directive changes it."""
    before = verify_server.metrics().get("streamlab_heartbeats_total", 0)
    report = verify_config(FIXED, server=verify_server, checks=["disconnect"], heartbeat_s=1.0)
    sent = verify_server.metrics().get("streamlab_heartbeats_total", 0) - before
    [check] = [c for c in report.checks if c.name == "disconnect"]
    assert report.proxy == "apache" and check.passed and not check.skipped and report.ok, check.observed
    assert sent == READERS["apache"].departure_at_write.heartbeats == 1, check.observed


@needs_apache
@pytest.mark.slow
def test_deflate_on_event_streams_as_measured(verify_server, tmp_path):
    path = write(tmp_path, "site.conf", SITE.replace("ProxyPreserveHost On",
                                                     "AddOutputFilterByType DEFLATE text/event-stream"))
    report = verify_config(path, server=verify_server, checks=["streaming", "gzip"], max_silence_s=2.0,
                           max_stream_s=2.5, streams=20)
    gzip = next(c for c in report.checks if c.name == "gzip")
    found = {f.kind: f for f in report.findings}
    # Measured with httpd 2.4.71: mod_deflate flushes with each event, so the stream still arrives
    # event by event (compressed): the suspicion stays a warning that says what was measured.
    assert gzip.passed, gzip.observed
    assert found["compression-delay"].severity == "warning"
    assert "measured here, it did not show" in found["compression-delay"].reason


@needs_apache
def test_a_whole_config_without_error_log_or_pid_file_runs_in_its_folder(tmp_path):
    """httpd's compiled-in defaults are logs/error_log under the ServerRoot (the run's folder has
    no logs/: the config was refused, AH02291) and Debian's /run/apache2.pid (one for every httpd:
    two runs at once collided). The rewrite names both in the run's folder when the config does not."""
    bare = "\n".join(line for line in WHOLE.splitlines() if not line.startswith(("ServerRoot", "IncludeOptional")))
    path = write(tmp_path, "httpd.conf", bare + "\n")
    reading = read_config(path, "apache", RouteWanted(host="chat.example.com"))
    folder = tmp_path / "run"
    folder.mkdir()
    rewritten = rewrite_config(reading, 8000, folder)
    validate(rewritten)  # apache2 -t: refused before (AH02291)
    written = "".join(new for _, new, _ in rewritten.files.values())
    assert f'ErrorLog "{folder / "error.log"}"' in written and f'PidFile "{folder / "httpd.pid"}"' in written
    # A config that names its own keeps them (moved into the folder by their handlers), no second pair.
    named = write(tmp_path / "named", "httpd.conf", bare + "\nErrorLog /var/log/apache2/error.log\n"
                                                          "PidFile /var/run/apache2/apache2.pid\n")
    run = tmp_path / "named-run"
    run.mkdir()
    again = rewrite_config(read_config(named, "apache", RouteWanted(host="chat.example.com")), 8000, run)
    validate(again)
    text = "".join(new for _, new, _ in again.files.values())
    assert text.count("\nErrorLog ") + text.startswith("ErrorLog ") == 1 and text.count("\nPidFile ") == 1, text
