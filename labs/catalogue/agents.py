"""Coding-agent scenarios: the real agent (labs/client/agents.py, run offline against the lab's
server) is the client, through the scenario's path; what it prints, its exit status and the
requests the server served it are the measurements (labs/client/agent_streams.py)."""
from __future__ import annotations

from labs.catalogue.nginx import DOCS as NGINX_DOCS
from labs.catalogue.nginx import STREAMING_UPSTREAM
from labs.client.agents import AGENT_SERVER
from labs.scenario import checks
from labs.scenario.model import Scaled, Scenario, Variant, Workload
from proxies.apps.starlette.modes import CLAUDE_CODE_PROXY, LITELLM_EVENT_LINES
from server.apis.table import MESSAGES

CODEX_CONFIG = "https://developers.openai.com/codex/config-reference"
CODEX_ISSUE = "https://github.com/openai/codex/issues/3229"
SSE_COMMENTS = "https://html.spec.whatwg.org/multipage/server-sent-events.html#authoring-notes"

# codex-idle-timeout, scaled down: the model thinks THINK_S before its first token; the gateway's
# idle timeout (nginx proxy_read_timeout) is shorter; Codex's own idle timer longer, as 300 s is
# longer than a 60 s gateway's; its retries cut from 5 to 2, so the broken run ends in seconds.
THINK_S = 3.0
PROXY_TIMEOUT_S = 1.0
CODEX_IDLE_MS = 5000
CODEX_RETRIES = 2
CODEX_SETTINGS = {"stream_idle_timeout_ms": str(CODEX_IDLE_MS), "stream_max_retries": str(CODEX_RETRIES)}
GATEWAY = {"nginx": {"proxy_buffering": False, **STREAMING_UPSTREAM, "proxy_read_timeout": PROXY_TIMEOUT_S}}
HEARTBEAT_S = 0.25
# claude-code-event-lines: its default max_tokens (32,000 for a model it does not know) would not
# fit the context beside its prompt.
CLAUDE_CODE_SETTINGS = {"CLAUDE_CODE_MAX_OUTPUT_TOKENS": "256"}

# codex-idle-timeout's measurements, and the two settings measured beside its variants.
CODEX_FINDING = (
    "Measured here (Codex CLI 0.171.0 offline, nginx with proxy_read_timeout 1 s, a 3 s "
    "think before the first token, Codex's stream_idle_timeout_ms 5000 and "
    "stream_max_retries 2): nginx cut each try 1.0 s into the think (\"upstream timed out\"), "
    "before any token; Codex printed `Reconnecting... 1/2` and `2/2`, the server served 3 "
    "requests, and Codex exited 1 after 4.6 s with \"stream disconnected before completion: "
    "Transport error: network error: error decoding response body\". With `: ping` every "
    "0.25 s (11 sent) the same path served 1 request, the first token left after 3.0 s and "
    "Codex printed the script (exit 0, 6.0 s). So a gateway's cut is this transport error; "
    "\"idle timeout waiting for SSE\" is Codex's own timer: with stream_idle_timeout_ms 1000 "
    "below the think, the pings on the wire (12 sent) did not stop it: 3 requests, each left "
    "by Codex after 1.0 s, exit 1 with that line. nginx at 10 s without pings also passed "
    "(1 request, exit 0). Commands: `python -m labs run codex-idle-timeout`; the other two "
    "are this scenario's fixed variant with those settings.")

