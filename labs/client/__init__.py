"""The measuring client: what it sends, how it reads a stream, what it records.

http1 (the lean HTTP/1.1 client) and http2 speak to the URL over protocol; sse parses the events,
and apis says what each wire protocol (chat, responses, messages) sends and how its events read;
results holds what one stream recorded; libraries measures real client libraries the same way;
driver runs N streams at once for a load step (uvloop, no GC pauses); peaks and resources sample
what a process costs while it runs. `python -m labs.client URL` (cli).

The HTTP/1.1 client's calls are handed on here, the one thing most callers use:
`from labs import client; await client.measure_stream(url, body)`.
"""
from labs.client.http1 import Batch, Options, StreamResult, measure_many, measure_stream, run_many

__all__ = ["Batch", "Options", "StreamResult", "measure_many", "measure_stream", "run_many"]
