"""A brain served from a copy Litestream follows (`sqlite-utils brain follow`).

It answers reads from its copy and never writes it. A write (remember, forget,
the decayed page's decisions, the MCP write tools) goes to the primary named by
the plugin setting `primary` — the same path, the caller's own credentials
(Authorization, cookies), the primary's answer as it gave it — or, without
`primary`, is refused with a 403 saying this is a read-only replica.
"""

import json

import httpx

import brain_sql
from brain_sql import for_plugin

from . import tools
from .tools import ApiError

FORWARDED_HEADER = "x-brain-forwarded"  # set on a forwarded write: the hops it has made
FORWARD_TIMEOUT_SECONDS = 60  # a write may wait the primary's busy timeout (30 s) for its write lock
# not passed on either way: they describe one connection, not the request
HOP_BY_HOP = frozenset(
    {
        "host",
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
        "content-encoding",
    }
)
WRITE_ACTIONS = frozenset({"insert-row", "delete-row", "update-row", "create-table", "alter-table", "drop-table"})


def is_replica(db):
    """Whether the Datasette database `db` is served from a copy Litestream follows."""
    return db is not None and bool(db.path) and for_plugin.is_copy(db.path)


def primary_of(datasette, database):
    """The primary's base URL this replica forwards writes to, or None."""
    config = datasette.plugin_config("datasette-brain", database=database) or {}
    primary = config.get("primary")
    return primary.rstrip("/") if isinstance(primary, str) and primary.strip() else None


def refusal(db):
    return ApiError(
        f"database {db.name} is a read-only replica (a copy Litestream follows): nothing can be written to it here; "
        "write to its primary, or give this server the plugin setting primary to forward writes there",
        403,
    )


def loop(db, primary):
    """A write forwarded here by another replica: this replica's `primary` (or a
    name that leads back to replicas) is no primary. Forwarding it again could go
    round for ever: it is answered at once, naming the misconfiguration."""
    return ApiError(
        f"a write was forwarded to database {db.name}, a read-only replica, as if it were the primary: a replica's "
        f"primary setting leads back to a replica (this one forwards to {primary}); nothing was written. Point the "
        "replicas' primary at the primary's own address",
        508,
        {"Retry-After": str(tools.RETRY_AFTER_SECONDS)},
    )


def _hops(value):
    """The hops a forwarded write has made (its FORWARDED_HEADER), 0 when none."""
    try:
        return max(0, int(value or 0))
    except ValueError:
        return 1  # a header of ours that cannot be read: forwarded all the same


def forwards(datasette, db):
    """Whether writes to `db` are forwarded (a replica with a primary)."""
    return is_replica(db) and primary_of(datasette, db.name) is not None


async def write_request(datasette, request, body):
    """The primary's answer to this write `request` (its body already read), when
    its database is a replica: a response to return as it is; None otherwise."""
    db = datasette.databases.get(tools.url_database(datasette, request))
    if not is_replica(db):
        return None
    primary = primary_of(datasette, db.name)
    if primary is None:
        raise refusal(db)
    hops = _hops(request.headers.get(FORWARDED_HEADER))
    if hops:
        raise loop(db, primary)
    route = request.path.partition("/-/")[2]  # the route under the database: decayed/act, remember...
    url = primary_url(datasette, primary, db, route) + (f"?{request.query_string}" if request.query_string else "")
    headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in request.scope.get("headers") or []]
    client = request.scope.get("client")
    if client:
        headers.append(("x-forwarded-for", str(client[0])))
    headers = [(k, v) for k, v in headers if k.lower() != FORWARDED_HEADER] + [(FORWARDED_HEADER, str(hops + 1))]
    status, answer_headers, content = await _send(primary, request.method, url, headers, body)
    return Forwarded(status, answer_headers, content)


def primary_url(datasette, primary, db, route):
    """The URL of `db`'s `route` (remember, decayed/act...) on its primary: the database's
    path as Datasette builds it (tilde-encoded: team.notes is team~2Enotes), less this
    server's base_url."""
    path = datasette.urls.database(db.name)
    base = datasette.setting("base_url")
    if base != "/" and path.startswith(base):
        path = "/" + path[len(base) :]
    return f"{primary}{path}/-/{route}"


async def write_tool(datasette, request, db, path, body):
    """An MCP write tool's call on a replica: POSTed as JSON to the primary's route
    `path` (under the database) with the MCP request's credentials; the primary's
    JSON on success, else an ApiError with its status and words."""
    primary = primary_of(datasette, db.name)
    if primary is None:
        raise refusal(db)
    scope = getattr(request, "scope", None) or {}
    sent = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or []}
    headers = [(name, sent[name]) for name in ("authorization", "cookie") if name in sent]
    headers += [("content-type", "application/json"), (FORWARDED_HEADER, "1")]
    url = primary_url(datasette, primary, db, path)
    status, answer_headers, content = await _send(primary, "POST", url, headers, json.dumps(body).encode())
    try:
        answer = tools.read_json(content, "the primary's answer")
    except ApiError:
        answer = None
    if 200 <= status < 300 and isinstance(answer, dict):
        return answer
    message = answer.get("error") if isinstance(answer, dict) else None
    retry = dict(answer_headers).get("retry-after")
    raise ApiError(message or f"the primary answered {status}", status, {"Retry-After": retry} if retry else None)


async def _send(primary, method, url, headers, body):
    """(status, headers, body) of the primary's answer; unreachable, a 503."""
    headers = [(k, v) for k, v in headers if k.lower() not in HOP_BY_HOP]
    try:
        async with httpx.AsyncClient(timeout=FORWARD_TIMEOUT_SECONDS, follow_redirects=False) as client:
            answer = await client.request(method, url, headers=headers, content=body)
    except httpx.HTTPError as ex:
        raise ApiError(
            f"this replica's primary ({primary}) could not be reached ({type(ex).__name__}: {ex}): nothing was "
            "written; try again",
            503,
            {"Retry-After": str(tools.RETRY_AFTER_SECONDS)},
        ) from None
    kept = [(k, v) for k, v in answer.headers.multi_items() if k.lower() not in HOP_BY_HOP]
    return answer.status_code, kept, answer.content


class Forwarded:
    """The primary's answer, sent on as it came: status, body and headers
    (Retry-After, Location, Set-Cookie among them)."""

    def __init__(self, status, headers, body):
        self.status, self.headers, self.body = status, headers, body

    async def asgi_send(self, send):
        headers = [[k.encode("latin-1"), v.encode("latin-1")] for k, v in self.headers]
        headers.append([b"content-length", str(len(self.body)).encode()])
        await send({"type": "http.response.start", "status": self.status, "headers": headers})
        await send({"type": "http.response.body", "body": self.body})


async def status(datasette, db):
    """What the replica `db` follows, the last change applied and its lag (or
    {"replica": false}), and where its writes go."""
    found = await db.execute_fn(lambda conn: brain_sql.replica_status(db.path, conn)) if db.path else None
    if found is None:
        return {"replica": False}
    found["primary"] = primary_of(datasette, db.name)
    # served immutable, this server never sees the follower's changes; without locks, it reads them half-written
    misread = "-i (immutable)" if not db.is_mutable else "--nolock" if datasette.nolock else None
    if misread:
        found.update(stalled=True, message=f"served with {misread}: serve the copy as a plain file for it to follow")
    return found
