"""The `sqlite-utils brain` command group."""

import json
import sys
from pathlib import Path

import click
import sqlite_utils

import brain_sql


@sqlite_utils.hookimpl
def prepare_connection(conn):
    brain_sql.prepare_connection(conn)


def _open(db_path, must_exist=True, model_id=None, brain=True):
    """A connection to DB_PATH; with `brain`, it must already hold a brain."""
    if must_exist and not Path(db_path).exists():
        raise click.ClickException(f"{db_path} does not exist: create it with sqlite-utils brain init {db_path}")
    try:
        conn = brain_sql.connect(db_path, model_id)
    except brain_sql.BrainError as ex:
        raise click.ClickException(str(ex)) from ex
    if must_exist and brain and not brain_sql.is_brain(conn):
        raise click.ClickException(f"{db_path} is not a brain: create one with sqlite-utils brain init {db_path}")
    return conn


@sqlite_utils.hookimpl
def register_commands(cli):
    @cli.group()
    def brain():
        """A long-term memory in this SQLite file: ingest, recall, evaluate."""

    @brain.command()
    @click.argument("db_path", type=click.Path(dir_okay=False))
    @click.option("--model", help=f"model2vec folder or hub id (default: {brain_sql.configured_model()})")
    def init(db_path, model):
        """Create the brain schema in DB_PATH, or migrate it to the current version."""
        conn = _open(db_path, must_exist=False, model_id=model)
        try:
            brain_sql.migrate(conn, model or None)
        except brain_sql.BrainError as ex:
            raise click.ClickException(str(ex)) from ex
        info = brain_sql.info(conn)
        click.echo(f"{db_path}: brain ready, model {info['model']} ({info['dimension']} dimensions)")

    @brain.command()
    @click.argument("db_path", type=click.Path(dir_okay=False))
    @click.argument("paths", nargs=-1, required=True, type=click.Path())
    @click.option("--scope", help="scope path for memories that name none, e.g. /acme/support")
    @click.option("--class", "klass", type=click.Choice(brain_sql.CLASSES), help="class for memories that name none")
    @click.option("--source", help="source tag for memories that name none")
    @click.option("--domain", help="domain for memories that name none")
    @click.option("--prune", is_flag=True, help="remove memories whose files under PATHS no longer exist")
    def ingest(db_path, paths, scope, klass, source, domain, prune):
        """Ingest Markdown notes and folders, .txt files, and JSON / JSONL / CSV records."""
        conn = _open(db_path, must_exist=False)
        files, _ = brain_sql.discover(paths)
        total = sum(Path(p).stat().st_size for p, _ in files)
        with click.progressbar(length=total, label="Ingesting", file=sys.stderr) as bar:
            try:
                report = brain_sql.ingest(
                    conn, paths, scope=scope, klass=klass, source=source, domain=domain, prune=prune,
                    progress=bar.update,
                )  # fmt: skip
            except (brain_sql.BrainError, brain_sql.FieldError) as ex:
                raise click.ClickException(str(ex)) from ex
        for error in report.errors:
            click.echo(f"skipped {error}", err=True)
        click.echo(report.summary())
        if report.errors:
            sys.exit(1)

    def _filters(function):
        """The QueryDoc's filter options; their values reach the QueryDoc as text."""
        for option in reversed(
            [
                click.option("--scope", metavar="PATH", help="recall at this scope: it and its parents, never a sibling"),
                click.option("--class", "classes", multiple=True, metavar=f"[{'|'.join(brain_sql.CLASSES)}]",
                             help="only this class (repeatable)"),
                click.option("--source", "sources", multiple=True, help="only this source (repeatable)"),
                click.option("--domain", help="only this domain"),
                click.option("--since", metavar="TIME", help="observed at or after: ISO time or relative such as -30d"),
                click.option("--until", metavar="TIME", help="observed before: ISO time or relative such as -1w"),
                click.option("--now", metavar="TIME", help="fixed evaluation time (ISO): same inputs and now, same answer"),
                click.option("--min-relevance", metavar="[0-3]",
                             help="lowest relevance tier, 0 (archived) to 3 (pinned); default 1"),
                click.option("--include-decayed", is_flag=True, default=None, help="include expired and archived memories"),
            ]
        ):
            function = option(function)
        return function

    @brain.command()
    @click.argument("db_path", type=click.Path(dir_okay=False))
    @click.argument("query")
    @click.option("--k", "k", default="10", show_default=True, metavar="INTEGER", help="how many hits, 1 to 100")
    @click.option("--no-graph", "graph", flag_value="false", help="leave the graph leg out")
    @click.option("--no-prf", "prf", flag_value="false", help="never expand the query")
    @click.option("--mmr", is_flag=True, default=None, help="diversify the hits (MMR, lambda 0.7)")
    @click.option("--max-tokens", metavar="INTEGER", help="pack hits into this many tokens")
    @_filters
    @click.option("--json", "as_json", is_flag=True, help="print the JSON API's response")
    def recall(db_path, query, as_json, **options):
        """Recall the memories that answer QUERY, and why each was chosen."""
        try:
            doc = brain_sql.querydoc_from_strings({"q": query, **options}, comma_lists=False)
        except brain_sql.QueryError as ex:
            where = _option_of(ex.field)
            raise click.ClickException(f"Invalid value for {where}: {ex}" if where else str(ex)) from ex
        conn = _open(db_path)
        try:
            result = brain_sql.recall(conn, doc)
        except (brain_sql.BrainError, ValueError) as ex:
            raise click.ClickException(str(ex)) from ex
        if as_json:
            click.echo(json.dumps(result, indent=2))
        else:
            click.echo(_readable(result))

    @brain.command(name="eval")
    @click.argument("db_path", type=click.Path(dir_okay=False))
    @click.option("--queries", required=True, type=click.Path(exists=True, dir_okay=False), help="BEIR queries.jsonl")
    @click.option("--qrels", required=True, type=click.Path(exists=True, dir_okay=False), help="BEIR qrels .tsv")
    @click.option("--k", "k", type=click.IntRange(1, 100), default=10, show_default=True)
    @click.option("--now", help="fixed evaluation time (ISO)")
    def eval_(db_path, queries, qrels, k, now):
        """Score recall on a BEIR-format query set: one JSON object with nDCG@10,
        Recall@2/5/10 and MRR@10 for the full pipeline, without the graph, and per leg."""
        conn = _open(db_path)
        count = len(brain_sql.load_qrels(qrels))
        try:
            with click.progressbar(length=count, label="Evaluating", file=sys.stderr) as bar:
                result, extra = brain_sql.evaluate(conn, queries, qrels, k=k, now=now, progress=bar.update)
        except (brain_sql.BrainError, ValueError) as ex:
            raise click.ClickException(str(ex)) from ex
        click.echo(json.dumps(result))
        click.echo(f"{extra['abstained']} abstained; {extra['seconds']}s", err=True)

    @brain.command()
    @click.argument("db_path", type=click.Path(dir_okay=False))
    @click.option("--model", required=True, help="model2vec folder or hub id, or wordllama/l2_supercat")
    def reindex(db_path, model):
        """Re-embed every memory with another model, and make it the brain's model."""
        conn = _open(db_path)
        try:
            written = brain_sql.reindex(conn, model)
        except brain_sql.BrainError as ex:
            raise click.ClickException(str(ex)) from ex
        click.echo(f"{db_path}: {written} memories re-embedded with {model}")

    _register_check(brain)