SCENARIOS = [
    Scenario(
        name="codex-idle-timeout",
        layer="client",
        symptom="Codex loops on \"stream disconnected before completion\" behind the gateway "
                "whenever the model thinks for long, and every retry costs a whole request",
        path=("nginx",),
        workload=Workload(api="responses", lab={"first_token_delay_s": THINK_S},
                          client={"agent": "codex", "agent_settings": CODEX_SETTINGS}),
        broken=Variant(proxy=GATEWAY, lab={"heartbeat_s": 0}, server_args=AGENT_SERVER),
        fix=Variant(proxy=GATEWAY, lab={"heartbeat_s": HEARTBEAT_S}, server_args=AGENT_SERVER),
        symptom_checks=(checks.agent_exited(1), checks.client_error_names("stream disconnected before completion"),
                        checks.agent_retried(CODEX_RETRIES), checks.agent_requests("responses", 1 + CODEX_RETRIES),
                        checks.cut_in_the_silence(PROXY_TIMEOUT_S, "proxy_read_timeout")),
        cure_checks=(checks.agent_exited(0), checks.text_is_script(), checks.agent_requests("responses", 1),
                     checks.server_sent_heartbeats(int(PROXY_TIMEOUT_S / HEARTBEAT_S)),
                     checks.sat_through_the_silence(THINK_S, "the model's think")),
        explanation=(
            "A gateway's idle timeout (nginx `proxy_read_timeout`, a load balancer's idle timeout) "
            "ends a stream that stays silent longer than it, and a reasoning model is silent while "
            "it thinks. Codex sees the stream end before `response.completed`, prints "
            "`Reconnecting... n/5` and sends the whole request again (`stream_max_retries`, 5 by "
            "default), each try cut at the same point, then gives up with \"stream disconnected "
            "before completion\". SSE comments (`: ping`) from the server reset the gateway's "
            "timer, so the stream passes it. They do not reset Codex's own idle timer "
            "(`stream_idle_timeout_ms`, 300 s): it counts only events, so a think longer than "
            "that needs the setting raised, whatever the server sends."),
        fix_summary="`: ping` heartbeats from the server more often than the gateway's idle timeout "
                    "(and Codex's `stream_idle_timeout_ms` above the longest think)",
        finding=CODEX_FINDING,
        scaled=(Scaled("nginx proxy_read_timeout", f"{PROXY_TIMEOUT_S:g}s", "60s"),
                Scaled("the model's think before its first token", f"{THINK_S:g}s", "minutes"),
                Scaled("Codex stream_idle_timeout_ms", str(CODEX_IDLE_MS), "300000"),
                Scaled("Codex stream_max_retries", str(CODEX_RETRIES), "5"),
                Scaled("heartbeat interval", f"{HEARTBEAT_S:g}s", "10s")),
        sources=(CODEX_ISSUE, CODEX_CONFIG, f"{NGINX_DOCS}#proxy_read_timeout", SSE_COMMENTS),
    ),
    Scenario(
        name="claude-code-event-lines",
        layer="gateway",
        symptom="behind the logging proxy Claude Code answers, but slower, and the model bills every "
                "prompt twice",
        # proxy-strips-event-lines' relay (forwards only `data:` lines), Claude Code as its client.
        path=("starlette",),
        workload=Workload(api=MESSAGES.name, client={"agent": "claude-code", "agent_settings": CLAUDE_CODE_SETTINGS}),
        broken=Variant(proxy={"starlette": {"mode": "data-only"}}, server_args=AGENT_SERVER),
        fix=Variant(proxy={"starlette": {"mode": "lines"}}, server_args=AGENT_SERVER),
        symptom_checks=(checks.agent_exited(0), checks.text_is_script(), checks.agent_requests("messages", 1),
                        checks.agent_requests("messages", 1, stream=False)),
        cure_checks=(checks.agent_exited(0), checks.text_is_script(), checks.agent_requests("messages", 1),
                     checks.agent_requests("messages", 0, stream=False)),
        explanation=(
            "Claude Code dispatches a Messages stream on its `event:` lines. Through a hop that "
            "forwards only the `data:` lines it sees no `message_start` (\"Stream completed without "
            "receiving message_start event\", in the reports), and asks again without streaming: "
            "the answer comes, whole and late, and every prompt costs the model two requests. "
            "`CLAUDE_CODE_DISABLE_NONSTREAMING_FALLBACK=1` turns the second request off and shows "
            "the error instead. Relay every line as it comes (or the raw bytes)."),
        fix_summary="relay every line, `event:` lines included (the hop's fix in proxy-strips-event-lines)",
        finding=(
            "Measured here (`python -m labs run claude-code-event-lines`: Claude Code 2.1.332 offline, "
            "the Starlette relay in front of the lab's /v1/messages, a 66-character script at 10 tok/s): "
            "forwarding only `data:` lines, the server served a streamed and then an unstreamed "
            "request for the one prompt, and Claude Code printed the script (exit 0) after 5.5 s; "
            "relaying every line, one streamed request, 2.9 s. With "
            "CLAUDE_CODE_DISABLE_NONSTREAMING_FALLBACK=1 through the same data-only relay: one "
            "request, exit 1 after 2.7 s, \"API Error: Stream ended without receiving any events\" "
            "(that variant's settings in the fixed variant, measured once)."),
        sources=(CLAUDE_CODE_PROXY, LITELLM_EVENT_LINES, "https://docs.anthropic.com/en/api/messages-streaming"),
    ),
]
