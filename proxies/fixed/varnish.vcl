vcl 4.1;
# Varnish (a CDN-style cache) in front of an OpenAI-compatible SSE server (streamlab).
# Proven on Varnish 7.1 (Debian 12) and 7.7 (Debian trixie): each release's binary validates it and the
# lab's tests run it (tests/proxies, tests/verify/test_fixed.py, tests/reliability).
# Listens on 127.0.0.1:8080, proxies to 127.0.0.1:8000.
# Run:      varnishd -F -a 127.0.0.1:8080 -f $PWD/varnish.vcl -n $PWD/varnish -s malloc,256m
#           (the listen address is a command-line flag, not part of the VCL; -n: its own work folder)
# Validate: varnishd -C -f $PWD/varnish.vcl   (compiles the VCL, runs nothing)
# Anything this file does not handle falls through to the built-in VCL (https://varnish-cache.org/docs/7.1/users-guide/vcl-built-in-code.html):
# GET and HEAD are looked up in the cache, other methods are passed.

import std;
import directors;

# A client that leaves is noticed only when a write to it fails, and no VCL setting changes
# that: through a silence the server generates for nobody until it writes again. Its heartbeats
# bound that (measured with Varnish 7.1.1 and 7.7.0, `labs verify varnish.vcl --check disconnect`:
# the server heard of the departure 2.17 and 2.18 s late at the end of a 2 s silence; with a
# heartbeat every 1 s, at the second, 2.06 s after on both). Verify it with `--heartbeat` and the server's interval (10 s in the lab).
backend upstream {
    .host = "127.0.0.1";
    .port = "8000";
    # Time to open a connection to the server.
    .connect_timeout = 5s;
    # Time until the server's first byte (its headers): a longer prefill or queue is a 503.
    .first_byte_timeout = 300s;
    # The longest silence between two reads from the server: a longer pause cuts the stream
    # after a 200 ("FetchError ... read err" in varnishlog). Keep it above the server's
    # heartbeat interval.
    # https://varnish-cache.org/docs/7.1/reference/vcl.html#backend-definition
    .between_bytes_timeout = 300s;
}

# The MCP servers (Streamable HTTP, the route `/mcp` in vcl_recv): the same timeouts as the
# chat server's; their silences are the SDKs' 15 s pings on an idle GET stream.
backend mcp1 {
    .host = "127.0.0.1";
    .port = "8001";
    .connect_timeout = 5s;
    .first_byte_timeout = 300s;
    .between_bytes_timeout = 300s;
}
backend mcp2 {
    .host = "127.0.0.1";
    .port = "8002";
    .connect_timeout = 5s;
    .first_byte_timeout = 300s;
    .between_bytes_timeout = 300s;
}

# A stateful MCP server keeps each session in the process that answered its `initialize`, so
# every later request of the session must reach that replica (round-robin lost 4 of 4 sessions,
# docs/mcp.md). Varnish's directors cannot learn the Mcp-Session-Id from a response, and hashing
# the header loses sessions (initialize carries no id): the hash director keys on a cookie
# this VCL hands out instead (vcl_recv, vcl_deliver).
# https://varnish-cache.org/docs/7.1/reference/vmod_directors.html
sub vcl_init {
    new mcp = directors.hash();
    mcp.add_backend(mcp1, 1);
    mcp.add_backend(mcp2, 1);
}

