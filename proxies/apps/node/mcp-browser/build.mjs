// Bundles ./index.js (the official MCP TypeScript SDK's client) for the browser with the webpack
// in this package, into ../.mcp-browser-build/mcp-client.js, a global `StreamlabMcp` a page loads
// with one <script>. Built output, not in git: `python -m proxies.apps.install mcp-browser`.
import path from "node:path";
import { fileURLToPath } from "node:url";
import webpack from "webpack";

const here = path.dirname(fileURLToPath(import.meta.url));
const output = process.env.STREAMLAB_MCP_BROWSER_BUILD ?? path.join(here, "..", ".mcp-browser-build");

const compiler = webpack({
  mode: "production", context: here, entry: "./index.js", target: "web",
  // Readable in the browser's stack traces; the lab never serves it beyond loopback.
  devtool: false, optimization: { minimize: false },
  output: { path: output, filename: "mcp-client.js", library: { name: "StreamlabMcp", type: "window" } },
  infrastructureLogging: { level: "warn" }, stats: "errors-warnings",
});
compiler.run((error, stats) => {
  if (error || stats.hasErrors()) {
    console.error(error ?? stats.toString("errors-only"));
    process.exit(1);
  }
  console.log(`${path.join(output, "mcp-client.js")}: ${stats.toJson({ assets: true }).assets[0].size} bytes`);
  compiler.close(() => {});
});
