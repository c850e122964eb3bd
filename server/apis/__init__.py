"""The wire protocols the server speaks (`chat`, `responses`, `messages`): one module each, one table.

A protocol is what a client sends and what the stream's events look like; the engine, the knobs,
the limits, the metrics and the request records are the same under every one of them.
"""