sub vcl_recv {
    # An idle client connection between requests is closed after this (the first request's
    # headers are bounded by the runtime parameter timeout_idle, 5 s by default).
    # https://varnish-cache.org/docs/7.1/reference/vcl-var.html#sess-timeout-idle
    set sess.timeout_idle = 60s;
    # The longest a whole response may take to reach the client: a bound on a stream's length
    # (the runtime parameter's default is 600 s), so it must exceed the longest answer.
    # https://varnish-cache.org/docs/7.1/reference/vcl-var.html#sess-send-timeout
    set sess.send_timeout = 3600s;
    # The longest pause between two writes to the client (a client that stopped reading).
    # https://varnish-cache.org/docs/7.1/reference/vcl-var.html#sess-idle-send-timeout
    set sess.idle_send_timeout = 60s;
    # Prompts whose Content-Length is above this are answered 413 at once, before the server
    # sees a byte.
    if (std.integer(req.http.Content-Length, 0) > 8388608) {
        return (synth(413));
    }
    # Every other body is read whole, at most this many bytes, BEFORE the backend connection
    # is opened: a slow upload holds no backend connection while it trickles, and a chunked
    # prompt over the limit never reaches the server (measured: Varnish stops reading at the
    # limit and closes the connection without an answer, "Request body too big to cache" in
    # varnishlog; with a Content-Length the check above answers 413 first). Nothing in
    # Varnish 7.1 or 7.7 bounds a WHOLE body: a byte every second keeps an upload open for as long as
    # it lasts (measured: a pause of 6.5 s closes it, whatever sess.timeout_idle says: the
    # runtime parameter timeout_idle, 5 s, bounds each read), and Varnish has no per-client
    # connection limit: in front of untrusted clients, limit connections per client before
    # Varnish (a firewall, a load balancer). What a trickle holds meanwhile is a client
    # connection and a worker thread, never a backend connection.
    # https://varnish-cache.org/docs/7.1/reference/vmod_std.html#std-cache-req-body
    if (!std.cache_req_body(8388608B)) {
        return (synth(413));
    }
    # MCP over Streamable HTTP (its POSTs, the standalone GET stream, the DELETE; every header
    # passed both ways) to its own pool, never cached: each answer is one session's.
    if (req.url ~ "^/mcp(/|\?|$)") {
        # The replica is the hash of the client's `mcp_route` cookie; a client without
        # one gets a new key (this request's id), sent back as that cookie (vcl_deliver), so it
        # stays on the replica that answered its initialize (the Python SDK's client keeps
        # cookies; the TypeScript SDK's fetch keeps none, and is balanced anew on each request).
        if (req.http.Cookie ~ "(^|;\s*)mcp_route=") {
            set req.http.X-Mcp-Route = regsub(req.http.Cookie, "^(.*;\s*)?mcp_route=([^;]*).*$", "\2");
        } else {
            set req.http.X-Mcp-Route = "" + req.xid;
            set req.http.X-Mcp-Route-New = "1";
        }
        set req.backend_hint = mcp.backend(req.http.X-Mcp-Route);
        # An idle agent's GET stream lives as long as its session: the whole-response bound is
        # raised to the session's life (the SDK reopens a stream cut after it).
        # https://varnish-cache.org/docs/7.1/reference/vcl-var.html#sess-send-timeout
        set sess.send_timeout = 3600s;
        return (pass);
    }
    # Every API answer is for one client, and a stored response changes while it runs: never
    # look one up in the cache. Without this a client with no key (a local server needs none;
    # a request with an Authorization header is passed by the built-in VCL already) that polls
    # GET /v1/responses/{id} while the response streams gets the first answer, `in_progress`,
    # again after it completed (measured, Varnish 7.7: the server's JSON carries no
    # Cache-Control, so it is kept for default_ttl, 120 s;
    # tests/reliability/test_proxies_protocols.py).
    # https://varnish-cache.org/docs/7.1/users-guide/vcl-built-in-code.html
    if (req.url ~ "^/v1/") {
        return (pass);
    }
    # Event streams are answers for one user: never look them up in the cache. Without this a
    # GET stream the server did not mark uncacheable is stored (120 s by default) and replayed
    # whole to the next user, and a second user asking the same URL waits on the waiting list
    # for the first user's headers. POSTs are passed by the built-in VCL already.
    # https://varnish-cache.org/docs/7.1/users-guide/vcl-built-in-code.html
    if (req.http.Accept ~ "text/event-stream") {
        return (pass);
    }
}

sub vcl_backend_fetch {
    unset bereq.http.X-Mcp-Route;
    unset bereq.http.X-Mcp-Route-New;
}

sub vcl_deliver {
    if (req.http.X-Mcp-Route-New) {
        # Replaces a Set-Cookie of the server's (VCL sets one header line): MCP servers set none.
        set resp.http.Set-Cookie = "mcp_route=" + req.http.X-Mcp-Route + "; Path=/mcp; HttpOnly";
    }
}

sub vcl_backend_response {
    # on (the default): the body goes to the client while it is fetched. off: the whole answer
    # is stored before the first byte leaves (TTFT = E2E), even for a passed POST.
    # https://varnish-cache.org/docs/7.1/reference/vcl-var.html#beresp-do-stream
    set beresp.do_stream = true;
}

# No version in any answer: Varnish adds `Via: 1.1 varnish (Varnish/7.1)` to every response,
# its own synthetic ones too. (VCL joins subroutines of one name in order: these run first.)
# https://varnish-cache.org/docs/7.1/reference/vcl.html#vcl-deliver
sub vcl_deliver {
    unset resp.http.Via;
}

sub vcl_synth {
    unset resp.http.Via;
}

# Varnish's own errors answer in the JSON shape OpenAI SDKs parse, instead of its HTML "Guru
# Meditation" page. Errors the server sends pass through untouched.
# https://varnish-cache.org/docs/7.1/reference/vcl.html#vcl-synth
sub vcl_synth {
    if (resp.status == 413) {
        set resp.http.Content-Type = "application/json";
        synthetic("""{"error": {"message": "The request body is larger than the proxy accepts.", "type": "invalid_request_error", "param": null, "code": "request_too_large"}}""");
        return (deliver);
    }
}

# The server down, refusing, or silent past a timeout: Varnish answers 503 itself.
sub vcl_backend_error {
    set beresp.http.Content-Type = "application/json";
    synthetic("""{"error": {"message": "The model server is unavailable or overloaded behind the proxy.", "type": "server_error", "param": null, "code": "upstream_unavailable"}}""");
    return (deliver);
}
