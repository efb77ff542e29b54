"""The Datasette plugin: thin hooks over brain_sql."""

from datasette import hookimpl

import brain_sql

from . import routes


@hookimpl
def prepare_connection(conn):
    brain_sql.prepare_connection(conn)


@hookimpl
def register_routes():
    return [
        (r"^/(?P<database>[^/]+)/-/recall$", routes.recall_view),
        (r"^/-/recall$", routes.recall_view),
        (r"^/(?P<database>[^/]+)/-/verify$", routes.verify_view),
        (r"^/(?P<database>[^/]+)/-/remember$", routes.remember_view),
        (r"^/-/brain/v1/embeddings$", routes.embeddings_view),
    ]


@hookimpl
def permission_allowed(datasette, actor, action, resource):
    if action == routes.WRITE_PERMISSION:
        return routes.write_allowed(datasette, actor, resource)


@hookimpl
def skip_csrf(scope):
    """JSON posts to the API need no CSRF token: a browser cannot send one
    cross-site without a CORS preflight, which Datasette does not grant."""
    return routes.is_json_api_request(scope)
