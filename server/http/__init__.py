"""The HTTP edge: the app and its routes, the completion lane below the framework, uvicorn's
connections with their limits, the middleware, the lab's access rules, the request schema and the
records. It admits a request and hands it to a reply of server/stream/; nothing below imports it."""
