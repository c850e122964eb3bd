"""The pytest plugin (entry point `pytest11`): a user's own suite guards their streaming path.

    pytest --stream-url https://llm.internal/v1 [--stream-url http://10.0.0.5:8080/v1]
    pytest --stream-config deploy/nginx.conf [--stream-config deploy/envoy.yaml]
    pytest --stream-url ... -k "buffering or idle-timeout"
    pytest --stream-url https://llm.internal/v1 --stream-api messages   # Anthropic Messages streams

Every check becomes a test of its own: `test_stream_path[<check>]` for the path given by the
`--stream-url` options (the outermost entry first, then inner entries of the same path, exactly
as `python -m labs probe` takes them), and `test_stream_config[<file>-<kind>]` for each
`--stream-config` file and finding kind (`python -m labs verify`). A failing test shows the
evidence and the fix. The probe or verify runs once per path or file, when its first test runs,
and only for the checks that `-k` left selected. Without these options nothing is collected,
and nothing of the lab is imported.
"""
from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any, Iterator

import pytest

PATH_TEST = "test_stream_path"
CONFIG_TEST = "test_stream_config"
_RESULTS = pytest.StashKey[dict]()
_LAB_SERVER = pytest.StashKey[Any]()


class StreamPathWarning(UserWarning):
    """A fault only suspected (a `warning` finding): the test passes, the warning says why."""


def pytest_addoption(parser: pytest.Parser) -> None:
    # The server's table of protocols alone (a dataclass module), not the lab's client.
    from server.apis.table import APIS, DEFAULT_API

    group = parser.getgroup("streamlab", "streaming-path guards (streamlab: labs probe / labs verify)")
    group.addoption("--stream-url", action="append", default=[], metavar="URL",
                    help="an OpenAI base URL of the path to guard (repeatable: outermost first, "
                         "then inner entries of the same path)")
    group.addoption("--stream-config", action="append", default=[], metavar="FILE",
                    help="a proxy config (any proxy `labs verify` reads) to verify (repeatable)")
    group.addoption("--stream-max-silence", type=float, default=None, metavar="S",
                    help="longest silence to try (default: the probe's and verify's own)")
    group.addoption("--stream-max-stream", type=float, default=None, metavar="S",
                    help="a stream longer than this looks for a total-duration limit")
    # A config's departure check runs through the server's heartbeats, as `labs verify --heartbeat`:
    # httpd and Varnish notice a departed client only at their next write (docs/verify.md).
    group.addoption("--stream-heartbeat", type=float, default=None, metavar="S",
                    help="your server sends `: ping` after S s of silence (--stream-config's "
                         "disconnect check runs through them, as labs verify --heartbeat)")
    group.addoption("--stream-budget", type=float, default=None, metavar="S",
                    help="bound on the probe's whole run")
    group.addoption("--stream-api-key-env", default=None, metavar="VAR",
                    help="environment variable holding the path's API key")
    group.addoption("--stream-api", choices=tuple(APIS), default=DEFAULT_API,
                    help="the wire protocol every stream speaks, as `labs probe --api` and `labs verify "
                         f"--api` take it: {', '.join(f'{a.name} ({a.path})' for a in APIS.values())} "
                         f"(default {DEFAULT_API})")
    # No `choices`: the proxies' table would import verify's readers into every pytest session;
    # verify refuses an unknown name itself ("unknown proxy ...; known: ...").
    group.addoption("--stream-proxy", default=None, metavar="PROXY",
                    help="the proxy of every --stream-config file, as `labs verify --proxy` names it "
                         "(default: detected per file)")
    group.addoption("--stream-proxy-version", default=None, metavar="X.Y[.Z]",
                    help="the proxy version every --stream-config file is written for, as `labs verify "
                         "--proxy-version` takes it: that release runs it (default: the current one; "
                         "a failing test says which ran)")


def pytest_configure(config: pytest.Config) -> None:
    """With the plugin's options, SIGTERM, SIGINT and SIGHUP stop pytest as Ctrl-C does (the
    session ends, the lab server and every proxy a verify started are stopped), and pytest exits
    with 128 + the signal's number (server.signals); without them pytest's own handling is kept."""
    if not _stream_options(config):
        return
    import contextlib

    from server import signals

    stack = contextlib.ExitStack()
    stack.enter_context(signals.stopped_by_signals())
    stack.callback(signals.stop_started)  # cleanups run newest first: after the lab server's
    config.add_cleanup(stack.close)


