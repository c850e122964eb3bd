"""verify's reading of Traefik configs: the static file and its file provider's dynamic files."""
