"""A user's config rewritten to run here: what changed (a diff) and the proof it talks to loopback only.

Every rewriter changes only what must change for the config to run on this machine in front of the
lab's server: listen addresses (free loopback ports), every upstream endpoint (the lab's server),
pid, log and temp paths (the run's own folder), privileges, TLS. `assert_loopback` refuses to
start a rewritten config that still names any other address: nothing but 127.0.0.1 is contacted.
"""
from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from labs.verify.edits import original_line, unified_diff
from labs.verify.model import display_path

LOOPBACK_NAMES = ("localhost", "127.0.0.1")
RUN_FOLDER = "$RUN"  # how the diff shows the run's own folder (a temporary one)
# How a note ends when what the rewrite left out makes the proxy refuse the config (a module not
# installed for the build that runs it): a refusal repeats such notes (labs.verify.launch).
FAILS_THE_CHECK = "directives that need it fail the check"


@dataclass
class Rewritten:
    """The config as verify runs it: files written under `folder`, the entry the checks use."""

    proxy: str
    folder: Path
    main: Path  # the rewritten main config file
    listen_port: int  # where the chat route listens now
    tls: bool = False  # the chat route's listener speaks TLS (a certificate made for the run)
    files: dict[str, tuple[str, str, Path]] = field(default_factory=dict)  # user file -> (old, new, path)
    admin_port: int | None = None
    host_header: str | None = None  # the Host a request needs to reach the chat route (Envoy vhosts)
    notes: list[str] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)  # file -> its name for the user (a platform's main)
    # Asked while the proxy runs: `host:port` of every upstream connection it opened, from the
    # proxy's own records, read by its kind (labs/verify/records.py): the loopback-only check.
    contacted: Callable[[], set[str]] | None = None
    series: str | None = None  # the proxy's release that runs it (proxies.releases); None: the current one
    # What the run needs beside its files (folders, the run's certificate, permissions): made by
    # write(), so a rewrite builds everything in memory and nothing exists before the loopback check.
    on_write: list[Callable[[], object]] = field(default_factory=list)

    def shown(self, name: str) -> str:
        return self.labels.get(name) or display_path(name)

    def write(self) -> None:
        for _, new, path in self.files.values():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(new)
        for make in self.on_write:
            make()

    @property
    def diff(self) -> str:
        text = "".join(unified_diff(old, new, self.shown(name))
                       for name, (old, new, _) in self.files.items() if old != new)
        return text.replace(str(self.folder), RUN_FOLDER)

    def user_location(self, written: str, line: int | None) -> tuple[str, int | None]:
        """The user's file and line behind a file and line of the rewritten config."""
        for name, (old, new, path) in self.files.items():
            if str(path) == written or path.name == written:
                return self.shown(name), original_line(old, new, line) if line else None
        return written, line

    def explain_error(self, message: str) -> tuple[str, str | None, int | None]:
        """The proxy's own message with the rewritten paths replaced by the user's file and line."""
        file = line = None
        for name, (_, _, path) in self.files.items():
            pattern = re.compile(re.escape(str(path)) + r"(?::(\d+)|\]?:(\d+))?")
            found = pattern.search(message)
            if found:
                number = found.group(1) or found.group(2)
                file, line = self.user_location(str(path), int(number) if number else None)
                message = pattern.sub(f"{file}:{line}" if line else file, message)
        if line is None:
            file, line = self._field_line(message, file)
        return message, file, line

    def _field_line(self, message: str, file: str | None) -> tuple[str | None, int | None]:
        """Envoy names an unknown field but no line: find the field in the user's file."""
        found = re.search(r"no\s+such\s+field:\s*'([\w.]+)'", message)
        if not found:
            return file, None
        for name, (old, _, _) in self.files.items():
            for number, text in enumerate(old.splitlines(), start=1):
                if re.search(rf"(^|[\s{{,]){re.escape(found[1])}\s*:", text):
                    return self.shown(name), number
        return file, None


class NotLoopback(RuntimeError):
    """A rewritten config still names a non-loopback address: it is never started."""


def is_loopback(host: str) -> bool:
    host = host.strip("[]")
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def assert_loopback(addresses: list[tuple[str, str]]) -> None:
    """`addresses`: (where, host) pairs every address the rewritten config names."""
    others = [f"{where}: {host}" for where, host in addresses if not is_loopback(host)]
    if others:
        raise NotLoopback("refusing to start: the rewritten config still names " + "; ".join(others))
