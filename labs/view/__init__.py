"""The browser view: a scenario's broken and fixed variants side by side, measured by the browser.

    python -m labs serve [--host 127.0.0.1] [--port 8765] [--runtime local|docker]

`app` serves the pages (plain HTML, CSS and JavaScript from `static/` and `templates/`, no build
step); `session` starts a scenario's server and proxies through the lab runner and keeps them up
while the page runs; the browser streams from each variant's real entry point itself
(`static/client.js`, each wire protocol's events read by `static/apis.js`, in the protocol the
page chose: the scenario's own by default). `specs` turns a variant's workload and client options into what that client
runs, and a browser's measurements back into the lab's StreamResult; `chromium` runs the same
client in Chromium under Playwright for the browser-layer scenarios (labs/catalogue/browser.py).
"""
