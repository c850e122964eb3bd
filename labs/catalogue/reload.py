"""Reload scenarios: a deploy reloads the proxy while answers stream (nginx SIGHUP, HAProxy
master-worker SIGUSR2); a short drain limit cuts every stream still running."""
from __future__ import annotations

from labs.scenario import checks
from labs.catalogue.nginx import STREAMING_UPSTREAM
from labs.lab.server import DEFAULT_SCRIPT
from labs.scenario.model import Scaled, Scenario, Variant, Workload

NGINX_CORE = "https://nginx.org/en/docs/ngx_core_module.html"
HAPROXY_DOCS = "https://docs.haproxy.org/2.6/configuration.html"
RELOAD_AT_S = 1.5  # the deploy, this long after the request
DRAIN_S = 1.5  # worker_shutdown_timeout / hard-stop-after in the broken variants
# About 6 s of answer: it outlives the reload plus the drain limit by several seconds.
ANSWER = Workload(script=" ".join([DEFAULT_SCRIPT] * 3), tokens_per_s=10.0, reload_at_s=RELOAD_AT_S)
CUT_AT_S = RELOAD_AT_S + DRAIN_S


def _checks(limit: str) -> tuple[tuple[checks.Check, ...], tuple[checks.Check, ...]]:
    symptom = (checks.reloaded_mid_stream(), checks.outcome_is("truncated"), checks.status_is(200),
               checks.cut_at_deadline(CUT_AT_S, f"the reload plus {limit}"))
    cure = (checks.reloaded_mid_stream(), checks.complete_with_done(),
            checks.outlived(CUT_AT_S, f"the reload plus the broken {limit}"))
    return symptom, cure


NGINX_SYMPTOM, NGINX_CURE = _checks("worker_shutdown_timeout")
HAPROXY_SYMPTOM, HAPROXY_CURE = _checks("hard-stop-after")

SCENARIOS = [
    Scenario(
        name="nginx-reload",
        layer="proxy",
        kind=None,  # not a finding `labs verify` can see yet (small events, no reload, 3 proxies)
        symptom="every deploy cuts the answers in flight, with a 200 in the access log",
        path=("nginx",),
        workload=ANSWER,
        broken=Variant(proxy={"nginx": {"proxy_buffering": False, **STREAMING_UPSTREAM,
                                        "worker_shutdown_timeout": DRAIN_S}}),
        fix=Variant(proxy={"nginx": {"worker_shutdown_timeout": None}}),
        symptom_checks=NGINX_SYMPTOM,
        cure_checks=NGINX_CURE,
        explanation=(
            "A reload (SIGHUP, `nginx -s reload`, what config management does on every deploy) "
            "starts new workers and asks the old ones to finish their requests. With "
            "worker_shutdown_timeout the old workers close whatever still runs after it: every "
            "stream in flight ends without [DONE], while the access log says 200 (the status went "
            "out long before). Without it the old workers serve their streams to the end."),
        fix_summary="no worker_shutdown_timeout shorter than the longest stream",
        finding=(
            "The trade-off, measured both ways here: without the timeout the old worker lingers as "
            "long as its longest stream (memory, and a second config live at once); with it every "
            "deploy cuts streams. Drain longer than the longest answer, or drain at the load "
            "balancer first."),
        scaled=(Scaled("worker_shutdown_timeout", f"{DRAIN_S:g}s", "often 10s-30s in configs"),
                Scaled("answer length", "6s", "minutes"), Scaled("reload", f"at {RELOAD_AT_S:g}s", "any deploy")),
        sources=(f"{NGINX_CORE}#worker_shutdown_timeout", "https://nginx.org/en/docs/control.html"),
    ),
    Scenario(
        name="haproxy-reload",
        layer="proxy",
        kind=None,  # not a finding `labs verify` can see yet (small events, no reload, 3 proxies)
        symptom="every deploy cuts the answers in flight behind HAProxy",
        path=("haproxy",),
        workload=ANSWER,
        broken=Variant(proxy={"haproxy": {"http_no_delay": True, "hard_stop_after": DRAIN_S}}),
        fix=Variant(proxy={"haproxy": {"hard_stop_after": None}}),
        symptom_checks=HAPROXY_SYMPTOM,
        cure_checks=HAPROXY_CURE,
        explanation=(
            "In master-worker mode (-W) a reload (SIGUSR2 to the master, `systemctl reload`) starts "
            "a new worker and leaves the old one to finish its connections. hard-stop-after bounds "
            "how long it may: every stream still running then is killed (termination flags KD--, "
            "status 200 in the log) and the client sees no [DONE]. Leave it unset, or above the "
            "longest answer."),
        fix_summary="no hard-stop-after shorter than the longest stream",
        finding=(
            "Measured on this machine: with streams draining, the old worker exited with code 139 "
            "after its last stream ended; the clients were not affected."),
        scaled=(Scaled("hard-stop-after", f"{DRAIN_S:g}s", "often 30s-1h in configs"),
                Scaled("answer length", "6s", "minutes")),
        sources=(f"{HAPROXY_DOCS}#3.1-hard-stop-after", "https://docs.haproxy.org/2.6/management.html"),
    ),
]
