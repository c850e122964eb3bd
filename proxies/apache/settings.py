"""Apache httpd settings (mod_proxy_http in front of the server), defaulting to httpd 2.4's own.

Apache's durations are whole seconds. Modules are loaded from Debian's folder
(`MODULES_DIR`); mod_unixd and mod_log_config are compiled in.
"""
from __future__ import annotations

from typing import ClassVar, Literal, Optional

from pydantic import Field

from proxies.base import ProxySettings, setting
from proxies.errors import ProxyError, errors_for, json_errors_setting
from proxies.types import MimeType

CORE = "https://httpd.apache.org/docs/2.4/mod/core.html"
PROXY = "https://httpd.apache.org/docs/2.4/mod/mod_proxy.html"
DEFLATE = "https://httpd.apache.org/docs/2.4/mod/mod_deflate.html"
REQTIMEOUT = "https://httpd.apache.org/docs/2.4/mod/mod_reqtimeout.html"
MPM = "https://httpd.apache.org/docs/2.4/mod/mpm_common.html"
# ModSecurity 2's directives (Debian's libapache2-mod-security2) and the OWASP core rule set.
MODSEC = "https://github.com/owasp-modsecurity/ModSecurity/wiki/Reference-Manual-(v2.x)"
CRS = "https://coreruleset.org/docs/"
MODULES_DIR = "/usr/lib/apache2/modules"  # Debian's; other builds keep them elsewhere
# Statuses Apache answers on its own in front of one backend.
APACHE_OWN_ERRORS = (400, 408, 413, 500, 502, 503, 504)
Seconds = Field(ge=1, le=86_400)


