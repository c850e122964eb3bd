"""verify on an nginx config that loads the ModSecurity v3 connector (docs/proxies.md, "A WAF in
front"): a dynamic module loads only into the nginx build it was made for, so the run takes the
module of the release that runs it, or says that release has none; where it has one, the stream
is measured (the connector passes it on: tests/reliability/modsecurity_nginx.py)."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from labs.findings import UnusableInput
from labs.verify import verify_config
from labs.verify.model import RouteWanted, Setting
from labs.verify.nginx.config import context_chain, parse
from labs.verify.nginx.modsecurity import read_modsecurity
from labs.verify.nginx.modsecurity_files import mirror_rules
from labs.verify.nginx import targets
from labs.verify.nginx.targets import module_here
from proxies.kinds import KINDS
from proxies.releases import CHOICE_VARIABLE
from proxies.unpack import CannotUnpack

MODULE = "/usr/lib/nginx/modules/ngx_http_modsecurity_module.so"
CONFIG = """load_module {module};
events {{}}
http {{
    server {{
        listen 8080;
        modsecurity on;
        modsecurity_rules 'SecRuleEngine On
            SecResponseBodyAccess On
            SecResponseBodyMimeType text/plain text/html text/event-stream';
        location / {{ proxy_pass http://10.0.0.5:8000; proxy_buffering off; }}
    }}
}}
"""


def _release(tmp_path: Path, with_module: bool) -> str:
    """A release laid out as proxies.releases unpacks one: bin/nginx (here a script that answers
    -V with Debian's prefix) and root/ with or without the module."""
    binary = tmp_path / "nginx-9.9" / "bin" / "nginx"
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/bin/sh\necho 'configure arguments: --prefix=/usr/share/nginx' >&2\n")
    binary.chmod(0o755)
    modules = tmp_path / "nginx-9.9" / "root" / "usr" / "lib" / "nginx" / "modules"
    modules.mkdir(parents=True)
    if with_module:
        (modules / os.path.basename(MODULE)).write_bytes(b"")
    return str(binary)


def test_an_unpacked_release_loads_its_own_module_only(tmp_path):
    binary = _release(tmp_path, with_module=True)
    own = str(tmp_path / "nginx-9.9" / "root" / MODULE.lstrip("/"))
    assert module_here(MODULE, binary) == own
    assert module_here("modules/ngx_http_modsecurity_module.so", binary) == own
    # Without one of its own, never the host's: built for another nginx, it would not load.
    assert module_here(MODULE, _release(tmp_path / "bare", with_module=False)) is None


needs_module = pytest.mark.skipif(shutil.which("nginx") is None or not os.path.exists(MODULE),
                                  reason="Debian 12's nginx or libnginx-mod-http-modsecurity is not installed")


@needs_module
def test_a_release_the_module_cannot_be_added_to_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv(CHOICE_VARIABLE, "current")  # nginx 1.30 from sid, unpacked
    if KINDS["nginx"].current.in_root(MODULE).is_file():
        pytest.skip("nginx 1.30's release has the module here already (labs setup added it)")
    tried = []

    def offline(names):  # the release is shared: the test adds nothing to it
        tried.extend(names)
        raise CannotUnpack("mmdebstrap could not unpack libnginx-mod-http-modsecurity from Debian sid: offline")
    monkeypatch.setattr(targets, "install_missing", offline)
    path = tmp_path / "nginx.conf"
    path.write_text(CONFIG.format(module=MODULE))
    with pytest.raises(UnusableInput, match="is not installed here for the nginx that runs it.*offline"):
        verify_config(path, checks=["streaming"])
    assert tried == ["nginx-modsecurity"], "verify tried to add the module by need"


@needs_module
@pytest.mark.slow
@pytest.mark.parametrize("choice", ["oldest", "current"])
def test_each_nginx_streams_through_modsecurity(choice, verify_server, tmp_path, monkeypatch):
    monkeypatch.setenv(CHOICE_VARIABLE, choice)
    release = KINDS["nginx"].releases[0 if choice == "oldest" else -1]
    if release.unpacked and not release.in_root(MODULE).is_file():
        pytest.skip(f"nginx {release.label} has no ModSecurity module here: "
                    "`python -m labs setup --all` adds it (nginx-modsecurity)")
    path = tmp_path / "nginx.conf"
    path.write_text(CONFIG.format(module=MODULE))
    report = verify_config(path, server=verify_server, checks=["streaming"], wanted=RouteWanted(version=release.series))
    [streaming] = [c for c in report.checks if c.name == "streaming"]
    assert streaming.passed and not streaming.skipped, streaming.observed
    # Read as inspecting the stream, and said to pass it on (the reading, beside the measurement).
    assert report.settings["ModSecurity"].value == "reads-sse", report.settings["ModSecurity"]
    assert any("inspects the stream as it passes" in note for note in report.notes), report.notes


SITE = """events {{}}
http {{
    modsecurity on;
    modsecurity_rules_file {rules};
    server {{
        listen 8080;
        location / {{ {location} proxy_pass http://10.0.0.5:8000; }}
    }}
}}
"""


def _read(tmp_path: Path, rules: str, location: str = "", crs: str = "") -> Setting:
    (tmp_path / "crs").mkdir()
    (tmp_path / "crs" / "response.conf").write_text(crs)
    (tmp_path / "main.conf").write_text(rules)
    config_file = tmp_path / "nginx.conf"
    config_file.write_text(SITE.format(rules="main.conf", location=location))
    [located] = [d for d in parse(config_file).main.walk() if d.name == "location"]
    return read_modsecurity(context_chain(located))


def test_the_rules_file_and_what_it_includes_are_read_at_their_lines(tmp_path):
    rules = "SecRuleEngine DetectionOnly\nSecResponseBodyAccess On\nInclude crs/*.conf\n"
    waf = _read(tmp_path, rules, crs="# the rule set's own\nSecResponseBodyMimeType text/plain \\\n  text/event-stream\n")
    assert waf.value == "reads-sse", waf
    assert waf.where.endswith("crs/response.conf:2") and "text/event-stream" in waf.text


@pytest.mark.parametrize("rules, location, why", [
    ("SecRuleEngine On\nSecResponseBodyAccess On\n", "", "the default MIME list has no event stream"),
    ("SecRuleEngine Off\nSecResponseBodyAccess On\nSecResponseBodyMimeType text/event-stream\n", "", "engine off"),
    ("SecRuleEngine On\nSecResponseBodyAccess On\nSecResponseBodyMimeType text/event-stream\n"
     "SecResponseBodyMimeTypesClear\nSecResponseBodyMimeType application/json\n", "", "the list cleared"),
])
def test_rules_that_leave_the_stream_alone_pass_it(tmp_path, rules, location, why):
    assert _read(tmp_path, rules, location).value == "passes-sse", why


def test_modsecurity_off_in_the_location_wins(tmp_path):
    rules = "SecRuleEngine On\nSecResponseBodyAccess On\nSecResponseBodyMimeType text/event-stream\n"
    assert _read(tmp_path, rules).value == "reads-sse"  # the precondition: these rules read the stream
    (tmp_path / "off").mkdir()
    waf = _read(tmp_path / "off", rules, location="modsecurity off;")
    assert waf.value == "off" and waf.where.endswith("nginx.conf:7"), waf


def test_the_rules_files_run_from_the_run_folder_with_their_logs_and_data(tmp_path):
    """A rules file and what it includes are copied where the config's files go; the audit log moves
    into the run's folder, and a rule's data file (named relative to its rule file) comes along."""
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "a.conf").write_text('SecRule REQUEST_HEADERS "@pmFromFile scanners.data" "id:1,pass"\n')
    (tmp_path / "rules" / "scanners.data").write_text("nikto\n")
    main = tmp_path / "main.conf"
    main.write_text("SecAuditLog /var/log/modsec_audit.log\nInclude rules/*.conf\nSecRuleEngine On\n")
    run = tmp_path / "run"
    files, data = {}, {}
    copy = mirror_rules(str(main), run, lambda f: run / "conf" / f.lstrip("/"), files, data)
    assert copy == run / "conf" / str(main).lstrip("/")
    rule_file = str(tmp_path / "rules" / "a.conf")
    assert files[str(main)][1] == (f"SecAuditLog {run / 'modsec_audit.log'}\n"
                                   f"Include {run / 'conf' / rule_file.lstrip('/')}\nSecRuleEngine On\n")
    assert files[rule_file][0] == files[rule_file][1]  # nothing of it changes: its data file comes beside it
    assert data == {tmp_path / "rules" / "scanners.data": run / "conf" / str(tmp_path / "rules" / "scanners.data").lstrip("/")}
