// A front end in development as webpack projects run it: webpack-dev-server serves the bundle and
// proxies the API (`devServer.proxy`) to the model server, with its defaults otherwise. The
// bundle stays in memory (webpack-dev-middleware); nothing is written to the checkout.
//
//   STREAMLAB_LISTEN=127.0.0.1:PORT     where it listens
//   STREAMLAB_UPSTREAM=http://H:P       where /v1 is proxied
//   STREAMLAB_COMPRESS=1|0              devServer.compress (webpack-dev-server's default: true,
//                                       the `compression` middleware in front of everything)
import path from "node:path";
import { fileURLToPath } from "node:url";
import webpack from "webpack";
import WebpackDevServer from "webpack-dev-server";

const here = path.dirname(fileURLToPath(import.meta.url));
const [host, port] = (process.env.STREAMLAB_LISTEN ?? "127.0.0.1:3000").split(":");
const upstream = process.env.STREAMLAB_UPSTREAM ?? "http://127.0.0.1:8000";
const compress = (process.env.STREAMLAB_COMPRESS ?? "1") !== "0";

const compiler = webpack({
  mode: "development", context: here, entry: "./dev-site/index.js",
  infrastructureLogging: { level: "warn" }, stats: "errors-warnings",
});
const server = new WebpackDevServer({
  host, port: Number(port), compress,
  proxy: [{ context: ["/v1"], target: upstream }],
  // No browser in the labs: no live-reload client, no WebSocket server, no static folder.
  hot: false, liveReload: false, client: false, webSocketServer: false, static: false,
}, compiler);

const stop = async () => { await server.stop(); process.exit(0); };
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
await server.start();
console.log(`webpack-dev-server listening on ${host}:${port}, /v1 -> ${upstream} (compress ${compress})`);