class ApacheSettings(ProxySettings):
    proxy: ClassVar = "apache"
    template: ClassVar[str] = "apache/apache.conf.j2"
    config_name: ClassVar[str] = "apache.conf"

    # Silences from the backend.
    timeout: int = Field(60, ge=1, le=86_400, description=(
        f"seconds Apache waits on a read or write, client or backend ({CORE}#timeout)"))
    proxy_timeout: Optional[int] = Field(None, ge=1, le=86_400, description=(
        "longest silence from the backend before the stream is cut (None: `timeout` applies) "
        f"({PROXY}#proxytimeout)"))
    flushpackets: Literal["off", "on", "auto"] = setting(
        "off", "flush each backend read to the client (ProxyPass key; measured: httpd 2.4 streams "
        "SSE with off too)", f"{PROXY}#proxypass")

    # Compression.
    deflate_types: tuple[MimeType, ...] = setting(
        (), "MIME types mod_deflate compresses (empty: mod_deflate not used)",
        f"{DEFLATE}#recommended")

    # Slow and silent clients (mod_reqtimeout; None: the module's defaults, header=20-40,
    # MinRate=500 body=20,MinRate=500).
    request_header_timeout: Optional[int] = Field(None, ge=1, le=86_400, description=(
        f"seconds to receive the request headers ({REQTIMEOUT}#requestreadtimeout)"))
    request_body_timeout: Optional[int] = Field(None, ge=1, le=86_400, description=(
        "seconds to receive the WHOLE request body (no MinRate: a fixed deadline, measured) "
        f"({REQTIMEOUT}#requestreadtimeout)"))
    keepalive_timeout: int = Field(5, ge=1, le=86_400, description=(
        f"seconds an idle keep-alive connection waits for the next request ({CORE}#keepalivetimeout)"))

    # Requests Apache refuses itself, and how it says so.
    limit_request_body: int = Field(1 << 30, ge=0, le=(1 << 31) - 1, description=(
        "largest request body in bytes, Content-Length or chunked (0: no limit; httpd 2.4.54+ "
        f"defaults to 1 GiB) ({CORE}#limitrequestbody)"))
    refuse_chunked: bool = setting(
        False, "answer 411 to a request body without a Content-Length (chunked): mod_proxy forwards "
               "one whole, whatever LimitRequestBody says (measured)",
        "https://httpd.apache.org/docs/2.4/mod/mod_rewrite.html#rewriterule")
    json_errors: bool = json_errors_setting("Apache", "HTML pages", f"{CORE}#errordocument")
    hide_version: bool = setting(
        False, "ServerTokens Prod and ServerSignature Off: `Server: Apache`, and no version on its own "
               "pages (httpd's default: the full version and the OS)", f"{CORE}#servertokens")

    # Concurrency (mpm_event): each stream holds a worker thread for its whole life.
    max_request_workers: int = Field(400, ge=1, le=100_000, description=(
        f"simultaneous requests (streams) served ({MPM}#maxrequestworkers)"))

    # The WAF in front: ModSecurity 2 (mod_security2), each default its own (the reference manual's).
    modsecurity: Optional[Literal["On", "DetectionOnly"]] = setting(
        None, "load mod_security2 and run its rules (`SecRuleEngine`): On blocks, DetectionOnly only "
              "logs (None: no WAF)", f"{MODSEC}#SecRuleEngine")
    modsecurity_crs: bool = setting(
        False, "run the OWASP core rule set too (Debian's modsecurity-crs, with its crs-setup.conf)", CRS)
    modsecurity_request_body_access: bool = setting(
        False, "let the rules read request bodies (the prompt): ModSecurity reads the whole body "
               "before forwarding it", f"{MODSEC}#SecRequestBodyAccess")
    modsecurity_response_body_access: bool = setting(
        False, "let the rules read response bodies of the listed types: ModSecurity keeps such a "
               "response, headers included, until it ends or reaches the limit (measured: an event "
               "stream arrives in one lump)", f"{MODSEC}#SecResponseBodyAccess")
    modsecurity_response_body_mime_types: tuple[MimeType, ...] = Field(
        ("text/plain", "text/html"), min_length=1, description="the response types whose bodies "
        f"the rules read (`SecResponseBodyMimeType`) ({MODSEC}#SecResponseBodyMimeType)",
        json_schema_extra={"docs": f"{MODSEC}#SecResponseBodyMimeType"})
    modsecurity_response_body_limit: int = Field(
        524_288, ge=1, le=1 << 30, description="bytes of a response body kept for the rules; an "
        "inspected stream's first byte waits until this many have come (measured) "
        f"({MODSEC}#SecResponseBodyLimit)", json_schema_extra={"docs": f"{MODSEC}#SecResponseBodyLimit"})
    modsecurity_response_body_limit_action: Literal["Reject", "ProcessPartial"] = setting(
        "Reject", "past the limit: Reject answers 500 instead of the response (in DetectionOnly it "
                  "passes it on), ProcessPartial inspects what it kept and passes the rest through",
        f"{MODSEC}#SecResponseBodyLimitAction")
    modsecurity_request_body_limit: Optional[int] = Field(None, ge=1, le=(1 << 31) - 1, description=(
        "largest request body ModSecurity reads, files or not (`SecRequestBodyLimit` and "
        "`SecRequestBodyNoFilesLimit`; None: its defaults, 12.5 MiB and 1 MiB, so a JSON prompt above "
        f"1 MiB gets 413, measured; Debian's recommended file: 128 KiB) ({MODSEC}#SecRequestBodyNoFilesLimit)"))
    modsecurity_audit_log: bool = setting(
        False, "write relevant transactions (a rule that logged, a 4xx but 404, a 5xx) to audit.log "
               "in the ServerRoot", f"{MODSEC}#SecAuditEngine")
    modsecurity_switchable: bool = setting(
        False, "render the WAF switched off: its two LoadModule lines commented out and its directives "
               "in `<IfModule security2_module>`, so uncommenting them switches it on (the fixed config's)",
        "https://httpd.apache.org/docs/2.4/mod/core.html#ifmodule")
    modsecurity_lab_rules: bool = setting(
        False, "two rules of the lab's that only log: id 9001 when ModSecurity read a request body, "
               "9002 when it read a response body (what the scenario's checks look for)",
        f"{MODSEC}#SecRule")

    modules_dir: ClassVar[str] = MODULES_DIR
    # Where Debian's modsecurity-crs puts the rule set and its settings.
    crs_setup: ClassVar[str] = "/etc/modsecurity/crs/crs-setup.conf"
    crs_rules: ClassVar[str] = "/usr/share/modsecurity-crs/rules/*.conf"

    @property
    def error_pages(self) -> list[ProxyError]:
        statuses = (*APACHE_OWN_ERRORS, 411) if self.refuse_chunked else APACHE_OWN_ERRORS
        # ModSecurity's refusals (a rule that blocks: 403).
        statuses = (*statuses, 403) if self.modsecurity else statuses
        return errors_for(sorted(statuses)) if self.json_errors else []
