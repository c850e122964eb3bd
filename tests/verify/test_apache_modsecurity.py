"""verify on an Apache config with ModSecurity 2 in it: what it reads (whether mod_security2 inspects
the event stream), the rule set's data files the run needs, and the measurement on the catalogue's
two variants (labs/catalogue/waf.py, where the hold was measured)."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from labs.catalogue import waf
from labs.verify import read_config, verify_config
from labs.verify.model import Options
from labs.verify.readers import suspicions
from labs.verify.run import rewrite_config
from proxies.apache.settings import MODULES_DIR, ApacheSettings
from proxies.rendering import render

needs_modsecurity = pytest.mark.skipif(
    shutil.which("apache2") is None or not os.path.exists(f"{MODULES_DIR}/mod_security2.so")
    or not os.path.exists(ApacheSettings.crs_setup),
    reason="apache2, libapache2-mod-security2 or modsecurity-crs is not installed (python -m labs setup waf-body-inspection)")

SITE = """\
LoadModule unique_id_module /usr/lib/apache2/modules/mod_unique_id.so
LoadModule security2_module /usr/lib/apache2/modules/mod_security2.so
Listen 8080
SecRuleEngine DetectionOnly
SecResponseBodyAccess On
{types}
<VirtualHost *:8080>
    ProxyPass /v1/ http://10.0.0.5:8000/v1/
</VirtualHost>
"""


def _reading(tmp_path: Path, types: str, site: str = SITE):
    path = tmp_path / "site.conf"
    path.write_text(site.format(types=types))
    return read_config(path, proxy="apache")


@pytest.mark.parametrize(("types", "reads"), [
    ("SecResponseBodyMimeType text/html text/event-stream", True),
    # The first directive replaces ModSecurity's default list (text/plain text/html); later ones add.
    ("SecResponseBodyMimeType application/json\nSecResponseBodyMimeType text/event-stream", True),
    ("SecResponseBodyMimeType text/event-stream\nSecResponseBodyMimeTypesClear\n"
     "SecResponseBodyMimeType application/json", False),
    ("SecResponseBodyMimeType text/plain text/html application/json", False),
    ("", False),  # the default list has no event stream
])
def test_whether_modsecurity_reads_the_stream(tmp_path, types, reads):
    reading = _reading(tmp_path, types)
    assert reading.get("ModSecurity").value == ("reads-sse" if reads else "passes-sse")
    suspected = [s for s in suspicions(reading, Options(heartbeat_s=10)) if s.kind == "buffering"]
    assert bool(suspected) == reads
    if reads:
        assert "SecResponseBodyMimeType without text/event-stream" in suspected[0].fix


def test_engine_off_or_module_not_loaded_reads_nothing(tmp_path):
    types = "SecResponseBodyMimeType text/event-stream"
    assert _reading(tmp_path, types, SITE.replace("DetectionOnly", "Off")).get("ModSecurity").value == "passes-sse"
    unloaded = SITE.replace("LoadModule security2_module /usr/lib/apache2/modules/mod_security2.so\n", "")
    assert _reading(tmp_path, types, unloaded).get("ModSecurity").value == "off"


def _variant_config(tmp_path: Path, name: str) -> Path:
    settings = waf.SCENARIOS[0].variant(name).proxy["apache"]
    path = tmp_path / f"{name}.conf"
    path.write_text(render(ApacheSettings(**settings)))
    return path


@needs_modsecurity
def test_the_rule_sets_data_files_are_copied_beside_their_copies(tmp_path):
    """The OWASP rule set reads `@pmFromFile scanners-user-agents.data` beside its rule file: the run
    gets a copy there, or httpd refuses the config ("Could not open phrase file")."""
    reading = read_config(_variant_config(tmp_path, "broken"), proxy="apache")
    folder = tmp_path / "run"
    folder.mkdir()
    rewritten = rewrite_config(reading, 8000, folder)
    rewritten.write()
    copied = folder / "conf" / "usr/share/modsecurity-crs/rules/scanners-user-agents.data"
    assert copied.read_bytes() == Path("/usr/share/modsecurity-crs/rules/scanners-user-agents.data").read_bytes()


@needs_modsecurity
@pytest.mark.slow
@pytest.mark.parametrize("variant", ["broken", "fixed"])
def test_the_catalogues_variants_as_measured(verify_server, tmp_path, variant):
    report = verify_config(_variant_config(tmp_path, variant), server=verify_server, checks=["streaming"])
    [streaming] = [c for c in report.checks if c.name == "streaming"]
    found = {f.kind: f for f in report.findings}
    if variant == "broken":
        assert not streaming.passed and "held to the end" in streaming.observed, streaming.observed
        assert found["buffering"].severity == "failure"
        assert "SecResponseBodyMimeType without text/event-stream" in found["buffering"].fix
    else:
        assert streaming.passed and "buffering" not in found, streaming.observed
