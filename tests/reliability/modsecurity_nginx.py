"""What nginx's ModSecurity v3 connector does to an event stream it inspects (docs/proxies.md,
"A WAF in front"). The lab's nginx template has no ModSecurity settings, so this runs nginx with a
config of its own: the connector loaded, `modsecurity_rules_file` with the case's directives and a
log-only phase-4 rule on the response body, `proxy_buffering off`, in front of the lab's server
(the synthetic engine). The guard is tests/reliability/test_nginx_modsecurity_streams.py; by hand,
every combination:

    .venv/bin/python -m tests.reliability.modsecurity_nginx [--nginx BINARY] [--module SO]

Defaults: Debian 12's nginx and its `libnginx-mod-http-modsecurity`. nginx 1.30 with Debian sid's
module: unpack both as proxies/unpack.py does (`mmdebstrap --variant=extract
--include=nginx-light,libnginx-mod-http-modsecurity sid ROOT`), patch ROOT/usr/sbin/nginx's loader
and RPATH into ROOT (patchelf), and pass it with `--module ROOT/usr/lib/nginx/modules/...`.
Prints, per case: the status, when the headers and the first byte came, the reads, how it ended.
"""
from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from labs.scenario.runner import Lab
from server.processes import free_port, wait_until

MODULE = "/usr/lib/nginx/modules/ngx_http_modsecurity_module.so"
READ_RESPONSE_RULE = 9002  # the log-only phase-4 rule: its line in error.log proves the body was inspected
CONFIG = """load_module {module};
daemon off; pid nginx.pid; error_log error.log info; worker_processes 1;
events {{ worker_connections 64; }}
http {{
  access_log off; client_body_temp_path cbt; proxy_temp_path pt; fastcgi_temp_path ft;
  uwsgi_temp_path ut; scgi_temp_path st;
  server {{
    listen 127.0.0.1:{port};
    modsecurity on;
    modsecurity_rules_file {rules};
    location / {{ proxy_pass http://127.0.0.1:{upstream}; proxy_http_version 1.1;
                 proxy_set_header Connection ""; proxy_buffering off; }}
  }}
}}
"""
RULES = """SecRuleEngine {engine}
SecRequestBodyAccess On
SecResponseBodyAccess On
SecResponseBodyMimeType text/plain text/html text/event-stream
SecResponseBodyLimit {limit}
SecResponseBodyLimitAction {action}
SecRule RESPONSE_BODY "@rx ." "id:{rule},phase:4,{disruptive},log,msg:'lab: read the response body'"
"""


@dataclass(frozen=True)
class Case:
    engine: str  # SecRuleEngine
    limit: int  # SecResponseBodyLimit
    action: str  # SecResponseBodyLimitAction
    disruptive: str  # what the phase-4 rule does on a match

    def __str__(self) -> str:
        return f"{self.engine:13} limit {self.limit:>7} {self.action:14} rule {self.disruptive:15}"


CASES = [Case(engine, limit, action, "pass") for engine in ("On", "DetectionOnly")
         for limit in (4096, 1 << 20) for action in ("ProcessPartial", "Reject")]
CASES.append(Case("On", 1 << 20, "ProcessPartial", "deny,status:403"))


@dataclass(frozen=True)
class Outcome:
    status: int
    headers_s: float
    first_byte_s: float | None
    reads: int
    size: int
    total_s: float
    done_seen: bool  # the stream's `data: [DONE]` reached the client
    cut: bool  # the chunked body ended without its last chunk
    error_log: str  # nginx's error.log, where the connector writes what its rules logged

    def __str__(self) -> str:
        return (f"{self.status}, headers at {self.headers_s:.2f} s, first byte at {self.first_byte_s or 0:.2f} s, "
                f"{self.reads} reads, {self.size} bytes over {self.total_s:.2f} s, "
                f"[DONE] {'seen' if self.done_seen else 'missing'}, {'cut (incomplete chunked body)' if self.cut else 'clean'}")


def run_case(nginx: str, module: str, case: Case, upstream: int, model: str, tokens: int, tokens_per_s: float) -> Outcome:
    """nginx with the connector and the case's rules in front of the server on `upstream`, one stream through it."""
    with tempfile.TemporaryDirectory(prefix="streamlab-modsecurity-") as folder:
        Path(folder).chmod(0o755)
        port, rules, config = free_port(), Path(folder, "rules.conf"), Path(folder, "nginx.conf")
        rules.write_text(RULES.format(engine=case.engine, limit=case.limit, action=case.action,
                                      disruptive=case.disruptive, rule=READ_RESPONSE_RULE))
        config.write_text(CONFIG.format(module=module, port=port, rules=rules, upstream=upstream))
        process = subprocess.Popen([nginx, "-p", f"{folder}/", "-c", str(config), "-e", "stderr"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_until(lambda: _open(port), timeout_s=10, describe="nginx listening", alive=lambda: _running(process))
            outcome = _measure(port, model, tokens, tokens_per_s)
            log = Path(folder, "error.log")
            # The phase-4 line is written once the body has ended: polled, not slept.
            with contextlib.suppress(TimeoutError):  # the caller judges a log without it
                wait_until(lambda: f'[id "{READ_RESPONSE_RULE}"]' in log.read_text(errors="replace"),
                           timeout_s=5, describe=f"rule {READ_RESPONSE_RULE} logged")
            return Outcome(**outcome, error_log=log.read_text(errors="replace"))
        finally:
            process.terminate()
            process.wait(timeout=10)


def _measure(port: int, model: str, tokens: int, tokens_per_s: float) -> dict:
    body = {"model": model, "stream": True, "max_tokens": tokens, "messages": [{"role": "user", "content": "hi"}],
            "lab": {"tokens_per_s": tokens_per_s}}
    started = time.monotonic()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    connection.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    answer = connection.getresponse()
    headers_s, first_s, reads, data, cut = time.monotonic() - started, None, 0, b"", False
    while True:
        try:
            chunk = answer.read1(65536)
        except http.client.IncompleteRead:
            cut = True
            break
        if not chunk:
            break
        first_s = first_s if first_s is not None else time.monotonic() - started
        reads, data = reads + 1, data + chunk
    connection.close()
    return dict(status=answer.status, headers_s=headers_s, first_byte_s=first_s, reads=reads, size=len(data),
                total_s=time.monotonic() - started, done_seen=b"[DONE]" in data, cut=cut)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nginx", default="/usr/sbin/nginx")
    parser.add_argument("--module", default=MODULE)
    args = parser.parse_args()
    print(subprocess.run([args.nginx, "-v"], capture_output=True, text=True).stderr.strip())
    with Lab() as lab:
        server = lab.server(("--engine", "synthetic"))
        model = lab.model_name(("--engine", "synthetic"))
        for case in CASES:
            print(case, "->", run_case(args.nginx, args.module, case, server.port, model, tokens=40, tokens_per_s=10))


def _running(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        raise RuntimeError(f"nginx exited {process.returncode} before listening (error.log in its folder says why)")


def _open(port: int) -> bool:
    try:
        http.client.HTTPConnection("127.0.0.1", port, timeout=1).connect()
        return True
    except OSError:
        return False


if __name__ == "__main__":
    main()
