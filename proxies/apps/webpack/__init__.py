"""webpack: webpack-dev-server 5 serving a bundle, /v1 proxied (`proxies/apps/node/dev-server.mjs`)."""
