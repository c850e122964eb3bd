// A backend-for-frontend as Node apps are commonly written: Express 5 forwards every request to
// the model server with `fetch` and writes the upstream's body chunks to the client as they come.
// Its variants are settings (environment variables), read once at start:
//
//   STREAMLAB_LISTEN=127.0.0.1:PORT     where it listens
//   STREAMLAB_UPSTREAM=http://H:P       where it forwards
//   STREAMLAB_COMPRESSION=default       app.use(compression()): gzip for every compressible type,
//                                       text/event-stream included (compressible() says so)
//                        skip-sse       compression() with a filter that leaves text/event-stream out
//                        flush          compression(), and res.flush() after every upstream chunk
//                        off            no compression middleware
//   STREAMLAB_ABORT_ON_CLOSE=0|1        1: res.on('close') aborts the upstream fetch (its signal)
//   STREAMLAB_FORWARD=fetch             the handler below: `fetch`, then a loop of res.write
//                     proxy-middleware  http-proxy-middleware's createProxyMiddleware, its defaults
//                     response-hook     the same with selfHandleResponse and a responseInterceptor
//                                       (its recipe for rewriting or accounting a response body)
//                     hook-skip-sse     the same hook for every response but text/event-stream,
//                                       which is piped to the client as it comes
import compression from "compression";
import express from "express";
import { createProxyMiddleware, responseInterceptor } from "http-proxy-middleware";

const [host, port] = (process.env.STREAMLAB_LISTEN ?? "127.0.0.1:3000").split(":");
const upstream = process.env.STREAMLAB_UPSTREAM ?? "http://127.0.0.1:8000";
const mode = process.env.STREAMLAB_COMPRESSION ?? "default";
const abortOnClose = process.env.STREAMLAB_ABORT_ON_CLOSE === "1";
const forward = process.env.STREAMLAB_FORWARD ?? "fetch";
const MODES = ["default", "skip-sse", "flush", "off"];
const FORWARDS = ["fetch", "proxy-middleware", "response-hook", "hook-skip-sse"];
if (!MODES.includes(mode)) {
  console.error(`STREAMLAB_COMPRESSION=${mode}: use one of ${MODES.join(", ")}`);
  process.exit(2);
}
if (!FORWARDS.includes(forward)) {
  console.error(`STREAMLAB_FORWARD=${forward}: use one of ${FORWARDS.join(", ")}`);
  process.exit(2);
}

// What a response hook is usually for: read the body (here, count the content deltas for a usage
// log) and hand it on unchanged. responseInterceptor calls it once, with the whole body.
const countDeltas = async (body, proxyRes, req) => {
  const deltas = body.toString("utf8").split("\n").filter((line) => line.includes('"content"')).length;
  console.log(`response hook: ${req.method} ${req.originalUrl} ${proxyRes.statusCode}, ${body.length} bytes, ${deltas} deltas`);
  return body;
};
const intercept = responseInterceptor(countDeltas);
const isEventStream = (proxyRes) => String(proxyRes.headers["content-type"] ?? "").startsWith("text/event-stream");

function proxyMiddleware() {
  const options = { target: upstream, changeOrigin: true };
  if (forward === "response-hook") {
    return createProxyMiddleware({ ...options, selfHandleResponse: true, on: { proxyRes: intercept } });
  }
  if (forward === "hook-skip-sse") {
    return createProxyMiddleware({ ...options, selfHandleResponse: true, on: {
      proxyRes: (proxyRes, req, res) => {
        if (!isEventStream(proxyRes)) return intercept(proxyRes, req, res);
        // selfHandleResponse leaves the status, the headers and the body to this handler.
        res.writeHead(proxyRes.statusCode, proxyRes.statusMessage, proxyRes.headers);
        proxyRes.pipe(res);
      },
    } });
  }
  return createProxyMiddleware(options);
}

const app = express();
if (mode === "default" || mode === "flush") {
  app.use(compression());
} else if (mode === "skip-sse") {
  app.use(compression({
    filter: (req, res) => !String(res.getHeader("Content-Type") ?? "").startsWith("text/event-stream")
      && compression.filter(req, res),
  }));
}
if (forward !== "fetch") {
  // Mounted before any body parser: the proxy forwards the request body as it arrives.
  app.use(proxyMiddleware());
}
app.use(express.raw({ type: () => true, limit: "8mb" }));

// Hop-by-hop and framing headers stay with their own connection.
const DROPPED = new Set(["connection", "keep-alive", "transfer-encoding", "content-length", "host"]);

app.use(async (req, res) => {
  const controller = new AbortController();
  let upstreamChunks = 0;
  if (abortOnClose) {
    // 'close' fires when the response ends or the client goes; aborting a finished fetch is a no-op.
    res.on("close", () => controller.abort());
  }
  const headers = Object.fromEntries(Object.entries(req.headers).filter(([k]) => !DROPPED.has(k)));
  try {
    const answer = await fetch(upstream + req.originalUrl, {
      method: req.method, headers,
      body: ["GET", "HEAD"].includes(req.method) ? undefined : req.body,
      signal: controller.signal,
    });
    res.status(answer.status);
    answer.headers.forEach((value, key) => {
      if (!DROPPED.has(key) && key !== "content-encoding") res.setHeader(key, value);
    });
    for await (const chunk of answer.body ?? []) {
      upstreamChunks += 1;
      // Without the abort, a write after the client left returns false and the loop reads on:
      // the upstream keeps generating for nobody until its answer ends.
      res.write(chunk);
      if (mode === "flush") res.flush();
    }
    res.end();
  } catch (error) {
    if (controller.signal.aborted) {
      console.log(`client left; upstream fetch aborted after ${upstreamChunks} chunks`);
    } else if (!res.headersSent) {
      res.status(502).json({ error: { message: `upstream: ${error.message}`, type: "bad_gateway" } });
    } else {
      res.destroy(error);
    }
  }
});

app.listen(Number(port), host, () => {
  console.log(`express listening on ${host}:${port} -> ${upstream} (forward ${forward}, compression ${mode}, abort on close ${abortOnClose})`);
});
