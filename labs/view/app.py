"""The view's web app: pages (templates/), the browser's client and the panels (static/), and the
JSON endpoints the page calls to start a scenario and to get the lab client's report.

    GET  /                               every scenario, as a[data-scenario=NAME]
    GET  /scenario/NAME                  broken and fixed panels, button#run
    POST /api/scenarios/NAME/prepare     start the server and both proxies; each panel's spec
    POST /api/scenarios/NAME/report      the lab client's run of the same path, and the report
    GET  /api/status                     what the view is doing (starting nginx, measuring...)
    GET  /reports, /reports/NAME/        past reports (reports/NAME/report.md, timeline.png)
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from fastapi.templating import Jinja2Templates

from labs import catalogue
from labs.scenario.listing import hops_with_releases
from labs.view.pages import layers, past_reports, scenario_page_data, terminal_only
from labs.view.session import ViewError, ViewSession

HERE = Path(__file__).resolve().parent


def create_app(session: ViewSession) -> FastAPI:
    app = FastAPI(title="streamlab view", docs_url=None, redoc_url=None, openapi_url=None)
    templates = Jinja2Templates(directory=str(HERE / "templates"))
    # Each proxy on a path with the release the view runs (`nginx 1.30`), as `labs list` shows it.
    templates.env.globals["hops"] = hops_with_releases
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")
    session.reports.mkdir(parents=True, exist_ok=True)
    app.mount("/report-files", StaticFiles(directory=session.reports), name="report-files")

    @app.exception_handler(ViewError)
    async def view_error(request: Request, exc: ViewError) -> JSONResponse:
        return JSONResponse({"error": str(exc)}, status_code=400)

    @app.exception_handler(Exception)
    async def failure(request: Request, exc: Exception) -> JSONResponse:
        # A proxy that would not start, a config its binary rejected: the page shows the message.
        return JSONResponse({"error": f"{type(exc).__name__}: {exc}"}, status_code=500)

    @app.get("/", response_class=HTMLResponse)
    def index(request: Request) -> HTMLResponse:
        return templates.TemplateResponse(request, "index.html", {"layers": layers(),
                                                                  "terminal_only": terminal_only()})

    @app.get("/scenario/{name}", response_class=HTMLResponse)
    def scenario_page(request: Request, name: str) -> HTMLResponse:
        try:
            scenario = catalogue.get(name)
        except catalogue.UnknownScenario as exc:
            return templates.TemplateResponse(request, "missing.html", {"message": str(exc)},
                                              status_code=404)
        data = scenario_page_data(scenario)
        return templates.TemplateResponse(request, "scenario.html", {
            "s": scenario, "data": json.dumps(data), "page": data})

    @app.post("/api/scenarios/{name}/prepare")
    def prepare(name: str, controls: dict[str, Any]) -> dict[str, Any]:
        return session.prepare(name, controls)

    @app.post("/api/scenarios/{name}/report")
    def lab_report(name: str, browser: dict[str, Any]) -> dict[str, Any]:
        return session.lab_report(name, browser)

    @app.get("/api/status")
    def status() -> dict[str, str]:
        return {"status": session.status}

    @app.get("/reports", response_class=HTMLResponse)
    def reports(request: Request) -> HTMLResponse:
        return templates.TemplateResponse(request, "reports.html",
                                          {"reports": past_reports(session.reports)})

    @app.get("/reports/{name}/", response_class=HTMLResponse)
    def one_report(request: Request, name: str) -> HTMLResponse:
        found = {r["name"]: r for r in past_reports(session.reports)}
        if name not in found:
            return templates.TemplateResponse(request, "missing.html", {
                "message": f"no report for {name!r} in {session.reports}"}, status_code=404)
        return templates.TemplateResponse(request, "report.html", {"r": found[name]})

    return app
