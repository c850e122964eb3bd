"""privoxy: Privoxy as a user network's forward proxy (HTTP_PROXY), with Debian's action and filter files."""
