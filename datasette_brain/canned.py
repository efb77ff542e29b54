"""The recall canned query's errors: SQLite tells a brain_* function's error only
as "user-defined function raised exception", so a 400 of the query says instead
what brain_sql finds wrong with its parameters, on its page and in its JSON."""

import json
import re

from datasette.utils import tilde_decode
from datasette.utils.asgi import Request

from brain_sql import for_plugin

from . import links

# a brain's recall canned query: its page, and its JSON
RECALL_PATH = re.compile(r"^/(?P<database>[^/]+)/recall(?P<json>\.json)?$")


def explained(error, request):
    """What is wrong with the parameters of the recall query `request` asks for,
    or `error` (Datasette's) when nothing is."""
    return for_plugin.recall_params_error({name: request.args.get(name) for name in request.args}) or error


def recall_errors_named(datasette, app):
    """Datasette's `app`, but the JSON 400 of a brain's recall query names the
    parameter at fault. Datasette answers first, its permissions checked: only
    the error of an answer it gave is told again."""

    async def wrapped(scope, receive, send):
        found = RECALL_PATH.match(scope.get("path", "")) if scope["type"] == "http" else None
        if found is None or not found["json"]:
            return await app(scope, receive, send)
        request = Request(scope, receive)
        held = {}

        async def sending(message):
            # a brain's, as Datasette knows once it started (it starts on the first request)
            if (
                message["type"] == "http.response.start"
                and message["status"] == 400
                and links.is_brain(datasette, tilde_decode(found["database"]))
            ):
                held["start"], held["body"] = message, b""
                return
            if "start" not in held:
                return await send(message)
            held["body"] += message.get("body", b"")
            if message.get("more_body"):
                return
            body = _named(held["body"], request)
            headers = [(k, v) for k, v in held["start"].get("headers", []) if k.lower() != b"content-length"]
            await send({**held["start"], "headers": headers + [(b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})

        await app(scope, receive, sending)

    return wrapped


def _named(body, request):
    """A JSON error body with its error told by `explained`; any other as it is."""
    try:
        data = json.loads(body)
    except ValueError:
        return body
    if not isinstance(data, dict) or data.get("ok") is not False or not isinstance(data.get("error"), str):
        return body
    return json.dumps({**data, "error": explained(data["error"], request)}).encode()
