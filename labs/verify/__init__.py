"""`labs verify`: a user's own proxy config, read statically and measured in front of the lab's server.

    from labs.verify import verify_config
    report = verify_config(Path("nginx.conf"), quick=True)
    report.ok, report.findings, report.checks, report.rewrites, report.to_json()

Modules, one job each: `kinds` (the proxies verify reads, one folder each: `config` parses,
`read` finds the route and the settings in effect, `rules` says what they suggest, `rewrite` runs
it here on loopback only, `kind` declares it), `detect` (which proxy), `rewrite` (what every
rewrite shares), `launch` (the proxy's own validator, the process), `trials` (what is sent, each
answer read by its kind's judge in `labs.findings`), `containers` (the same in the proxy's
container), `judge` (suspicions and verdicts into findings), `output` + `cli` (tables, JSON,
SARIF, GitHub annotations, exit status), `run` (all of it).
"""
from __future__ import annotations

from labs.verify.trials import CHECK_KINDS, CHECK_NAMES
from labs.verify.model import Options, VerifyReport
from labs.verify.run import lab_server, read_config, verify_config

__all__ = ["CHECK_KINDS", "CHECK_NAMES", "Options", "VerifyReport", "lab_server", "read_config", "verify_config"]
