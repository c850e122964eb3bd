# Two replicas of a stateful MCP server behind a Varnish round_robin director: no affinity.
vcl 4.1;
import directors;

backend mcp1 { .host = "mcp-1"; .port = "8000"; }
backend mcp2 { .host = "mcp-2"; .port = "8000"; }

sub vcl_init {
    new mcp = directors.round_robin();
    mcp.add_backend(mcp1);
    mcp.add_backend(mcp2);
}

sub vcl_recv {
    if (req.url ~ "^/mcp") {
        set req.backend_hint = mcp.backend();
        return (pass);  # sessions and event streams are never cached
    }
}
