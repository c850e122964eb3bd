"""express: Express 5 forwarding with `fetch` or http-proxy-middleware (`proxies/apps/node/express-app.mjs`)."""
