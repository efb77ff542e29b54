"""How long each page people browse takes on a brain, through Datasette's real app.

    python3 bench/pages.py --brain /tmp/brain-50k.db [--runs 3] [--immutable]

Serves the brain in-process (`datasette.client`, Datasette's default settings: the
SQL and facet time limits included), waits for the plugin's background warm-up,
then requests each page once (first: SQLite's caches empty) and `--runs` more
times (the median). Prints a line per page with both times, its status and what
Datasette gave up on (a count or facet past its time limit), then one JSON line
{page: median seconds}. A mutable brain is migrated by the server's warm-up, as
`datasette serve` would; `--immutable` serves it as `datasette -i` (never written).
"""

import argparse
import asyncio
import json
import logging
import re
import statistics
import threading
import time
import urllib.parse
from pathlib import Path

from datasette import hookimpl
from datasette.app import Datasette
from datasette.plugins import pm

ROOT = Path(__file__).resolve().parent.parent
QUERY = "What does ALK2 do in endothelial cells?"
METADATA_FACETS = "_facet=class&_facet=scope&_facet=source&_facet=domain&_facet_decay=expires_at&_sort_desc=observed_at"
CONNECTIONS = []  # Datasette's connections, to interrupt a page given up on


class Interruptible:
    @staticmethod
    @hookimpl
    def prepare_connection(conn):
        CONNECTIONS.append(conn)


def pages(name, memory_id, entity_id, query):
    """{label: (method, path, JSON body or None)}: the pages, in the order they are requested."""
    base, q = f"/{name}", urllib.parse.quote(query)
    get = {
        "database": base,
        "knowledge": f"{base}/knowledge",
        "knowledge?_facet=scope": f"{base}/knowledge?_facet=scope",
        "knowledge?_facet_decay": f"{base}/knowledge?_facet_decay=expires_at",
        "knowledge metadata.yml facets": f"{base}/knowledge?{METADATA_FACETS}",
        "knowledge?_decay=expired": f"{base}/knowledge?_decay=expired",
        "knowledge?_decay=live": f"{base}/knowledge?_decay=live&_facet=scope",
        "entities table": f"{base}/entities",
        "vec_knowledge table": f"{base}/vec_knowledge",
        "decayed": f"{base}/-/decayed",
        "decayed.json": f"{base}/-/decayed.json",
        "entities": f"{base}/-/entities",
        "entities.json": f"{base}/-/entities.json",
        "entities?q=": f"{base}/-/entities?q=cell",
        "entity": f"{base}/-/entity/{entity_id}",
        "memory": f"{base}/-/memory/{memory_id}",
        "memory.json": f"{base}/-/memory/{memory_id}.json",
        "brain (no query)": f"{base}/-/brain",
        "brain?q=": f"{base}/-/brain?q={q}",
    }
    found = {label: ("GET", path, None) for label, path in get.items()}
    found["recall API (for the page's share)"] = ("POST", f"{base}/-/recall", {"q": query})
    return found


async def notes(client, path, html):
    """What Datasette gave up on for a table page: facets past their time limit, its count."""
    said = [f"timed out: {found}" for found in re.findall(r"These facets timed out: ([^<]*)<", html)]
    parts = urllib.parse.urlsplit(path)
    response = await client.get(f"{parts.path}.json?{parts.query}")
    if response.status_code == 200 and response.json().get("filtered_table_rows_count") is None:
        said.append("no count")
    return "; ".join(said)


async def measure(datasette, method, path, body):
    started = time.perf_counter()
    if method == "POST":
        response = await datasette.client.post(path, json=body)
    else:
        response = await datasette.client.get(path)
    return time.perf_counter() - started, response


async def run(args):
    pm.register(Interruptible, name="bench-interruptible")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # not a line per request
    path = Path(args.brain)
    datasette = Datasette([] if args.immutable else [str(path)], immutables=[str(path)] if args.immutable else [])
    name = path.stem
    started = time.perf_counter()
    await datasette.invoke_startup()
    for thread in threading.enumerate():
        if thread.name.startswith("brain-warm"):
            thread.join()
    print(f"startup and warm-up: {time.perf_counter() - started:.1f} s")
    db = datasette.get_database(name)
    memory_id = (await db.execute("select max(id) / 2 from knowledge")).first()[0]
    entity_id = (await db.execute("select max(id) / 2 from entities")).first()[0]
    memory_id = (await db.execute("select min(id) from knowledge where id >= ? and flagged = 0", [memory_id])).first()[
        0
    ]
    entity_id = (await db.execute("select min(id) from entities where id >= ?", [entity_id])).first()[0]
    times = {}
    print(f"{'page':<36} {'first s':>8} {'median s':>8}  status")
    for label, (method, url, body) in pages(name, memory_id, entity_id, args.query).items():
        request = asyncio.ensure_future(measure(datasette, method, url, body))
        done, _ = await asyncio.wait({request}, timeout=args.timeout)
        if not done:
            while not request.done():  # stop its queries in Datasette's threads, one statement after another
                for conn in CONNECTIONS:
                    conn.interrupt()
                await asyncio.sleep(0.05)
            print(f"{label:<36} {'>' + str(args.timeout):>8} {'':>8}  gave up", flush=True)
            times[label] = None
            continue
        first, response = request.result()
        runs = [(await measure(datasette, method, url, body))[0] for _ in range(args.runs)]
        median = statistics.median(runs)
        table = "/-/" not in url and "/" in url.strip("/")
        said = await notes(datasette.client, url, response.text) if table else ""
        print(
            f"{label:<36} {first:8.3f} {median:8.3f}  {response.status_code}{'  ' + said if said else ''}", flush=True
        )
        times[label] = round(median, 4)
    print(json.dumps(times), flush=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--brain", required=True)
    parser.add_argument("--runs", type=int, default=3, help="timed requests per page after the first (their median)")
    parser.add_argument("--query", default=QUERY, help="what the recall page is asked")
    parser.add_argument("--timeout", type=float, default=60, help="seconds before giving up on a page")
    parser.add_argument("--immutable", action="store_true", help="serve the brain as datasette -i: never written")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
