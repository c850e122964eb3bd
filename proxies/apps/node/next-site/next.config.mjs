// The Next.js site the labs put between the client and the model server. Its variants are
// settings read when `next start` loads this file (never copied files):
//   STREAMLAB_UPSTREAM=http://H:P    the model server (or the next hop)
//   STREAMLAB_NEXT_COMPRESS=0|1      next.config `compress` (Next's default: on)
//   STREAMLAB_NEXT_ROUTE=rewrites|handler
const upstream = process.env.STREAMLAB_UPSTREAM ?? "http://127.0.0.1:8000";
const route = process.env.STREAMLAB_NEXT_ROUTE ?? "rewrites";

export default {
  compress: process.env.STREAMLAB_NEXT_COMPRESS !== "0",
  distDir: process.env.STREAMLAB_NEXT_DIST ?? ".next",
  async rewrites() {
    return route === "rewrites"
      ? { beforeFiles: [{ source: "/v1/:path*", destination: `${upstream}/v1/:path*` }] }
      : [];
  },
};
