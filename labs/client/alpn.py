"""Which protocol an `https://` entry picks when offered `h2` and `http/1.1` by ALPN, as a
browser offers them: what decides whether the streaming checks also run over HTTP/2 (probe, verify)."""
from __future__ import annotations

import asyncio
import ssl
from urllib.parse import urlsplit

ALPN_TIMEOUT_S = 10.0


def alpn_context(verify: bool) -> ssl.SSLContext:
    """A client context offering both protocols, as a browser does (the server picks)."""
    context = ssl.create_default_context()
    if not verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    context.set_alpn_protocols(["h2", "http/1.1"])
    return context


async def negotiate(url: str, verify: bool) -> tuple[str | None, str]:
    """(the protocol the entry picks by ALPN, or None; what happened, in words)."""
    parts = urlsplit(url)
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(
            parts.hostname, parts.port or 443, ssl=alpn_context(verify)), ALPN_TIMEOUT_S)
    except (OSError, asyncio.TimeoutError) as exc:  # ssl.SSLError is an OSError
        hint = " (a self-signed certificate: --insecure)" if isinstance(exc, ssl.SSLError) else ""
        return None, f"the TLS handshake failed: {type(exc).__name__}: {exc}{hint}"
    ssl_object = writer.get_extra_info("ssl_object")
    chosen = ssl_object.selected_alpn_protocol() if ssl_object else None
    writer.transport.abort()  # nothing was sent: no close_notify to wait for
    return chosen, f"offered h2 and http/1.1 by ALPN, the entry picked {chosen or 'none'}"
