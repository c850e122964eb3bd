"""WAF scenarios: a real web application firewall in front of the stream, ModSecurity with the OWASP
core rule set from Debian's packages (the Envoy Lua filter of `envoy-body-inspection` stands in for
a gateway's own body filter).

Measured on this machine (docs/proxies.md#a-waf-in-front-modsecurity): Apache's mod_security2
holds an inspected response; nginx's ModSecurity v3 connector streams it and reads a copy, so the
scenario's path is Apache's.
"""
from __future__ import annotations

from labs.scenario import checks
from labs.scenario.model import Scenario, Variant, Workload

MODSEC = "https://github.com/owasp-modsecurity/ModSecurity/wiki/Reference-Manual-(v2.x)"
CORAZA_HELD = "https://github.com/corazawaf/coraza-nginx/issues/81"
# The lab's two log-only rules (ApacheSettings.modsecurity_lab_rules): what each variant proves.
READ_REQUEST_RULE, READ_RESPONSE_RULE = 9001, 9002
# Debian's modsecurity.conf-recommended: what a WAF set up from the package inspects.
RECOMMENDED_TYPES = ("text/plain", "text/html", "text/xml")
WAF = {"modsecurity": "On", "modsecurity_crs": True, "modsecurity_lab_rules": True,
       "modsecurity_request_body_access": True, "modsecurity_response_body_access": True,
       "modsecurity_response_body_limit_action": "ProcessPartial"}

SCENARIOS = [
    Scenario(
        name="waf-body-inspection",
        layer="proxy",
        kind="buffering",
        symptom="the WAF turned streaming into a blank screen, then the whole answer at once",
        path=("apache",),
        workload=Workload(),
        broken=Variant(proxy={"apache": {
            **WAF, "modsecurity_response_body_mime_types": (*RECOMMENDED_TYPES, "text/event-stream")}}),
        fix=Variant(proxy={"apache": {
            "modsecurity_response_body_mime_types": (*RECOMMENDED_TYPES, "application/json")}}),
        symptom_checks=(checks.held_to_end(), checks.finding("buffering"),
                        checks.waf_rule_logged(READ_RESPONSE_RULE, "it read the event stream"),
                        checks.waf_rule_logged(READ_REQUEST_RULE, "it read the prompt")),
        cure_checks=(checks.streamed(), checks.complete_with_done(), checks.no_finding("buffering"),
                     # The WAF still ran and read the prompt; the stream's body it no longer reads.
                     checks.waf_rule_logged(READ_REQUEST_RULE, "it still reads the prompt"),
                     checks.waf_rule_logged(READ_RESPONSE_RULE, "the event stream is no longer read",
                                            fired=False)),
        explanation=(
            "ModSecurity reads a response body only when `SecResponseBodyAccess On` and the response's "
            "type is in `SecResponseBodyMimeType`; Apache's mod_security2 then keeps the response, "
            "headers included, until it ends or reaches `SecResponseBodyLimit` (512 KiB), and only "
            "then passes it on. An event stream listed there reaches the client in one lump at its "
            "end, in DetectionOnly too; past the limit, `ProcessPartial` lets the rest stream and "
            "`Reject` answers 500. Keep text/event-stream out of the list: the rules still read the "
            "request, the headers and every other type's body (JSON answers included), but no "
            "longer the stream's answer: a rule on a streamed answer (data leakage) cannot fire."),
        fix_summary="SecResponseBodyMimeType without text/event-stream (the rules no longer read streamed answers)",
        finding=(
            "Measured here: nginx's ModSecurity v3 connector (1.0.3 on nginx 1.22, 1.0.4 on 1.30) does "
            "not hold the stream; it passes each chunk on and runs the response rules at its end, so "
            "a blocking rule there finds the headers sent and cuts the stream's last chunk instead. "
            "Coraza on nginx held SSE to its 1 MiB limit (coraza-nginx#81)."),
        sources=(f"{MODSEC}#SecResponseBodyAccess", f"{MODSEC}#SecResponseBodyMimeType",
                 f"{MODSEC}#SecResponseBodyLimitAction", CORAZA_HELD),
    ),
]
