"""``/docs``: Swagger UI for ``/openapi.json``, with the web UI's guard rails.

FastAPI's own page loads ``swagger-ui-dist@5`` — whatever 5.x the CDN has today — and runs it in
this server's origin, where a script may read every session and post to agents that run
``bash`` (a same-origin request passes the Origin check). So the version is pinned and each
file carries its Subresource Integrity hash: the browser runs exactly the reviewed bytes or
nothing. The page's own script comes from this server, and the page has a strict
Content-Security-Policy (no other script, no framing). ReDoc (``/redoc``) is not served.
"""

from __future__ import annotations

from fastapi import FastAPI
from starlette.responses import HTMLResponse, Response

SWAGGER_UI = "https://cdn.jsdelivr.net/npm/swagger-ui-dist@5.35.0"
"""The pinned release (npm ``swagger-ui-dist``); its files' hashes follow. Update all three together."""
SWAGGER_JS_SRI = "sha384-gjRm0bEPMeTmMh5jT2cHccIwCUZSTd8YC+j0d0sXw0MdGEfScduGpSyF3ZSSLkX9"
SWAGGER_CSS_SRI = "sha384-WlYgdmXYOOBWL5apwjDEZwN+U3HmXSSu5R6V5aGxEcf7z+KuRNwBhoxKVN1i3D5I"

DOCS_CSP = (
    f"default-src 'none'; script-src 'self' {SWAGGER_UI}/swagger-ui-bundle.js; "
    f"style-src {SWAGGER_UI}/swagger-ui.css 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
DOCS_HEADERS = {
    "content-security-policy": DOCS_CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-cache",
}

_PAGE = f"""<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Nexus broker API</title>
<link rel="stylesheet" href="{SWAGGER_UI}/swagger-ui.css" integrity="{SWAGGER_CSS_SRI}" crossorigin="anonymous">
</head>
<body>
<div id="swagger-ui"></div>
<script src="{SWAGGER_UI}/swagger-ui-bundle.js" integrity="{SWAGGER_JS_SRI}" crossorigin="anonymous"></script>
<script src="/docs/start.js"></script>
</body>
</html>
"""
_START = """window.ui = SwaggerUIBundle({
  url: "/openapi.json", dom_id: "#swagger-ui", deepLinking: true,
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
  layout: "BaseLayout", showExtensions: true, showCommonExtensions: true,
});
"""


def mount(app: FastAPI) -> None:
    """Serve ``/docs`` and its start script (create the app with ``docs_url=None, redoc_url=None``)."""

    @app.get("/docs", include_in_schema=False)
    def docs() -> HTMLResponse:
        return HTMLResponse(_PAGE, headers=DOCS_HEADERS)

    @app.get("/docs/start.js", include_in_schema=False)
    def start() -> Response:
        return Response(_START, media_type="text/javascript", headers=DOCS_HEADERS)