def _option_of(field):
    """The recall option (or argument) a QueryDoc field comes from."""
    if field is None:
        return None
    names = {"q": "QUERY", "classes": "--class", "sources": "--source", "graph": "--no-graph", "prf": "--no-prf"}
    return f"'{names.get(field, '--' + field.replace('_', '-'))}'"


PROBLEMS = {
    "integrity": "the SQLite file fails its integrity check (restore a copy; not repairable here)",
    "pending_migrations": "schema migrations not applied yet",
    "missing_triggers": "triggers missing (a tool that rebuilds tables drops them): full text, vectors or the change log stop following",
    "altered_triggers": "triggers that differ from the brain's own",
    "fts_out_of_sync": "the full-text index disagrees with knowledge",
    "missing_vectors": "memories without a vector",
    "orphan_vectors": "vectors without a memory",
    "stale_vector_filters": "vectors whose filter columns disagree with their memory",
    "other_model_vectors": "memories embedded by another model than the brain's",
    "dangling_edges": "relationships whose entity or chunk is gone",
    "incomplete_documents": "documents whose chunks are not all there",
    "pending_mentions": "mention matching left unfinished",
}


def _register_check(brain):
    @brain.command()
    @click.argument("db_path", type=click.Path(dir_okay=False))
    @click.option("--repair", is_flag=True, help="mend what disagrees, from knowledge")
    def check(db_path, repair):
        """Check that FTS, vectors, edges and documents agree with the memories."""
        conn = _open(db_path, brain=False)
        problems = brain_sql.check(conn, repair=repair)
        for name, items in problems.items():
            shown = ", ".join(map(str, items[:10])) + (" …" if len(items) > 10 else "")
            click.echo(f"{PROBLEMS[name]}: {len(items)} ({shown})")
        if not problems:
            click.echo(f"{db_path}: consistent")
        elif repair and "integrity" not in problems and not brain_sql.check(conn):
            click.echo(f"repaired; {db_path} is now consistent")
        else:
            sys.exit(1)


def _readable(result):
    """The recall response as text for a terminal."""
    quality = result["quality"]
    if result["decision"] == "low_confidence":
        return (
            f"No memory fits this query well enough (confidence {quality['confidence']:.2f}, "
            f"recommendation: {quality['recommendation']})."
        )
    lines = []
    for rank, hit in enumerate(result["hits"], 1):
        provenance = hit.get("provenance", {})
        legs = ", ".join(
            f"{leg} #{provenance[f'{leg}_rank']}" for leg in ("vector", "fts", "graph") if provenance.get(f"{leg}_rank")
        )
        heading = f" › {hit['heading_path']}" if hit["heading_path"] and hit["heading_path"] != hit["title"] else ""
        where = hit["source_path"] or hit["document_id"] or ""
        if hit["line_start"]:
            where += f":{hit['line_start']}-{hit['line_end']}"
        lines.append(f"{rank}. {hit['title'] or '(untitled)'}{heading}  (score {hit['score']:.4f}; {legs})")
        lines.append(f"   {where} · {hit['class']} · {hit['scope']} · {hit['source']}")
        text = " ".join(hit["content"].split())
        lines.append(f"   {text[:200]}{'…' if len(text) > 200 else ''}")
    expansion = result["hits"][0].get("provenance", {}).get("expansion_terms") if result["hits"] else None
    lines.append(f"confidence {quality['confidence']:.2f}" + (f"; expanded with: {', '.join(expansion)}" if expansion else ""))
    return "\n".join(lines)
