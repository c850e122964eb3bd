# Two replicas behind Varnish, kept on one by a hash director keyed on the client (client.identity: its IP).
vcl 4.1;
import directors;

backend mcp1 { .host = "mcp-1"; .port = "8000"; }
backend mcp2 { .host = "mcp-2"; .port = "8000"; }

sub vcl_init {
    new mcp = directors.hash();
    mcp.add_backend(mcp1, 1.0);
    mcp.add_backend(mcp2, 1.0);
}

sub vcl_recv {
    if (req.url ~ "^/mcp") {
        set req.backend_hint = mcp.backend(client.identity);
        return (pass);  # sessions and event streams are never cached
    }
}
