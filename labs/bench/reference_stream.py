"""The stream every reference server sends (labs/bench/references.py): the lab server's stream,
in shape. The role chunk leaves with the response head, then one OpenAI-shaped content chunk per
event stamped with the wall clock right before its write, then the finish chunk, `[DONE]` and the
body's end in one write: 5 writes for 3 events, as the lab's server makes them. So the measuring
client does the same work for each server: with 3 minimal events instead, it spent ~90 ms less
CPU on a burst of 1,000 of the bare server's streams, and their TTFT p99 was ~80 ms lower
(measured side by side), a share of the same two cores that the lab's server never had.

A reference answers a body `{"n": events, "interval": seconds}`."""
from __future__ import annotations

import time

HEAD = (b'data: {"id":"chatcmpl-bare","object":"chat.completion.chunk","created":0,'
        b'"model":"bare","system_fingerprint":"fp_bare","choices":[{"index":0,"delta":')
ROLE = HEAD + b'{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}\n\n'
FINISH = HEAD + b'{},"logprobs":null,"finish_reason":"length"}]}\n\n'
DONE = b"data: [DONE]\n\n"
CONTENT_TYPE = b"text/event-stream"

# The whole response head, for the servers that write their own HTTP (no library builds it).
RESPONSE_HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: " + CONTENT_TYPE
                 + b"\r\ntransfer-encoding: chunked\r\n\r\n")


def content(index: int) -> bytes:
    """Event `index`'s content chunk, stamped now (as the lab's `lab.stamp` does)."""
    return HEAD + (b'{"content":"t%d "},"logprobs":null,"finish_reason":null}],'
                   b'"sent_at":%.6f}\n\n' % (index, time.time()))


def chunk(frame: bytes) -> bytes:
    """One frame in HTTP/1.1 chunked framing."""
    return b"%x\r\n%b\r\n" % (len(frame), frame)


# The last write of a stream: finish, [DONE] and the body's end (the zero-length chunk).
TAIL = chunk(FINISH) + chunk(DONE) + b"0\r\n\r\n"
