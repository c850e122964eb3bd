"""How each proxy's binary runs in the foreground: its arguments, its environment, its reload.

Both runtimes use these lines (the Docker runtime points them at the mounted config and prefix),
so a container runs exactly the command a host process runs.
"""
from __future__ import annotations

import signal
from typing import Mapping

from proxies.base import ProxyName, ProxySettings

# Varnish's cache storage: small, the lab caches a few answers at most.
VARNISH_STORAGE = "malloc,64m"
# The signal that makes a running proxy reload its config without dropping connections
# (None: the proxy has no such signal here). nginx: a new set of workers, the old ones finish
# their requests (https://nginx.org/en/docs/control.html); HAProxy in master-worker mode (-W):
# the master starts new workers, the old ones finish (https://docs.haproxy.org/2.6/management.html);
# Apache: a graceful restart (https://httpd.apache.org/docs/2.4/stopping.html#graceful).
RELOAD_SIGNALS: dict[str, signal.Signals] = {
    "nginx": signal.SIGHUP, "haproxy": signal.SIGUSR2, "apache": signal.SIGUSR1}


def foreground_args(settings: ProxySettings | ProxyName, config: str, prefix: str) -> list[str]:
    """Arguments after the binary that run `config` in the foreground.

    `prefix` is the proxy's own folder for its pid, logs and work files (ends with "/"). A proxy
    name will do for every proxy but Varnish, whose listen address is a flag, not in its config.
    """
    proxy: ProxyName = settings if isinstance(settings, str) else settings.proxy
    if proxy == "varnish" and isinstance(settings, str):
        raise ValueError("varnishd's listen address is a flag: pass the settings, not the name")
    if proxy == "nginx":
        # -p: the config's relative paths (pid, logs, temp folders) resolve inside the prefix;
        # -e stderr: start-up errors land in process.log, not in /var/log/nginx.
        return ["-p", prefix, "-c", config, "-e", "stderr"]
    if proxy == "haproxy":
        # -db: foreground, no daemon; -W: master-worker, so SIGUSR2 reloads (a new worker takes
        # new connections, the old one finishes its streams).
        return ["-W", "-db", "-f", config]
    if proxy == "varnish":
        # -F: foreground. The listen address is a flag, not part of the VCL. -n: its own work
        # folder (shared-memory log included, which varnishncsa/varnishlog read); -T none: no
        # management port; -j none: no privilege separation, so the folder stays the caller's.
        assert not isinstance(settings, str)
        return ["-F", "-a", f"{settings.listen_host}:{settings.listen_port}", "-f", config,
                "-n", f"{prefix}varnish", "-s", VARNISH_STORAGE, "-T", "none", "-j", "none"]
    if proxy == "apache":
        # -d: the ServerRoot, where the config's relative pid and log paths resolve.
        return ["-d", prefix.rstrip("/"), "-f", config, "-DFOREGROUND"]
    if proxy == "caddy":
        return ["run", "--config", config, "--adapter", "caddyfile"]
    # No hot restart: two Envoys would otherwise collide on shared memory. One worker thread.
    # Access lines are flushed every 100 ms instead of Envoy's 10 s, so callers see them soon.
    return ["-c", config, "--disable-hot-restart", "--concurrency", "1", "-l", "warning",
            "--file-flush-interval-msec", "100"]


def proxy_env(proxy: ProxyName, prefix: str, base: Mapping[str, str]) -> dict[str, str] | None:
    """The environment the proxy runs in (None: inherited). Caddy keeps state (certificates,
    autosaved config) under HOME and the XDG folders: they point into its own folder."""
    if proxy != "caddy":
        return None
    folder = prefix.rstrip("/")
    return {**base, "HOME": folder, "XDG_CONFIG_HOME": folder, "XDG_DATA_HOME": folder}
