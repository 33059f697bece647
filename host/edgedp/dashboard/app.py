"""The dashboard's web app (Starlette, served by uvicorn): GET only, every answer read from the
registry at request time through its read API (edgedp.fleet.status; nothing here writes).

Routes: ``/`` the page, ``/static/plotly.min.js`` (the ``plotly`` package's bundled copy: no CDN),
``/static/dashboard.js``, and the JSON the page draws: ``/api/devices`` (the rows of ``fleet status
--json``), ``/api/daily`` (ε per day, per device id), ``/api/audit`` (every device's audit
entries, each with its ``device``), ``/api/runs`` (DP-SGD runs with ε per epoch).

The Host header must name the bound address, ``localhost`` or ``127.0.0.1`` (Starlette's
TrustedHostMiddleware; 400 otherwise): a page on another site that rebinds its own name to
127.0.0.1 cannot read the registry through the browser (DNS rebinding)."""
from __future__ import annotations

from collections.abc import Callable
from functools import cache
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from ..fleet import status
from ..fleet.registry import Registry
from .page import HTML, SCRIPT
from .views import audit, daily

LOOPBACK_NAMES = ("localhost", "127.0.0.1")
WILDCARDS = ("0.0.0.0", "::", "")


@cache
def plotly_js() -> str:
    """plotly.js as the installed plotly package bundles it."""
    from plotly.offline import get_plotlyjs
    return str(get_plotlyjs())


def allowed_hosts(host: str) -> list[str]:
    """The Host names the app answers: the bound address and the loopback names. ValueError for a
    wildcard address, whose clients' Host names the app cannot know."""
    if host in WILDCARDS:
        raise ValueError(f"--host {host or '(empty)'}: bind one address (the Host check needs the name clients use)")
    return sorted({host, *LOOPBACK_NAMES})


def create_app(reg: Registry, host: str = "127.0.0.1") -> Starlette:
    """The app over an open registry, answering only requests whose Host is allowed_hosts(host)."""
    def api(view: Callable[[Registry], Any]) -> Callable[[Request], Response]:
        def endpoint(request: Request) -> Response:
            return JSONResponse(view(reg), headers={"Cache-Control": "no-store"})
        return endpoint

    def page(request: Request) -> Response:
        return HTMLResponse(HTML)

    def script(request: Request) -> Response:
        return Response(SCRIPT, media_type="text/javascript")

    def plotly(request: Request) -> Response:
        return Response(plotly_js(), media_type="text/javascript", headers={"Cache-Control": "max-age=86400"})

    routes = [Route("/", page), Route("/static/dashboard.js", script), Route("/static/plotly.min.js", plotly),
              Route("/api/devices", api(status.status_rows)), Route("/api/daily", api(daily)),
              Route("/api/audit", api(audit)), Route("/api/runs", api(status.training_runs))]
    return Starlette(routes=routes,
                     middleware=[Middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts(host))])


def serve(reg: Registry, host: str, port: int) -> None:
    """Serve the app on host:port until interrupted."""
    import uvicorn
    uvicorn.run(create_app(reg, host), host=host, port=port, log_level="warning")
