"""Recall through Datasette's own ASGI app, in this process: what a server adds to
brain_sql.recall (routing, the plugin's permission checks, the read slot and its
thread, JSON), without sockets. bench/gate.py runs it for each tree.

    python3 bench/asgi_recall.py --brain BRAIN [--queries 200] [--query-file queries.jsonl] [--another-plugin]

Prints the p50 of POST /<db>/-/recall over the queries, after 20 to warm. With
--another-plugin a plugin answering permission_allowed (with no opinion) is
registered: the plugin then asks of every table recall reads, not only of those
Datasette's metadata names.
"""

import argparse
import asyncio
import json
import logging
import statistics
import time
from pathlib import Path

from datasette import hookimpl
from datasette.app import Datasette
from datasette.plugins import pm

ROOT = Path(__file__).resolve().parent.parent


class NoOpinion:
    """Another plugin's permission rules, which say nothing."""

    __name__ = "no-opinion"  # Datasette lists plugins by it

    @hookimpl
    def permission_allowed(self, actor, action, resource):
        return None


async def p50(brain, queries):
    datasette = Datasette([str(brain)])
    await datasette.invoke_startup()
    path = f"{datasette.urls.database(next(iter(datasette.databases.keys() - {'_internal'})))}/-/recall"
    for q in queries[:20]:  # the read state and the model, once
        await datasette.client.post(path, json={"q": q})
    timings = []
    for q in queries:
        started = time.perf_counter()
        response = await datasette.client.post(path, json={"q": q, "k": 10})
        timings.append((time.perf_counter() - started) * 1000)
        if response.status_code != 200:
            raise SystemExit(f"{path} answered {response.status_code}: {response.text[:300]}")
    return statistics.median(timings)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--brain", required=True)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--query-file", default=str(ROOT.parent / "shared/data/scifact/queries.jsonl"))
    parser.add_argument("--another-plugin", action="store_true", help="register a plugin with permission rules")
    args = parser.parse_args()
    logging.getLogger("httpx").setLevel(logging.WARNING)  # a line a request, inside the timings, otherwise
    if args.another_plugin:
        pm.register(NoOpinion(), name="no-opinion")
    with open(args.query_file, encoding="utf-8") as lines:
        queries = [json.loads(line)["text"] for line in lines][: args.queries]
    print(f"asgi recall: p50 {asyncio.run(p50(args.brain, queries)):.2f} ms")


if __name__ == "__main__":
    main()