@pytest.hookimpl(wrapper=True)
def pytest_sessionfinish(session: pytest.Session) -> Iterator[None]:
    result = yield
    if _stream_options(session.config):
        from server import signals

        stop = signals.stopped()
        if stop is not None:  # pytest calls it "interrupted" (2); a stop signal's status is 128 + N
            session.exitstatus = stop.exit_status
    return result


def _stream_options(config: pytest.Config) -> bool:
    return bool(config.getoption("stream_url") or config.getoption("stream_config"))


@pytest.hookimpl(tryfirst=True)  # before -k / -m deselect, so that they select these tests too
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config,
                                  items: list[pytest.Item]) -> None:
    urls = config.getoption("stream_url")
    files = config.getoption("stream_config")
    if not urls and not files:
        return
    config.stash[_RESULTS] = {}
    guards = StreamGuards.from_parent(session, name="streamlab", nodeid="streamlab")
    added: list[pytest.Item] = []
    if urls:
        from labs.probe import CHECK_NAMES

        added += [PathCheck.from_parent(guards, name=f"{PATH_TEST}[{check}]", check=check)
                  for check in CHECK_NAMES]
    if files:
        from labs.findings import FINDING_KINDS

        for file in files:
            added += [ConfigCheck.from_parent(guards, name=f"{CONFIG_TEST}[{file}-{kind}]",
                                              file=file, kind=kind) for kind in FINDING_KINDS]
    # Reported like any collected node, so that the counts pytest prints include these tests.
    config.hook.pytest_collectreport(report=pytest.CollectReport(guards.nodeid, "passed", None, added))
    items += added


class StreamGuards(pytest.Collector):
    """The parent of the plugin's tests (they come from options, not from a test file)."""

    def collect(self) -> Iterator[pytest.Item]:
        return iter(())


class GuardFailure(Exception):
    """A check that found its fault: the message is the evidence and the fix."""


