"""One reply, from the engine's token ids to ASGI sends: the token loop, the SSE frames and their
writer, the JSON reply, and the extensions a reply may ask of its connection. Knows ASGI, not
the HTTP edge that admitted the request (server/http/)."""
