"""Stand-ins for the real server, for tests and tools that need one that misbehaves on purpose.

`labs.fakes.upstream.fake_upstream()` serves the shapes of `labs.fakes.shapes` (a healthy paced
stream, a buffering hop's lump, a truncation, a 504 page, gzip, an RST, a silence, ...).
"""
