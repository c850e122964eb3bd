"""verify's run of an Envoy config whose admin is not on TCP (the fixed config's Unix socket, or
none): the run reads /clusters on a loopback admin of its own, so that admin is replaced."""
from __future__ import annotations

import pytest
import yaml

from tests.verify.test_envoy_wild import envoy, run_here
from tests.verify.test_static import write


@pytest.mark.parametrize("admin", [
    "admin:\n  address:\n    pipe: { path: /run/envoy/admin.sock, mode: 384 }\n",  # the fixed config's form
    "admin: {}\n",  # no address: no admin at all
])
def test_an_admin_off_tcp_is_replaced_by_the_runs_own_loopback_admin(tmp_path, admin):
    """The run reads /clusters on a loopback admin of its own: a socket admin (the fixed config's)
    or none is replaced, never duplicated (a second `admin:` key would not load)."""
    path = write(tmp_path, "envoy.yaml", admin + envoy("                - {match: {prefix: /}, route: {cluster: c}}\n"))
    _, rewritten, text = run_here(path, tmp_path)
    loaded = yaml.safe_load(text)
    assert loaded["admin"] == {"address": {"socket_address": {"address": "127.0.0.1",
                                                              "port_value": rewritten.admin_port}}}
    assert sum(line.startswith("admin:") for line in text.splitlines()) == 1, text[:400]
    assert any("admin replaced" in note for note in rewritten.notes), rewritten.notes
