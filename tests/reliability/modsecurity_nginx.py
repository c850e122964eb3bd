"""By hand: what nginx's ModSecurity v3 connector does to an event stream it inspects (docs/proxies.md,
"A WAF in front"). The lab's nginx template has no ModSecurity settings, so this runs nginx with a
config of its own: the connector loaded, `modsecurity_rules_file` with the case's directives and a
log-only phase-4 rule on the response body, `proxy_buffering off`, in front of the lab's server
(the synthetic engine, 40 tokens at 10/s).

    .venv/bin/python -m tests.reliability.modsecurity_nginx [--nginx BINARY] [--module SO]

Defaults: Debian 12's nginx and its `libnginx-mod-http-modsecurity`. nginx 1.30 with Debian sid's
module: unpack both as proxies/unpack.py does (`mmdebstrap --variant=extract
--include=nginx-light,libnginx-mod-http-modsecurity sid ROOT`), patch ROOT/usr/sbin/nginx's loader
and RPATH into ROOT (patchelf), and pass it with `--module ROOT/usr/lib/nginx/modules/...`.
Prints, per case: the status, when the headers and the first byte came, the reads, how it ended.
Not part of the test suite.
"""
from __future__ import annotations

import argparse
import http.client
import json
import subprocess
import tempfile
import time
from pathlib import Path

from labs.scenario.runner import Lab
from server.processes import free_port, wait_until

MODULE = "/usr/lib/nginx/modules/ngx_http_modsecurity_module.so"
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
SecRule RESPONSE_BODY "@rx ." "id:9002,phase:4,{disruptive},log,msg:'lab: read the response body'"
"""
# (engine, limit, limit action, what the phase-4 rule does on a match)
CASES = [(engine, limit, action, "pass") for engine in ("On", "DetectionOnly")
         for limit in (4096, 1 << 20) for action in ("ProcessPartial", "Reject")]
CASES.append(("On", 1 << 20, "ProcessPartial", "deny,status:403"))


def measure(port: int, model: str) -> str:
    body = {"model": model, "stream": True, "max_tokens": 40, "messages": [{"role": "user", "content": "hi"}],
            "lab": {"tokens_per_s": 10}}
    started = time.monotonic()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    connection.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
    answer = connection.getresponse()
    headers_s, first_s, reads, data, end = time.monotonic() - started, None, 0, b"", "clean"
    while True:
        try:
            chunk = answer.read1(65536)
        except http.client.IncompleteRead:
            end = "cut (incomplete chunked body)"
            break
        if not chunk:
            break
        first_s = first_s if first_s is not None else time.monotonic() - started
        reads, data = reads + 1, data + chunk
    return (f"{answer.status}, headers at {headers_s:.2f} s, first byte at {first_s or 0:.2f} s, {reads} reads, "
            f"{len(data)} bytes over {time.monotonic() - started:.2f} s, [DONE] {'seen' if b'[DONE]' in data else 'missing'}, {end}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nginx", default="/usr/sbin/nginx")
    parser.add_argument("--module", default=MODULE)
    args = parser.parse_args()
    print(subprocess.run([args.nginx, "-v"], capture_output=True, text=True).stderr.strip())
    with Lab() as lab, tempfile.TemporaryDirectory(prefix="streamlab-modsecurity-") as folder:
        Path(folder).chmod(0o755)
        server = lab.server(("--engine", "synthetic"))
        for engine, limit, action, disruptive in CASES:
            port, rules, config = free_port(), Path(folder, "rules.conf"), Path(folder, "nginx.conf")
            rules.write_text(RULES.format(engine=engine, limit=limit, action=action, disruptive=disruptive))
            config.write_text(CONFIG.format(module=args.module, port=port, rules=rules, upstream=server.port))
            nginx = subprocess.Popen([args.nginx, "-p", f"{folder}/", "-c", str(config), "-e", "stderr"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                wait_until(lambda: _open(port), timeout_s=10, describe="nginx listening")
                print(f"{engine:13} limit {limit:>7} {action:14} rule {disruptive:15} ->",
                      measure(port, lab.model_name(("--engine", "synthetic"))))
            finally:
                nginx.terminate()
                nginx.wait(timeout=10)


def _open(port: int) -> bool:
    try:
        http.client.HTTPConnection("127.0.0.1", port, timeout=1).connect()
        return True
    except OSError:
        return False


if __name__ == "__main__":
    main()
