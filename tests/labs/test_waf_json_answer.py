"""The other side of waf-body-inspection's fix (labs/catalogue/waf.py): with text/event-stream out of
SecResponseBodyMimeType, ModSecurity still reads the body of a JSON answer. The guards prove the
stream is no longer read (rule 9002 silent) and the prompt still is (9001); this proves the fix did
not switch response inspection off altogether: 9002 fires on a non-streamed answer through the
same fixed config."""
from __future__ import annotations

import json
import os
import shutil
import urllib.request

import pytest

from labs import catalogue
from labs.catalogue import waf
from labs.scenario.runner import Lab
from proxies.apache.settings import MODULES_DIR, ApacheSettings
from server.processes import wait_until

pytestmark = pytest.mark.skipif(
    shutil.which("apache2") is None or not os.path.exists(f"{MODULES_DIR}/mod_security2.so")
    or not os.path.exists(ApacheSettings.crs_setup),
    reason="apache2, libapache2-mod-security2 or modsecurity-crs is not installed (python -m labs setup waf-body-inspection)")


def _rules_logged(hop, uri: str) -> set[str]:
    return {rule for line in hop.error_log().splitlines() if f'[uri "{uri}"]' in line
            for rule in (str(waf.READ_REQUEST_RULE), str(waf.READ_RESPONSE_RULE)) if f'[id "{rule}"]' in line}


def test_the_fixed_variant_still_reads_a_json_answer():
    scenario = catalogue.get("waf-body-inspection")
    with Lab() as lab:
        server = lab.server()
        with lab.path(scenario.path, scenario.variant("fixed"), server.port) as [hop]:
            body = json.dumps({"model": lab.model_name(), "stream": False, "max_tokens": 4,
                               "messages": [{"role": "user", "content": "hi"}]}).encode()
            request = urllib.request.Request(hop.url + "/v1/chat/completions", body,
                                             {"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=30) as answer:
                assert answer.status == 200 and answer.headers["Content-Type"].startswith("application/json")
                answer.read()
            # mod_security2 writes the phase-4 line after the answer went out: polled, not slept.
            wanted = {str(waf.READ_REQUEST_RULE), str(waf.READ_RESPONSE_RULE)}
            wait_until(lambda: _rules_logged(hop, "/v1/chat/completions") == wanted, timeout_s=5, describe="ModSecurity logged both lab rules")
            assert _rules_logged(hop, "/v1/chat/completions") == wanted
