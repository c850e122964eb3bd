"""nextjs: a Next.js 16 site (`proxies/apps/node/next-site`), built once by `make setup`."""
