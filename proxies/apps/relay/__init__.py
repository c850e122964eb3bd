"""relay: a TCP relay that re-splits the byte stream or downgrades the request line (`tcp_relay.py`)."""