class _Guard(pytest.Item):
    def reportinfo(self) -> tuple[Any, int | None, str]:
        return self.path, None, self.name

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException],
                     style: Any = None) -> str | Any:
        if isinstance(excinfo.value, GuardFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def _results(self) -> dict[Any, Any]:
        return self.config.stash[_RESULTS]

    def _selected(self, cls: type) -> list[Any]:
        """The tests of this kind that are left to run (after -k and -m)."""
        return [item for item in self.session.items if isinstance(item, cls)]


def _failure(title: str, findings: list[Any], observed: str, urls: list[str] | None = None) -> str:
    """The evidence and the fix, as a failing test shows them."""
    if not findings:
        return f"{title}: {observed}"
    lines = []
    for finding in findings:
        hop = getattr(finding, "hop", None)
        where = f" at hop {hop} ({urls[hop]})" if urls and hop is not None else ""
        if getattr(finding, "where", None):
            where += f" ({finding.where})"
        lines.append(f"{title}{where}: {finding.evidence}")
        if finding.limit_s is not None:
            lines.append(f"limit: {finding.limit_s:.2f} s")
        lines += [f"fix: {fix}" for fix in (finding.fix or "").split(" | ") if fix]
        if finding.scenario:
            from labs.findings import lab_command

            lines.append(f"see: {lab_command(finding.scenario)}")
    return "\n".join(lines)


class PathCheck(_Guard):
    def __init__(self, *, check: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.check = check

    def _report(self) -> Any:
        results = self._results()
        if "path" not in results:
            from labs.findings import UnusableInput
            from labs.probe import probe_path

            option = self.config.getoption
            chosen = sorted({item.check for item in self._selected(PathCheck)})
            try:
                results["path"] = probe_path(
                    option("stream_url"), max_silence_s=option("stream_max_silence"),
                    max_stream_s=option("stream_max_stream"), budget_s=option("stream_budget"),
                    api_key_env=option("stream_api_key_env"), checks=chosen, api=option("stream_api"))
            except UnusableInput as exc:
                results["path"] = exc
        return results["path"]

    def runtest(self) -> None:
        report = self._report()
        if isinstance(report, Exception):
            raise GuardFailure(f"the path cannot be probed: {report}")
        outcome = next((c for c in report.checks if c.name == self.check), None)
        if outcome is None:
            pytest.skip(f"{self.check} was not run")
        if outcome.skipped:
            pytest.skip(f"{self.check}: {outcome.skipped}")
        finding = report.finding_for(self.check)
        if outcome.passed or finding is None:
            return
        if finding.severity == "warning":
            warnings.warn(StreamPathWarning(f"{self.check}: {finding.evidence} ({finding.reason})"))
            return
        raise GuardFailure(_failure(self.check, [finding], outcome.observed, report.urls))


class ConfigCheck(_Guard):
    def __init__(self, *, file: str, kind: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.file = file
        self.kind = kind

    def _report(self) -> Any:
        results = self._results()
        if self.file not in results:
            from labs.findings import UnusableInput
            from labs.verify import CHECK_KINDS, verify_config

            option = self.config.getoption
            tuning = {name: value for name, value in (
                ("max_silence_s", option("stream_max_silence")),
                ("max_stream_s", option("stream_max_stream")),
                ("heartbeat_s", option("stream_heartbeat"))) if value is not None}
            # Only the checks that can show the kinds -k left selected for this file, as the
            # probe does: a run of one kind costs seconds, not the whole verify.
            kinds = {item.kind for item in self._selected(ConfigCheck) if item.file == self.file}
            tuning["checks"] = [name for name, shown in CHECK_KINDS.items() if kinds & set(shown)]
            from server.apis.table import DEFAULT_API

            if option("stream_proxy_version") or option("stream_api") != DEFAULT_API:  # else verify's defaults
                from labs.verify.model import RouteWanted
                tuning["wanted"] = RouteWanted(version=option("stream_proxy_version"), api=option("stream_api"))
            try:
                results[self.file] = verify_config(Path(self.file), proxy=option("stream_proxy"),
                                                   server=self._lab_server(), **tuning)
            except UnusableInput as exc:
                results[self.file] = exc
        return results[self.file]

    def _lab_server(self) -> Any:
        """One lab server for every --stream-config file of the session (started with the first
        verify, stopped when pytest ends): each further file costs its checks, not a server start."""
        if _LAB_SERVER not in self.config.stash:
            import contextlib

            from labs.verify import lab_server

            stack = contextlib.ExitStack()
            self.config.add_cleanup(stack.close)
            self.config.stash[_LAB_SERVER] = stack.enter_context(lab_server())
        return self.config.stash[_LAB_SERVER]

    def runtest(self) -> None:
        report = self._report()
        if isinstance(report, Exception):
            raise GuardFailure(f"{self.file} cannot be verified: {report}")
        from labs.verify import CHECK_KINDS

        findings = [f for f in report.findings if f.kind == self.kind]
        # The checks that look for this kind (a passing check names no kind of its own).
        checks = [c for c in report.checks
                  if self.kind in CHECK_KINDS.get(c.name, ()) or getattr(c, "kind", None) == self.kind]
        failures = [f for f in findings if f.severity == "failure"]
        for finding in findings:
            if finding.severity == "warning":
                warnings.warn(StreamPathWarning(f"{self.file}: {self.kind}: {finding.evidence}"
                                                f"{f' ({finding.reason})' if finding.reason else ''}"))
        failed_checks = [c for c in checks if not c.passed and not getattr(c, "skipped", None)
                         and getattr(c, "kind", None) == self.kind]
        if failures or failed_checks:
            observed = ("; ".join(f"{c.name}: {c.observed}" for c in failed_checks)
                        or "a dynamic check showed it")
            said = (getattr(report, "measured_on", None) or {}).get("said")  # which release's binary showed it
            raise GuardFailure(_failure(f"{Path(self.file).name}: {self.kind}", failures, observed)
                               + (f"\n{said}" if said else ""))
        if not findings and not checks:
            pytest.skip(f"verify ran no check for {self.kind} on {self.file}")
        if checks and not any(c.passed for c in checks):  # they ran, but measured nothing usable
            pytest.skip(f"{self.kind} could not be measured on {self.file}: "
                        + "; ".join(f"{c.name}: {c.observed}" for c in checks))
