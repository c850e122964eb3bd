"""A report as a CI reads it: a SARIF 2.1.0 log, or GitHub Actions workflow commands.

Why a module of its own, here: a CI shows a finding where it is (a code-scanning view at the
file and line, an annotation on the pull request), so both formats need the one thing the
terminal tables do not: a `Place` for each finding. Verify places a finding at the line of the
user's config (or at its file, when the proxy's default applies); probe at the URL of the hop
that shows it. Everything else (one SARIF rule per finding kind, the message, the skipped checks
as notifications, the escaping GitHub documents) is the same for both, so it lives once, beside
the kinds it reads.

    sarif_log(report, tool="streamlab verify", place=..., exit_code=report.exit_status)
    unusable_sarif_log(error, tool="streamlab verify", file=...)
    workflow_commands(report, tool="streamlab verify", place=...)
    unusable_workflow_commands(error, tool="streamlab verify", file=...)
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any, Callable
from urllib.parse import quote

from labs.findings.kinds import KINDS
from labs.findings.report import EXIT_UNUSABLE, Finding, PathReport, UnusableInput, lab_command

SARIF_VERSION = "2.1.0"
# The schema the log declares: the OASIS errata 01 deliverable, vendored for the tests under
# tests/data/schemas/ (its README says where it comes from).
SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
# Relative artifact URIs are relative to the folder the command ran in; GitHub's upload-sarif
# resolves this base to the checkout (run the command from the repository root).
SRCROOT = "%SRCROOT%"


@dataclass(frozen=True)
class Place:
    """Where a CI shows a finding: a file as the user opens it (relative to the working folder
    when inside it) and its line, or a URL the tool measured; `said` is what the message adds."""

    file: str | None = None
    line: int | None = None
    url: str | None = None
    said: str = ""


def tool_version() -> str:
    """The installed package's version; from a checkout not installed, its pyproject's."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("streamlab")
    except PackageNotFoundError:
        from server.locations import checkout

        root = checkout()
        text = (root / "pyproject.toml").read_text(encoding="utf-8") if root else ""
        found = re.search(r'^version = "([^"]+)"', text, re.MULTILINE)
        return found.group(1) if found else "unknown"


def _information_uri() -> str | None:
    """The project's home page, when the package metadata declares one (pyproject [project.urls])."""
    from importlib.metadata import PackageNotFoundError, metadata

    try:
        meta = metadata("streamlab")
    except PackageNotFoundError:
        return None
    urls = [entry.partition(",")[2].strip() for entry in meta.get_all("Project-URL") or []]
    return next((url for url in [*urls, meta.get("Home-page")] if url), None)


def message(finding: Finding, place: Place) -> str:
    """What the finding says, one part a line: evidence, place, fix, why only a warning, the lab."""
    limit = f" (limit {finding.limit_s:g} s)" if finding.limit_s is not None else ""
    lines = [finding.evidence + limit, place.said]
    if finding.fix:
        lines.append(f"Fix: {finding.fix}")
    if finding.reason:
        lines.append(f"Only a warning: {finding.reason}")
    if finding.scenario:
        lines.append(f"See it in the lab: {lab_command(finding.scenario)}")
    return "\n".join(line for line in lines if line)


def verdict(report: PathReport) -> str:
    failures = len(report.failures())
    warnings = len(report.findings) - failures
    words = f"{failures} failure(s), {warnings} warning(s)" if report.findings else "ok: no finding"
    skipped = sum(1 for check in report.checks if check.skipped)
    # What could not be measured is never part of the "ok": said beside it, as the tables do.
    return words + (f"; {skipped} check(s) skipped (not measured)" if skipped else "")


# -- SARIF 2.1.0 ---------------------------------------------------------------------------------

def _rules() -> list[dict[str, Any]]:
    """One rule per finding kind, from the kinds' one table (labs.findings.kinds)."""
    return [{"id": kind.id, "shortDescription": {"text": kind.words},
             "help": {"text": f"The catalogue scenario {kind.scenario} shows this fault and its fix: "
                              f"{lab_command(kind.scenario)}"},
             "defaultConfiguration": {"level": "error"}, "properties": {"scenario": kind.scenario}}
            for kind in KINDS]


def _artifact(file: str) -> dict[str, Any]:
    path = PurePath(file)
    if path.is_absolute():  # outside the working folder: no base to be relative to
        return {"uri": Path(file).as_uri()}
    return {"uri": quote(path.as_posix(), safe="/"), "uriBaseId": SRCROOT}


