"""How a report was made: enough to tell two reports apart, or to make the same one again.

`collect()` gives the block that report.json stores under "provenance"; `one_line()` the line
report.md shows. What it records:
- `runtime`: `local` (host processes) or `docker` (containers);
- `proxies`: per proxy on the path, the binary, its version and its release's source (local) or
  the image reference, its id, why it was chosen and the release it carries (docker: the series,
  and a stand-in's exact version and source from its labels); `server_image` likewise in docker;
- `server_commands`: per variant, the server command line the lab ran (its port aside);
- `git`: the commit and whether the working tree had uncommitted changes;
- `cpus` (the machine's) and `cpus_usable` (this process's affinity), `python`, `platform`;
- `started_at`: UTC, ISO 8601.
Nothing here may fail a run: a fact that cannot be read is recorded as the reason why.
"""
from __future__ import annotations

import datetime as dt
import os
import platform
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Any, Mapping, Sequence

from server.locations import checkout


def started_now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")


def collect(runtime: str, proxies: Sequence[str], server_commands: Mapping[str, str],
            started_at: str | None = None, *, server_in_runtime: bool = True,
            releases: Mapping[str, str] | None = None) -> dict[str, Any]:
    """`server_in_runtime=False`: the server ran as a host process whatever the runtime (the
    load lab), so no server image is recorded. `releases`: proxy -> the series of its release
    that ran (proxies.releases; a proxy not named ran its current one)."""
    releases = releases or {}
    info: dict[str, Any] = {
        "started_at": started_at or started_now(),
        "runtime": runtime,
        "proxies": {name: proxy_origin(runtime, name, releases.get(name)) for name in dict.fromkeys(proxies)},
        "server_commands": dict(server_commands),
    }
    if runtime == "docker" and server_in_runtime:
        info["server_image"] = image_origin("server")
    info.update(git=git_state(), cpus=os.cpu_count(), cpus_usable=_usable_cpus(),
                python=platform.python_version(), platform=platform.platform())
    return info


def proxy_origin(runtime: str, proxy: str, series: str | None = None) -> dict[str, Any]:
    """Where the proxy that ran came from: its release's binary (local) or the image (docker); for
    an app hop, its components' versions (and in docker the apps image)."""
    from proxies.apps import APP_KINDS

    if proxy in APP_KINDS:
        found = APP_KINDS[proxy].versions()
        # In docker the image is the record (the versions are the mounted checkout's, as here).
        return image_origin("apps") if runtime == "docker" else found
    if runtime == "docker":
        return image_origin(proxy, series)
    return dict(_binary(proxy, series))


@lru_cache(maxsize=None)
def _binary(proxy: str, series: str | None) -> tuple[tuple[str, Any], ...]:
    from proxies.binaries import BinaryProblem, check_binary
    from proxies.kinds import KINDS

    try:
        path, version = check_binary(proxy, series)
    except BinaryProblem as exc:
        return (("error", str(exc)),)
    return (("binary", path), ("version", ".".join(map(str, version))),
            ("source", KINDS[proxy].release(series).source))


def image_origin(service: str, series: str | None = None) -> dict[str, Any]:
    """The image the docker runtime uses for `service` (a proxy: of its release `series`, default
    the current one; the same cached choice it ran). A stand-in's labels say the exact version and
    where its files came from; an official image is known by its tag."""
    try:
        from proxies.runtime.dockercli import image_inspect
        from proxies.runtime.images import image_for

        choice = image_for(service, series)  # type: ignore[arg-type]
        record = image_inspect(choice.image) or {}
    except Exception as exc:  # noqa: BLE001 - provenance must never sink the run it describes
        return {"error": f"{type(exc).__name__}: {exc}"}
    origin = {"image": choice.image, "image_id": record.get("Id"), "chosen_by": choice.why}
    if choice.release is not None:
        origin["release"] = choice.release.series
        labels = (record.get("Config") or {}).get("Labels") or {}
        if choice.offline and labels.get("streamlab.version"):
            origin.update(version=labels["streamlab.version"], source=choice.release.source)
    return origin


def git_state(repo: Path | None = None) -> dict[str, Any]:
    """{"commit", "dirty"} of the checkout, or {"commit": None, "error"} outside one (an
    installed package: whatever git repository site-packages lies in is not this code's)."""
    repo = repo or checkout()
    if repo is None:
        return {"commit": None, "dirty": None, "version": _version(),
                "error": "an installed package, not a checkout"}
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True,
                              timeout=10, check=True).stdout.strip()
    try:
        commit = git("rev-parse", "HEAD")
        dirty = bool(git("status", "--porcelain"))
    except (OSError, subprocess.SubprocessError) as exc:
        return {"commit": None, "dirty": None, "error": f"not a git checkout here ({type(exc).__name__})"}
    return {"commit": commit, "dirty": dirty}


def _version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("streamlab")
    except PackageNotFoundError:
        return None


def _usable_cpus() -> int | None:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count()


def one_line(info: Mapping[str, Any]) -> str:
    """Everything above in one Markdown line (report.md shows it under the title)."""
    if not info:
        return ""
    parts = [f"made on {info.get('started_at', '?').replace('T', ' ').replace('+00:00', ' UTC')}",
             f"runtime {info.get('runtime', '?')}"]
    for name, origin in (info.get("proxies") or {}).items():
        parts.append(origin_text(name, origin))
    if "server_image" in info:
        parts.append(origin_text("server", info["server_image"]))
    commands = info.get("server_commands") or {}
    if len(set(commands.values())) == 1:
        parts.append(f"server `{next(iter(commands.values()))}`")
    else:  # per distinct command, who ran it (a variant, or the load lab's paths)
        users: dict[str, list[str]] = {}
        for user, command in commands.items():
            users.setdefault(command, []).append(user)
        parts.extend(f"{', '.join(names)} server `{command}`" for command, names in users.items())
    git = info.get("git") or {}
    if git.get("commit"):
        parts.append(f"commit {git['commit'][:12]}" + (" (uncommitted changes)" if git.get("dirty") else ""))
    elif git.get("version"):
        parts.append(f"streamlab {git['version']}")
    else:
        parts.append("commit unknown")
    cpus, usable = info.get("cpus"), info.get("cpus_usable")
    parts.append(f"{cpus} CPUs" + (f" ({usable} usable)" if usable not in (None, cpus) else ""))
    parts.append(f"Python {info.get('python', '?')}")
    return " · ".join(parts)


def origin_text(name: str, origin: Mapping[str, Any]) -> str:
    if "image" in origin:
        image_id = (origin.get("image_id") or "").removeprefix("sha256:")[:12]
        carried = origin.get("version") or origin.get("release")
        what = f"{name} {carried}" + (f" ({origin['source']})" if origin.get("source") else "") if carried else name
        return f"{what} image `{origin['image']}`" + (f" ({image_id})" if image_id else "")
    if "version" in origin:
        return f"{name} {origin['version']}" + (f" ({origin['source']})" if origin.get("source") else "")
    components = {k: v for k, v in origin.items() if k not in ("error", "image", "venv")}
    if components:  # an app hop: its components' versions
        return f"{name} (" + ", ".join(f"{k} {v}" for k, v in components.items()) + ")"
    return f"{name} ({origin.get('error', 'unknown')})"
