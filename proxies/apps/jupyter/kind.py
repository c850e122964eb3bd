"""Jupyter Server as an app hop (proxies.apps.kind): the lab's Python runs it, every folder in the run's own."""
from __future__ import annotations

from pathlib import Path

from proxies.apps.jupyter.settings import JupyterSettings
from proxies.apps.kind import AppKind
from proxies.apps.launch import Launch
from proxies.apps.versions import python_versions

def launch(settings: JupyterSettings, workdir: Path, python: str) -> Launch:
    # No token, no browser, every Jupyter folder in the run's own (nothing under ~).
    return Launch([python, "-m", "jupyter_server", "--no-browser", "--allow-root",
                   "--ip", settings.listen_host, "--port", str(settings.listen_port),
                   # A POST without an _xsrf cookie is refused otherwise; the lab stays on loopback.
                   "--ServerApp.port_retries=0", "--IdentityProvider.token=", "--ServerApp.password=",
                   "--ServerApp.disable_check_xsrf=True",
                   f"--ServerApp.root_dir={workdir}"],
                  env={"JUPYTER_CONFIG_DIR": str(workdir / "config"), "JUPYTER_DATA_DIR": str(workdir / "data"),
                       "JUPYTER_RUNTIME_DIR": str(workdir / "runtime"), "JUPYTER_PLATFORM_DIRS": "1"},
                  # jupyter-server-proxy serves a local port's paths under /proxy/PORT
                  # (https://jupyter-server-proxy.readthedocs.io/en/latest/arbitrary-ports-hosts.html).
                  url_path=f"/proxy/{settings.upstream_port}")


KIND = AppKind(
    settings=JupyterSettings, launch=launch,
    versions=lambda: python_versions("jupyter-server", "jupyter-server-proxy", "tornado"),
    needs=("python-apps",))
