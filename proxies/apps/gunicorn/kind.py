"""gunicorn as an app hop (proxies.apps.kind): the lab's Python runs it over `wsgi_app.py`."""
from __future__ import annotations

from pathlib import Path

from proxies.apps.gunicorn.settings import GunicornSettings
from proxies.apps.kind import AppKind
from proxies.apps.launch import Launch
from proxies.apps.versions import python_versions

# Access lines on stdout (process.log); no control socket in the repository.
LOGGING = ("--access-logfile", "-", "--no-control-socket")


def launch(settings: GunicornSettings, workdir: Path, python: str) -> Launch:
    args = [python, "-m", "gunicorn", "--bind", settings.listen, "--worker-class", settings.worker_class,
            "--workers", str(settings.workers), "--timeout", str(settings.timeout_s), *LOGGING]
    if settings.worker_class == "gthread":
        args += ["--threads", str(settings.threads)]
    return Launch([*args, "proxies.apps.gunicorn.wsgi_app:app"], env={"STREAMLAB_UPSTREAM": settings.upstream})


KIND = AppKind(
    settings=GunicornSettings, launch=launch, versions=lambda: python_versions("gunicorn", "flask", "requests"),
    needs=("python-apps",))
