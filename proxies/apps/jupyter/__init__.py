"""jupyter: Jupyter Server with jupyter-server-proxy, the upstream reached as /proxy/PORT/..."""
