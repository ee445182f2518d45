"""FairJudge's interfaces: the web app (``create_app``), the JSON API, the dashboard, the
jobs, the CLI, and the use cases they share (``usecases``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the CLI imports this package and must not pay for importing Flask
    from flask_openapi3 import OpenAPI


def create_app(test_config: dict[str, Any] | None = None) -> OpenAPI:
    """Build the app; ``test_config`` may carry SETTINGS (a judge.config.Settings).

    The database must be at the newest schema revision: the app refuses to start otherwise
    and names the command that upgrades it (``fairjudge db upgrade``)."""
    from judge.config import load_settings
    from server import api, dashboard, db, errors

    app = _openapi_app()
    app.config.from_mapping(test_config or {})
    if "SETTINGS" not in app.config:
        app.config["SETTINGS"] = load_settings()
    settings = app.config["SETTINGS"]
    # Flask's defaults hold these keys as None, so setdefault would not set them.
    if app.config.get("MAX_CONTENT_LENGTH") is None:
        app.config["MAX_CONTENT_LENGTH"] = int(settings.server.max_body_mb * 2**20)
    if not app.config.get("SECRET_KEY"):
        from server.usecases.store import secret_key

        app.config["SECRET_KEY"] = secret_key(settings.state_dir)
    # The dashboard's cookie is not sent with requests that other sites start (Lax).
    if app.config.get("SESSION_COOKIE_SAMESITE") is None:
        app.config["SESSION_COOKIE_SAMESITE"] = "Lax"
    db.init_app(app)
    api.register(app)
    app.register_blueprint(dashboard.bp)
    errors.register_errors(app)
    app.add_url_rule("/api/v1/openapi.json", "openapi_document", lambda: _document(app))
    return app


def _openapi_app() -> OpenAPI:
    from flask_openapi3 import Info, OpenAPI

    from server import errors

    return OpenAPI(
        __name__,
        info=Info(title="FairJudge API", version="1"),
        security_schemes={"bearer": {"type": "http", "scheme": "bearer"}},
        doc_prefix="/api/v1/docs",
        doc_url="/openapi.json",
        validation_error_status=422,
        validation_error_callback=errors.validation_error,
    )


def openapi_document() -> dict[str, Any]:
    """The API's OpenAPI 3 document, built from the views' schemas without a database (for
    docs/api.md; the server serves the same document at /api/v1/openapi.json)."""
    from server import api

    app = _openapi_app()
    api.register(app)
    return _document(app)


def _document(app: OpenAPI) -> dict[str, Any]:
    """flask-openapi3's document with what it cannot say itself: operations whose body may
    be left out (``server.api.OPTIONAL_BODIES``) do not mark it required, the links
    between operations (``server.api.LINKS``) and the headers of answers from kept figures
    (``server.api.KEPT_HEADERS``)."""
    import copy

    from server.api import KEPT, KEPT_HEADERS, LINKS, OPTIONAL_BODIES

    doc = copy.deepcopy(app.api_doc)
    for method, path in OPTIONAL_BODIES:
        body = doc["paths"][path][method].get("requestBody")
        if body is not None:
            body["required"] = False
    for (method, path, status), targets in LINKS.items():
        links = doc["paths"]["/api/v1" + path][method]["responses"][status].setdefault("links", {})
        for to_method, to_path, parameters in targets:
            target = doc["paths"]["/api/v1" + to_path][to_method]["operationId"]
            links[target] = {"operationId": target, "parameters": parameters}
    for path in KEPT:
        for status, headers in KEPT_HEADERS.items():
            doc["paths"]["/api/v1" + path]["get"]["responses"][status]["headers"] = headers
    return doc
