"""The web UI at ``/``: plain HTML, CSS and JS from ``static/`` (no build step), served by the API's app.

The page and its assets hold no data and need no token (a browser cannot send one for a page
load); every call the page makes goes to ``/v1/...`` with the bearer token the user typed, which
the page keeps in ``sessionStorage``. A strict Content-Security-Policy allows only this origin's
scripts, styles and API.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles
from starlette.responses import Response

STATIC = Path(__file__).resolve().parent / "static"

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
UI_HEADERS = {
    "content-security-policy": CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-cache",
}


class UiFiles(StaticFiles):
    """The page's files with the page's headers: ``/ui/index.html`` is the same page as ``/``."""

    def file_response(self, *args: Any, **kwargs: Any) -> Response:
        response = super().file_response(*args, **kwargs)
        response.headers.update(UI_HEADERS)
        return response


def mount(app: FastAPI) -> None:
    """Serve ``/`` (the page; ``GET`` and ``HEAD``) and ``/ui/*`` (its scripts and styles), all with ``UI_HEADERS``."""

    @app.api_route("/", methods=["GET", "HEAD"], include_in_schema=False)
    def index() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html", headers=UI_HEADERS)

    app.mount("/ui", UiFiles(directory=STATIC), name="ui")
