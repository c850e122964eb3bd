"""verify's reading of a user's Envoy config: parse it (config), read the settings in effect on the
chat route (read), rewrite its upstreams and listeners to loopback (rewrite)."""
