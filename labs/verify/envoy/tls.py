"""TLS kept as TLS: a listener's `envoy.transport_sockets.tls` (DownstreamTlsContext) still speaks
TLS here, with the run's certificate (files made for the run, self-signed for 127.0.0.1), so its
ALPN, TLS parameters and a virtual host's `require_tls` behave as deployed and the measuring
client speaks TLS to it. What cannot work here goes, said in the notes: the user's certificate
files or inline PEMs, SDS secrets and certificate providers (the run's pair serves instead),
client-certificate validation (the lab's client presents none), session ticket keys and OCSP."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

from labs.verify.envoy.config import YamlMap, typed
from labs.verify.yamledit import Edits

DOWNSTREAM = "DownstreamTlsContext"
TLS_KEPT = ("TLS is kept: the TLS listeners serve a certificate made for the run (self-signed, for "
            "127.0.0.1), and verify measures them over TLS")
CERT_SOURCES = ("tls_certificates", "tls_certificate_sds_secret_configs", "tls_certificate_provider_instance",
                "tls_certificate_certificate_provider_instance", "tls_certificate_certificate_provider")
VALIDATION = ("validation_context", "validation_context_sds_secret_config", "combined_validation_context",
              "validation_context_certificate_provider", "validation_context_certificate_provider_instance")
COMMON_DROPPED = {"key_log": "a key log file of your machine's"}
CONTEXT_DROPPED = {"require_client_certificate": "the lab's client presents no certificate",
                   "session_ticket_keys": "ticket key files of your machine's",
                   "session_ticket_keys_sds_secret_config": "ticket keys from SDS, not here",
                   "ocsp_staple_policy": "the run's certificate has no OCSP staple",
                   "require_sni": "the lab's client connects to 127.0.0.1 and sends no SNI"}
Note = Callable[[str], None]


def is_downstream_tls(socket: YamlMap) -> bool:
    return DOWNSTREAM in typed(socket)


def certificates(pair: tuple[Path, Path]) -> str:
    return (f"tls_certificates: [{{certificate_chain: {{filename: {json.dumps(str(pair[0]))}}}, "
            f"private_key: {{filename: {json.dumps(str(pair[1]))}}}}}]")


def keep(edits: Edits, socket: YamlMap, pair: Callable[[], tuple[Path, Path]], where: str, note: Note) -> None:
    """The listener's DownstreamTlsContext with the run's pair in place of the user's certificate."""
    context = socket.mapping("typed_config")
    new = certificates(pair())
    for key, why in CONTEXT_DROPPED.items():
        if key in context:
            edits.comment(context, key)
            note(f"{where}: {key} dropped ({why})")
    if "common_tls_context" not in context:
        first = next(iter(context.key_nodes))
        edits.replace_pair(context, first, [_pair_text(edits, context, first), f"common_tls_context: {{{new}}}"])
        note(f"{where}: the run's certificate serves")
        return
    common = context.mapping("common_tls_context")
    if not common:
        edits.pair(context, "common_tls_context", f"common_tls_context: {{{new}}}")
        return
    dropped = [k for k in common if k in CERT_SOURCES or k in VALIDATION or k in COMMON_DROPPED]
    anchor = next((k for k in common if k in CERT_SOURCES), dropped[0] if dropped else None)
    for key in dropped:
        if key == "tls_certificates":
            note(f"{where}: the run's certificate (self-signed, for 127.0.0.1) serves instead of yours")
        elif key in CERT_SOURCES:
            note(f"{where}: {key} (SDS or a certificate provider, not here) replaced by the run's certificate")
        elif key in VALIDATION:
            note(f"{where}: {key} dropped (client certificates are not checked: the lab's client presents none)")
        else:
            note(f"{where}: {key} dropped ({COMMON_DROPPED[key]})")
        if key != anchor:
            edits.comment(common, key)
    if anchor is not None:
        edits.pair(common, anchor, new)
    else:
        first = next(iter(common.key_nodes))
        edits.replace_pair(common, first, [_pair_text(edits, common, first), new])


def _pair_text(edits: Edits, owner: YamlMap, key: str) -> str:
    start, end = owner.key_nodes[key].start_mark.index, owner.value_nodes[key].end_mark.index
    return edits.text[start:end].rstrip()