def _location(place: Place) -> dict[str, Any]:
    if place.file is None:  # a URL, not a file: a logical location (SARIF's kind "resource")
        return {"logicalLocations": [{"fullyQualifiedName": place.url or "?", "kind": "resource"}]}
    # GitHub code scanning shows a result only with region.startLine: the file's first line
    # stands for "the whole file" (a default no line sets; the message says so).
    return {"physicalLocation": {"artifactLocation": _artifact(place.file),
                                 "region": {"startLine": place.line or 1}}}


def _log(tool: str, results: list[dict[str, Any]], invocation: dict[str, Any]) -> dict[str, Any]:
    driver: dict[str, Any] = {"name": tool, "version": tool_version(), "rules": _rules()}
    if uri := _information_uri():
        driver["informationUri"] = uri
    run = {"tool": {"driver": driver}, "invocations": [invocation], "results": results,
           "originalUriBaseIds": {SRCROOT: {"uri": Path.cwd().as_uri().rstrip("/") + "/"}}}
    return {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION, "runs": [run]}


def sarif_log(report: PathReport, *, tool: str, place: Callable[[Finding], Place],
              exit_code: int, run_properties: dict[str, Any] | None = None) -> dict[str, Any]:
    """`run_properties`: the run's property bag (verify's: the proxy release that was measured)."""
    rule_index = {kind.id: index for index, kind in enumerate(KINDS)}
    results = []
    for finding in report.findings:
        where = place(finding)
        properties = {key: value for key, value in (("scenario", finding.scenario), ("fix", finding.fix),
                                                    ("limit_s", finding.limit_s)) if value is not None}
        # A named fault no kind declares yet (verify --mcp's session-affinity) has its id, no rule.
        indexed = {"ruleIndex": rule_index[finding.kind]} if finding.kind in rule_index else {}
        results.append({"ruleId": finding.kind, **indexed,
                        "level": "error" if finding.severity == "failure" else "warning",
                        "message": {"text": message(finding, where)}, "locations": [_location(where)],
                        "properties": properties})
    skipped = [{"level": "warning", "message": {"text": f"check {check.name} skipped (not measured): "
                                                        f"{check.skipped}"},
                **({"associatedRule": {"id": check.kind, "index": rule_index[check.kind]}}
                   if check.kind in rule_index else {})}
               for check in report.checks if check.skipped]
    # executionSuccessful: the run ended with a verdict; a fault found is a result, not a failed run.
    invocation = {"executionSuccessful": exit_code != EXIT_UNUSABLE, "exitCode": exit_code,
                  "toolExecutionNotifications": skipped}
    log = _log(tool, results, invocation)
    if run_properties:
        log["runs"][0]["properties"] = run_properties
    return log


def unusable_sarif_log(error: UnusableInput, *, tool: str, file: str | None) -> dict[str, Any]:
    """A valid log with no result: the run could not use its input (exit status 2), and says why
    in an error notification at the file and line when known."""
    notification: dict[str, Any] = {"level": "error", "message": {"text": str(error)}}
    if file:
        notification["locations"] = [_location(Place(file=file, line=error.line))]
    return _log(tool, [], {"executionSuccessful": False, "exitCode": EXIT_UNUSABLE,
                           "toolExecutionNotifications": [notification]})


# -- GitHub Actions workflow commands ------------------------------------------------------------

def escape_data(text: str) -> str:
    """A command's message, as GitHub's toolkit escapes it (`%` first, so nothing is escaped twice)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A property value (file=, title=): `:` and `,` end it otherwise."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def command(name: str, text: str, **properties: str | int | None) -> str:
    given = ",".join(f"{key}={escape_property(str(value))}" for key, value in properties.items()
                     if value is not None)
    return f"::{name}{' ' + given if given else ''}::{escape_data(text)}"


def _annotated(place: Place) -> dict[str, str | int | None]:
    # No file (a URL): an annotation of the run; the place's own words name the URL.
    return {"file": Path(place.file).as_posix(), "line": place.line} if place.file else {}


def workflow_commands(report: PathReport, *, tool: str, place: Callable[[Finding], Place],
                      said: str = "") -> list[str]:
    """One annotation per finding, one per skipped check, then the verdict as a notice (with
    `said` after it: verify's "measured on ..." line)."""
    lines = []
    for finding in report.findings:
        where = place(finding)
        lines.append(command("error" if finding.severity == "failure" else "warning",
                             message(finding, where), **_annotated(where), title=f"{tool}: {finding.kind}"))
    lines += [command("warning", f"check {check.name} not measured: {check.skipped}",
                      title=f"{tool}: skipped") for check in report.checks if check.skipped]
    lines.append(command("notice", verdict(report) + (f"; {said}" if said else ""), title=tool))
    return lines


def unusable_workflow_commands(error: UnusableInput, *, tool: str, file: str | None) -> list[str]:
    return [command("error", str(error), **_annotated(Place(file=file, line=error.line)),
                    title=f"{tool}: unusable input")]

