"""The `sqlite-utils brain` command group. sqlite-utils imports it for every command
it runs: it imports brain_sql's constants alone (the engines load when a command
calls one), and `brain mcp` alone loads Datasette and the MCP SDK."""

import asyncio
import contextlib
import io
import json
import os
import re
import signal
import sys
import threading
import time
from pathlib import Path

import click
import sqlite_utils

import brain_sql
from brain_sql import for_plugin
from brain_sql.for_plugin import counted

MODEL_HELP = (
    f"{brain_sql.DEFAULT_MODEL} (the default), {brain_sql.MINILM_MODEL} (stronger, slower; needs "
    "the minilm extra), or a model2vec folder or hub id"
)


# sysexits' EX_TEMPFAIL: a script may run the same command again, as an HTTP client does after a 503
TRY_AGAIN_EXIT = 75


class TryAgain(click.ClickException):
    """A write the brain could not take now (another writer held the write lock, the
    disk failed): what it says was not stored, and the same command may be run again."""

    exit_code = TRY_AGAIN_EXIT

    def format_message(self):
        if "disk is full" in self.message:  # SQLite's word for a full disk and a file-size limit alike
            return f"{self.message}\nFree space on the brain's disk (or raise the file-size limit), then run it again."
        if "disk I/O error" in self.message:  # a write past a file-size limit (ulimit -f), or a failing disk
            return (
                f"{self.message}\nThe disk could not be written: check its space, the file-size limit (ulimit -f) "
                "and its health, then run it again."
            )
        return f"{self.message}\nTry the same command again shortly."


class BadInput(click.ClickException):
    """What the caller gave cannot be read or stored (a record that is no JSON, a
    field a route refuses with a 400): said, and nothing is done."""

    exit_code = 2  # click's, for a usage error


class WholeNumber(click.ParamType):
    """A whole number in ASCII digits, as the HTTP API takes it (click's int would
    take '\uff15', a full-width 5, '1_000' or ' 5'), from `low` to `high` when
    given; without them, what takes it checks the range and names it."""

    name = "integer"

    def __init__(self, low: int | None = None, high: int | None = None) -> None:
        self.low, self.high = low, high

    def convert(self, value, param, ctx):
        name = param.opts[0].lstrip("-") if param and param.opts else "value"
        number = for_plugin.read_digits(value) if isinstance(value, str) else None
        value = value if number is None else number
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(f"{name} must be a whole number in the digits 0-9, not {for_plugin.shown(value)}", param, ctx)
        if self.low is None or self.high is None:
            return value
        try:
            return for_plugin.whole_number(value, name, self.low, self.high)
        except brain_sql.InputError as ex:
            self.fail(str(ex), param, ctx)


class BrainCommand(click.Command):
    """A brain command: what brain_sql raises is answered here, once for every
    command, as the HTTP API answers it (tools.as_api_error): a caller's bad input
    is a usage error naming its option (400), as is a model named with --model that
    cannot be used (ModelRefused); a write not taken now is TryAgain (503), any other BrainError
    its message (the file's state); anything else is a bug, and surfaces."""

    def parse_args(self, ctx, args):
        """An option of one value given twice is a usage error, as the HTTP API's
        parameter is: click keeps the last and drops the other without a word."""
        if not ctx.resilient_parsing and not set(args) & set(ctx.help_option_names):  # --help answers first
            order = self.make_parser(ctx).parse_args(args=list(args))[2]
            for param in dict.fromkeys(order):
                if isinstance(param, click.Option) and not param.multiple and not param.count:
                    try:
                        name = "/".join([param.opts[0], *param.secondary_opts[:1]])  # --prf/--no-prf
                        for_plugin.given_once(name, [p for p in order if p is param])
                    except brain_sql.InputError as ex:
                        raise click.UsageError(str(ex), ctx) from ex
        return super().parse_args(ctx, args)

    def invoke(self, ctx):
        try:
            with _stdout_guarded():
                return self._answered(ctx)
        except OutputFailed as ex:
            done = f"what {ctx.command.name} changed is committed" if _writes(ctx) else "the brain is unchanged"
            raise click.ClickException(f"could not write to stdout ({ex}); {done}") from ex

    def _answered(self, ctx):
        try:
            return super().invoke(ctx)
        except brain_sql.InputError as ex:
            param = _param_of(ctx, getattr(ex, "field", None))
            raise (click.BadParameter(str(ex), ctx, param) if param else click.UsageError(str(ex), ctx)) from ex
        except (brain_sql.WriteError, brain_sql.ReplicaNotReady) as ex:
            raise TryAgain(str(ex)) from ex
        except brain_sql.ModelRefused as ex:  # the model the caller named cannot be used: their option
            raise click.BadParameter(str(ex), ctx, _param_of(ctx, "model")) from ex
        except brain_sql.BrainError as ex:
            raise click.ClickException(for_plugin.damage_advice(ctx.params.get("db_path"), str(ex))) from ex


def _writes(ctx):
    """Whether the command changed the file (each does before it prints what it did)."""
    return ctx.command.name in ("init", "ingest", "remember", "forget", "reindex") or bool(ctx.params.get("repair"))


class OutputFailed(Exception):
    """stdout refused what a command printed (a full disk, a closed pipe): said in one line, not a traceback."""

    def __init__(self, error: OSError):
        super().__init__(error.strerror or str(error))


class _GuardedStdout(io.TextIOWrapper):
    """sys.stdout while a command runs: a failed write is an OutputFailed, which no
    OSError of the command's own work (a file it reads, a model it loads) is mistaken for."""

    def write(self, text):
        try:
            return super().write(text)
        except OSError as ex:
            raise OutputFailed(ex) from ex

    def flush(self):
        try:
            return super().flush()
        except OSError as ex:
            raise OutputFailed(ex) from ex


@contextlib.contextmanager
def _stdout_guarded():
    original = sys.stdout
    if getattr(original, "buffer", None) is None:
        yield
        return
    original.flush()
    guarded = _GuardedStdout(original.buffer, encoding=original.encoding, errors=original.errors, write_through=True)
    sys.stdout = guarded
    try:
        yield
    except OutputFailed:
        _discard_stdout()  # before detach, whose flush would fail again on what the buffer still holds
        raise
    finally:
        sys.stdout = original
        guarded.detach()  # the buffer stays open: it is the process's stdout


def _discard_stdout():
    """Point stdout at /dev/null, so that what it still holds is dropped at exit, not
    reported again by Python as a second error."""
    with contextlib.suppress(OSError, ValueError, io.UnsupportedOperation):
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


class BrainGroup(click.Group):
    command_class = BrainCommand


def _param_of(ctx, field):
    """The command's option or argument a field (a QueryDoc's) comes from: the one
    of its name, QUERY for q."""
    name = "query" if field == "q" else field
    return next((param for param in ctx.command.params if param.name == name), None) if field else None


@sqlite_utils.hookimpl
def prepare_connection(conn):
    brain_sql.prepare_connection(conn)
    for_plugin.say_input_errors()  # `sqlite-utils query` says only "user-defined function raised exception"


def _open(db_path, must_exist=True, model_id=None, brain=True, read_only=False, damaged=False):
    """A connection to DB_PATH; with `brain`, it must already hold a brain, asked on
    a read-only connection first (another app's file is left as it was: a writable
    connection makes the journal a WAL); with `damaged`, a file too damaged to tell
    is opened too (for check to say what is wrong). `read_only`: one that changes
    nothing about the file."""
    if must_exist and not Path(db_path).exists():
        if not Path(db_path).parent.is_dir():
            raise click.ClickException(f"{db_path} does not exist, nor does its folder {Path(db_path).parent}")
        raise click.ClickException(f"{db_path} does not exist: create it with sqlite-utils brain init {db_path}")
    if not (must_exist and brain):
        return brain_sql.connect(db_path, model_id, read_only=read_only)
    probe = brain_sql.connect(db_path, model_id, read_only=True)
    try:
        held = brain_sql.is_brain(probe)
    except brain_sql.BrainError:
        if not damaged:
            probe.close()
            raise
        held = True
    if not held:
        probe.close()
        raise click.ClickException(f"{db_path} is not a brain: create one with sqlite-utils brain init {db_path}")
    if read_only:
        return probe  # the connection asked is the one wanted
    probe.close()
    return brain_sql.connect(db_path, model_id)


@click.group(cls=BrainGroup)
def brain():
    """A long-term memory in this SQLite file: ingest, remember, recall, forget.

    \b
    Example:
        sqlite-utils brain ingest brain.db notes/
        sqlite-utils brain recall brain.db "who owns the support runbook?"
    """


@sqlite_utils.hookimpl
def register_commands(cli):
    """The brain group, its commands defined below, each at module level."""
    cli.add_command(brain)


@brain.command()
@click.argument("db_path", type=click.Path(dir_okay=False))
@click.option("--model", help=MODEL_HELP)
def init(db_path, model):
    """Create the brain schema in DB_PATH, or migrate it to the current version.

    \b
    Example:
        sqlite-utils brain init brain.db
    """
    for_plugin.check_options(model=model, path=db_path)  # a model that cannot be loaded makes no file
    conn = _open(db_path, must_exist=False, model_id=model)
    brain_sql.migrate(conn, model or None)
    info = brain_sql.info(conn)
    click.echo(f"{db_path}: brain ready, model {info['model']} ({info['dimension']} dimensions)")


def _interruptible_ingest(db_path, *args, **kwargs):
    """brain_sql.ingest, whose Ctrl-C (click said only "Aborted!") and failed write
    say what is stored and how to finish."""
    try:
        return brain_sql.ingest(*args, **kwargs)
    except brain_sql.WriteError as ex:  # one transaction failed: those before it are stored
        said = str(ex).rstrip(".")
        if "run the same ingest again" in said:  # the library said what is kept (review 112: said twice)
            raise TryAgain(f"{said} (it passes over what {db_path} holds already)") from ex
        raise TryAgain(
            f"{said}; what this ingest wrote before it is stored: run the same ingest again to finish (it passes over "
            f"what {db_path} holds already)"
        ) from ex
    except KeyboardInterrupt:
        click.echo(
            f"\nstopped: what was written before is stored, the rest is not; run the same ingest again to "
            f"finish (it passes over what {db_path} holds already)",
            err=True,
        )
        sys.exit(130)


@brain.command()
@click.argument("db_path", type=click.Path(dir_okay=False))
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--scope", help="scope path for memories that name none, e.g. /acme/support")
@click.option("--class", "klass", type=click.Choice(brain_sql.CLASSES), help="class for memories that name none")
@click.option("--source", help="source tag for memories that name none")
@click.option("--domain", help="domain for memories that name none")
@click.option(
    "--prune",
    is_flag=True,
    help="remove memories whose files under PATHS no longer exist. Not pruned, and named as the "
    "command exits 1 (an unmounted drive, a sync that failed?): a PATH that would lose every memory "
    "it held before this ingest, whatever new files it has, and a folder in it that held memories "
    "and is still there but holds nothing to ingest, or only new files, or is reached through a symbolic link "
    "to a folder that is not there. A folder deleted is pruned. The notes of a folder holding a file whose name "
    "is not UTF-8 text (renamed by a tool of another encoding?), and notes a cloud sync left as placeholders "
    "(.NAME.icloud: not downloaded) are kept, even with --prune-all. A PATH that is a symbolic link prunes "
    "what was stored under it as given too",
)
@click.option(
    "--prune-all",
    is_flag=True,
    help="--prune, also where it would refuse (every memory of a PATH, "
    "a folder left with nothing to ingest or only new files, a link to a folder not there), "
    "and remove the memories of a records file that now holds "
    "no record, or of a records file whose earlier records are all gone (replaced by others): with or without "
    "--prune those are kept otherwise, and named as the command exits 1. A records file that keeps some of its "
    "records loses the others",
)
@click.option("--model", help=f"embedding model of a new brain; {MODEL_HELP}")
def ingest(db_path, paths, scope, klass, source, domain, prune, prune_all, model):
    """Ingest Markdown notes and folders, .txt files, and JSON / JSONL / CSV records.

    \b
    Example:
        sqlite-utils brain ingest brain.db ~/notes crm.jsonl --scope /acme --source crm
        sqlite-utils brain ingest scifact.db corpus.jsonl --model minilm/all-MiniLM-L6-v2-int8
    """
    for_plugin.check_options(scope, klass, source, domain, model, db_path)  # refused options make no file
    named = ", ".join(paths[:3]) + (" ..." if len(paths) > 3 else "")
    if not Path(db_path).exists() and not any(os.path.lexists(path) for path in paths):
        raise click.UsageError(f"nothing to ingest: {named} does not exist, and no brain is made for it")
    files, errors = brain_sql.discover(paths)
    if not Path(db_path).exists() and not files:
        why = "; ".join(str(error) for error in errors[:3]) or "no file of a kind ingest reads"
        raise click.UsageError(
            f"nothing to ingest in {named} ({why}), and no brain is made for it "
            f"(sqlite-utils brain init {db_path} makes an empty one)"
        )
    made = not Path(db_path).exists()
    conn = _open(db_path, must_exist=False)
    total = sum(map(_size, (p for p, _ in files)))
    refused = None
    with click.progressbar(length=total, label="Ingesting", file=sys.stderr, item_show_func=_rate("record")) as bar:
        try:
            report = _interruptible_ingest(
                db_path,
                conn,
                paths,
                scope=scope,
                klass=klass,
                source=source,
                domain=domain,
                prune=prune,
                prune_all=prune_all,
                progress=bar.update,
                model=model,
            )
        except brain_sql.PruneRefused as ex:  # the rest went in: its report is still told
            report, refused = ex.report, ex
        bar.update(max(total - bar.pos, 0), report.documents)  # done: the files' bytes hold more than text
    for error in report.errors:
        click.echo(f"skipped {error}", err=True)
    _settle(conn)
    click.echo(report.summary())
    if made and not report.documents and brain_sql.is_brain(conn) and not brain_sql.stats(conn)["memories"]:
        click.echo(  # left, not removed: another process may have opened it meanwhile
            f"nothing was stored: {db_path} is an empty brain made for this ingest (delete it, with its -wal and "
            "-shm files, if no one uses it)",
            err=True,
        )
    if refused:
        raise refused
    if report.errors:
        sys.exit(1)


METAVARS = {int: "INTEGER", float: "NUMBER", "time": "TIME", "path": "PATH"}


def _option_name(field):
    """The recall option's --name for a QueryDoc field: a list's is named for one item."""
    return "--" + (field.one or field.name).replace("_", "-")


def _option(field):
    """The recall option a QueryDoc field (brain_sql.QUERY_FIELDS) is given by: a
    true/false field a --name/--no-name pair, a list a repeatable option; its text
    reaches the QueryDoc, which checks it."""
    name = _option_name(field)
    if field.type is bool:
        return click.option(f"{name}/--no-{name[2:]}", field.name, default=None, help=field.description)
    metavar = f"[{'|'.join(field.choices)}]" if field.choices else METAVARS.get(field.shape or field.type)
    if field.type is tuple:
        return click.option(name, field.name, multiple=True, metavar=metavar, help=f"{field.description} (repeatable)")
    return click.option(name, field.name, metavar=metavar, help=field.description)


def recall_options(command):
    """The recall command's options: each QueryDoc field but q, its QUERY argument."""
    for field in reversed(brain_sql.QUERY_FIELDS[1:]):
        command = _option(field)(command)
    return command


@brain.command()
@click.argument("db_path", type=click.Path(dir_okay=False))
@click.argument("query")
@recall_options
@click.option("--json", "as_json", is_flag=True, help="print the JSON API's response")
def recall(db_path, query, as_json, **options):
    """Recall the memories that answer QUERY, and why each was chosen.

    \b
    Example:
        sqlite-utils brain recall brain.db "who owns the support runbook?" --scope /acme/support
    """
    doc = brain_sql.querydoc_from_strings({"q": query, **options}, comma_lists=False)
    result = brain_sql.recall(_open(db_path), doc)
    if as_json:
        click.echo(json.dumps(result, indent=2))
    else:
        click.echo(_readable(result))


@brain.command(name="eval")
@click.argument("db_path", type=click.Path(dir_okay=False))
@click.option("--queries", required=True, type=click.Path(exists=True, dir_okay=False), help="BEIR queries.jsonl")
@click.option("--qrels", required=True, type=click.Path(exists=True, dir_okay=False), help="BEIR qrels .tsv")
@click.option(
    "--k",
    "k",
    type=WholeNumber(1, 100),
    default=10,
    show_default=True,
    help="hits recalled per query, 1 to 100 (under 10, the @5 and @10 metrics count only those)",
)
@click.option("--now", help="fixed evaluation time (ISO)")
@click.option(
    "--per-query",
    type=click.Path(dir_okay=False, writable=True),
    metavar="FILE",
    help="also write each query's metrics per mode here, as JSON lines (compare two with bench/compare.py)",
)
def eval_(db_path, queries, qrels, k, now, per_query):
    """Score recall on a BEIR-format query set: one JSON object with nDCG@10,
    Recall@2/5/10 and MRR@10 for the full pipeline, without the graph, and per leg.

    \b
    Example:
        sqlite-utils brain eval scifact.db --queries queries.jsonl --qrels qrels/test.tsv
    """
    conn = _open(db_path)
    count = len(brain_sql.load_qrels(qrels))
    with click.progressbar(length=count, label="Evaluating", file=sys.stderr) as bar:
        result, extra = brain_sql.evaluate(conn, queries, qrels, k=k, now=now, progress=bar.update, per_query=per_query)
    click.echo(json.dumps(result))
    if extra["missing"]:
        click.echo(
            f"{extra['missing']:,} of the {extra['relevant']:,} corpus ids judged relevant are no record's _id in "
            f"{db_path}: never found, they count as misses",
            err=True,
        )
    click.echo(f"{extra['abstained']} abstained; {extra['seconds']}s", err=True)


@brain.command()
@click.argument("db_path", type=click.Path(dir_okay=False))
@click.option("--model", required=True, help=MODEL_HELP)
def reindex(db_path, model):
    """Re-embed every memory with another model, and make it the brain's model.

    \b
    Example:
        sqlite-utils brain reindex brain.db --model ./my-model2vec-folder
    """
    with contextlib.ExitStack() as stack:
        progress = _progress_bar(stack, "Re-embedding", "memory", "memories")
        written = brain_sql.reindex(_open(db_path), model, progress=progress)
    click.echo(f"{db_path}: {counted(written, 'memory', 'memories')} re-embedded with {model}")


@brain.command()
@click.argument("db_paths", nargs=-1, required=True, type=click.Path(dir_okay=False, exists=True))
def mcp(db_paths):
    """Serve the brains' MCP tools (brain_recall, brain_remember, brain_verify,
    brain_forget, brain_memory, brain_list) over stdin and stdout, for an agent without a
    server: the same tools and JSON as datasette-mcp's /-/mcp, acting as the
    files' owner. With several brains, a tool's `database` names one (its file's
    name without .db).

    \b
    Example:
        sqlite-utils brain mcp brain.db
    or in an MCP client's configuration:
        {"command": "sqlite-utils", "args": ["brain", "mcp", "/path/to/brain.db"]}
    """
    from . import stdio  # Datasette's app and the MCP SDK: a second to load, for this command alone

    files = [(found.st_dev, found.st_ino) for found in map(os.stat, db_paths)]  # a link's file too
    for db_path, file in zip(db_paths, files):
        if files.count(file) > 1:
            named = " and ".join(p for p, f in zip(db_paths, files) if f == file)
            raise click.UsageError(f"{db_path} is given twice (as {named}): give each brain once")
        _open(db_path).close()  # a clear message for a file that is not a brain, before the protocol starts
    asyncio.run(stdio.serve(db_paths))


def _settle(conn):
    """Copy the write-ahead log into the file and empty it, so that when a write
    command ends the .db file alone holds the brain (a copy of it is whole), without
    waiting: a reader holding the log back (Litestream's always does, a slow export
    may) made it wait out the busy timeout after the write had committed, holding off
    every other writer meanwhile (review 106). Such a reader's own close finishes it."""
    waits = conn.execute("pragma busy_timeout").fetchone()[0]
    try:
        conn.execute("pragma busy_timeout = 0")
        conn.execute("pragma wal_checkpoint(truncate)")
    except Exception:  # noqa: BLE001 - busy or read-only: the log stays, nothing is lost
        pass
    finally:
        conn.execute(f"pragma busy_timeout = {int(waits)}")


def _progress_bar(stack, label, *what):
    """A progress(done, total) that shows a bar on stderr, made (in `stack`) at its first
    call: the length is known only once the work's snapshot is read, and may grow."""
    bars = []

    def progress(done, total):
        if not bars:
            bar = click.progressbar(length=total, label=label, file=sys.stderr, item_show_func=_rate(*what))
            bars.append(stack.enter_context(bar))
        bars[0].length = total
        bars[0].update(done - bars[0].pos, done)

    return progress


def _rate(*what):
    """The progress bar's note on the pace: how many of `what` (counted's words) are done, and a second."""
    started = time.perf_counter()

    def show(done):
        if done is None:
            return None
        return f"{counted(done, *what)}, {done / max(time.perf_counter() - started, 1e-3):,.0f}/s"

    return show


def _size(path):
    """A file's size for the progress bar; 0 for one that cannot be looked at
    (ingest reports it by name)."""
    try:
        return Path(path).stat().st_size
    except OSError:
        return 0


PROBLEMS = {
    "integrity": "the SQLite file fails its integrity check (restore a copy; not repairable here)",
    "damaged_tables": (
        "tables of another shape than the brain's (a column gone, renamed or retyped, another primary key, a plain "
        "table for a virtual one) or that cannot be opened: --repair makes again all but knowledge, entities, "
        "relationships and brain_meta, for which restore a copy"
    ),
    "pending_migrations": "schema migrations not applied yet",
    "missing_tables": (
        "tables a tool or plain SQL dropped (all but knowledge, entities and relationships are made again; "
        "brain_meta from the model every memory names; a full-text or vector table missing one of its own is "
        "made again whole)"
    ),
    "invalid_values": (
        "values of the wrong kind, as plain SQL can write them (the rest is checked once they are mended)"
    ),
    "missing_triggers": (
        "triggers missing (a tool that rebuilds tables drops them): full text, vectors or the change log stop following"
    ),
    "altered_triggers": "triggers that differ from the brain's own",
    "id_mark_behind": (
        "the id mark, which keeps a forgotten memory's id from being given to another, is below the highest id "
        "given (shown) or is not there: plain SQL set it back or dropped it"
    ),
    "id_marks_past_bound": (
        "id marks past the largest id (2**53 - 1), which a row plain SQL wrote that high left there: "
        "every new id after them would be refused"
    ),
    "instance_id": "the brain's instance id, which readers tell it from another copied over its file by, is not one id",
    "missing_indexes": (
        "indexes the pages and turn writes read missing (a tool that rebuilds tables drops them): "
        "they read every memory"
    ),
    "altered_indexes": "indexes the pages and turn writes read that differ from the brain's own",
    "fts_out_of_sync": "the full-text index disagrees with knowledge",
    "missing_vectors": "memories without a vector",
    "orphan_vectors": "vectors without a memory",
    "stale_vector_filters": "vectors whose filter columns disagree with their memory",
    "other_model_vectors": "memories embedded by another model than the brain's",
    "dangling_edges": "relationships whose entity or chunk is gone",
    "detached_memories": (
        "chunks whose document_id names no document while their file's document is stored (--repair gives each "
        "back to the one that is missing it, makes its document's row again where none is and the chunk names "
        "one of its file, or refuses by chunk)"
    ),
    "incomplete_documents": "documents whose chunks are not all there",
    "pending_mentions": (
        "mention matching left unfinished (an ingest or a remember stopped before its end): the next ingest, "
        "or --repair, finishes it"
    ),
    "stale_name_index": (
        "entities the name index holds otherwise than their names (their mentions in new text go unfound)"
    ),
    "orphan_versions": "earlier versions of records whose current version is gone",
    "nested_versions": (
        "earlier versions of a record that is itself an earlier version, or of themselves, with no current version "
        "(--repair leaves them, as which is current is yours to say: forget or give again the one that is)"
    ),
    "stale_supersession": "memories whose superseded_at / superseded_by disagree with what replaced them",
    "supersede_cycles": (
        "records whose supersedes form a cycle, so that each hides the next from recall (plain SQL wrote them): "
        "--repair leaves them, as which to change is yours: correct or forget one of each"
    ),
    "stale_quotes": "conversation turns quoting a turn that is flagged, changed, gone or in another session or scope",
    "stale_own_lines": "conversation turns whose context begins with another speaker, day or time phrases than theirs",
    "look_alike_entities": (
        "entities whose names are one name composed (NFC) with whitespace as one space, or one not written so "
        "(--repair makes each group one entity, with all its edges and documents)"
    ),
    "reindex_leftovers": "tables a reindex stopped before its end left (as large as the vectors; --repair drops them)",
    "unreadable_holds": (
        "brain_meta rows of what ingest holds back (a folder or records file it refused to prune) in a shape plain "
        "SQL wrote: they hold nothing, and the next ingest judges that folder or file afresh (--repair removes them, "
        "and writes the one row of them all again with what it holds readably)"
    ),
    "stale_snapshot": "the read state's snapshot beside the file cannot be used (a server builds the state from SQL)",
    "oversized_records": (
        "records stored past the limits ingest holds to now (an older version counted a character past ASCII in "
        "metadata as one, not as the \\u escape it is stored as; plain SQL writes any size), each named by its "
        "first memory: their export is refused when ingested; --repair leaves them, as what to leave out is yours: "
        "give each again with less, or forget it"
    ),
}


@brain.command()
@click.argument("db_path", type=click.Path(dir_okay=False))
@click.option("--repair", is_flag=True, help="mend what disagrees, from knowledge")
def check(db_path, repair):
    """Check that FTS, vectors, edges and documents agree with the memories.

    \b
    Example:
        sqlite-utils brain check brain.db --repair
    """
    problems = brain_sql.check(_open(db_path, damaged=True), repair=repair)
    left = problems.pop("unrepaired", {})
    _echo_problems(problems)
    if not problems:
        click.echo(f"{db_path}: consistent")
    elif repair and not left:
        click.echo(f"repaired; {db_path} is now consistent")
    else:
        if left:
            # each finding --repair leaves (which version is current, what metadata to leave out) is the user's
            done = "mended nothing it may" if left == problems else "repaired what it could"
            click.echo(f"{done}; {db_path} still has:")
            _echo_problems(left, "  ")
        sys.exit(1)


def _echo_problems(problems, indent=""):
    for name, items in problems.items():
        shown = [str(item) for item in items[:10]] + (["…"] if len(items) > 10 else [])
        if name == "invalid_values":  # each names its row and column, and what to do: a line each
            click.echo(
                f"{indent}{PROBLEMS.get(name, name)}: {len(items)}\n" + "\n".join(f"{indent}  {line}" for line in shown)
            )
        else:
            click.echo(f"{indent}{PROBLEMS.get(name, name)}: {len(items)} ({', '.join(shown)})")


@brain.command()
@click.argument("db_path", type=click.Path(dir_okay=False))
@click.argument("file", default="-", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--scope", help="scope path for records that name none, e.g. /acme/support")
@click.option("--class", "klass", type=click.Choice(brain_sql.CLASSES), help="class for records that name none")
@click.option("--source", default="remember", show_default=True, help="source tag for records that name none")
@click.option("--domain", help="domain for records that name none")
@click.option("--json", "as_json", is_flag=True, help="print the answer /-/remember gives, as JSON")
def remember(db_path, file, scope, klass, source, domain, as_json):
    """Remember records from FILE, or from stdin when FILE is - or absent: a JSON
    object, a JSON array of them, or JSON lines, with ingest's record fields. All
    are stored in one transaction, or none; a record whose _id is stored already
    replaces that memory.

    \b
    Example:
        echo '{"_id": "m-1", "text": "Deploys happen on Tuesdays."}' | sqlite-utils brain remember brain.db
        sqlite-utils brain remember brain.db records.jsonl --scope /acme/eng
    """
    name = "stdin" if file == "-" else file
    try:
        with click.open_file(file, "rb") as stream:
            data = for_plugin.read_input(stream, name)
    except OSError as ex:
        raise BadInput(f"cannot read {name}: {ex.strerror}") from ex
    records, lines = _records(data, name)
    options = {"scope": scope, "klass": klass, "source": source, "domain": domain, "lines": lines}
    if not Path(db_path).exists():  # refused options or records, or none, make no file
        _say_refused(for_plugin.check_records(records, **options), name)
        if not records:
            raise BadInput(f"{name} holds no record: nothing was stored, and no brain is made at {db_path}")
    conn = _open(db_path, must_exist=False)
    report, ids = brain_sql.remember(conn, records, **options)
    _settle(conn)
    _say_refused(report, name)
    answer = report.answer(ids)
    if as_json:
        click.echo(json.dumps(answer))
        return
    click.echo(
        f"{counted(len(records), 'record')}: {answer['added']} added, {answer['updated']} updated, "
        f"{answer['unchanged']} unchanged"
    )
    click.echo(f"memory ids: {_memory_ids(ids)}")
    if report.warning:
        click.echo(f"Warning: {report.warning}", err=True)


def _memory_ids(ids):
    """Each record's memory ids, runs as first-last: `2, 3` when each record made
    one, else `4-6 (record 1); 7 (record 2)`."""
    if all(len(made) == 1 for made in ids):
        return ", ".join(str(made[0]) for made in ids)
    return "; ".join(f"{_runs(made)} (record {number})" for number, made in enumerate(ids, 1))


def _runs(numbers):
    """`numbers` with each run of consecutive ones as first-last: 4-6, 9."""
    runs: list[list[int]] = []
    for number in numbers:
        if runs and number == runs[-1][-1] + 1:
            runs[-1].append(number)
        else:
            runs.append([number])
    return ", ".join(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]) for run in runs)


def _say_refused(report, name):
    """A BadInput naming each record a remember refused, by its line in `name`."""
    if report.errors:
        problems = "\n".join(
            f"{name}:{e.line}: {e.message}" if e.line else f"{name}: {e.message}" for e in report.errors
        )
        raise BadInput(f"{problems}\nnothing was stored")


@brain.command()
@click.argument("db_path", type=click.Path(dir_okay=False))
def export(db_path):
    """Write every memory to stdout as JSON lines, a document a line, in the
    record format ingest reads: with its ids, scope, class, source, validity,
    tier, expiry, review state, metadata and relations. Ingesting the file into
    a new brain (with another --model too) gives the same memories. Read from
    one snapshot; the file is not changed. Progress goes to stderr.

    \b
    Example:
        sqlite-utils brain export brain.db > brain.jsonl
        sqlite-utils brain ingest copy.db brain.jsonl --model minilm/all-MiniLM-L6-v2-int8
    """
    conn = _open(db_path, read_only=True)
    out = sys.stdout.buffer  # the lines are UTF-8, whatever the locale
    with contextlib.ExitStack() as stack:
        lines = brain_sql.export(conn, progress=_progress_bar(stack, "Exporting", "memory", "memories"))
        try:
            for line in lines:
                out.write(line.encode("utf-8"))
            out.flush()
        except BrokenPipeError:  # `export | head`: the reader has what it wanted
            lines.close()
            _discard_stdout()
            sys.exit(1)
        except OSError as ex:
            lines.close()
            raise OutputFailed(ex) from ex


@brain.command()
@click.argument("db_path", type=click.Path(dir_okay=False))
@click.option(
    "--id", "ids", type=WholeNumber(), multiple=True, metavar="ID", help="a memory's id, knowledge.id (repeatable)"
)
@click.option(
    "--external-id",
    "external_ids",
    multiple=True,
    metavar="ID",
    help="a record's own _id, knowledge.external_id (repeatable)",
)
@click.option("--json", "as_json", is_flag=True, help="print what was removed and not found, as JSON")
def forget(db_path, ids, external_ids, as_json):
    """Forget memories, each with the rest of its note or record: their full text,
    vectors and the edges they stated, and entities nothing else ties into the
    graph. One transaction; ids that match nothing are reported.

    \b
    Example:
        sqlite-utils brain forget brain.db --id 12 --external-id m-1
    """
    if not ids and not external_ids:
        raise click.UsageError("give the memories to forget: --id N or --external-id X, each repeatable")
    conn = _open(db_path)
    result = brain_sql.forget(conn, ids=ids, external_ids=external_ids)
    _settle(conn)
    if as_json:
        click.echo(json.dumps(result))
        return
    removed, missing = result["removed"], result["not_found"]
    if removed["memories"]:
        click.echo(
            f"forgot {counted(len(removed['memories']), 'memory', 'memories')} of "
            f"{counted(removed['documents'], 'document')} ({_named(removed['memories'], removed['external_ids'])}); "
            f"with them {counted(removed['relationships'], 'relationship')} and "
            f"{counted(removed['entities'], 'entity', 'entities')}"
        )
    else:
        click.echo("nothing forgotten")
    if missing["ids"] or missing["external_ids"]:
        click.echo(f"not found: {_named(missing['ids'], missing['external_ids'])}")


@brain.command()
@click.argument("db_path", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="print the counts as one JSON object")
def stats(db_path, as_json):
    """Count what the brain holds: memories per class, scope and source, decayed
    and flagged memories, documents, entities, relationships, the model and the
    file's size.

    \b
    Example:
        sqlite-utils brain stats brain.db --json
    """
    found = brain_sql.stats(_open(db_path))
    if as_json:
        click.echo(json.dumps(found, indent=2))
        return
    decayed = found["decayed"]

    def listed(counts):
        return ", ".join(f"{name or '(none)'} {n}" for name, n in counts.items()) or "-"

    click.echo(
        f"{db_path}: {counted(found['memories'], 'memory', 'memories')} in {counted(found['documents'], 'document')}; "
        f"{counted(found['entities'], 'entity', 'entities')}, {counted(found['relationships'], 'relationship')}"
    )
    click.echo(f"class: {listed(found['by_class'])}")
    click.echo(f"scope: {listed(found['by_scope'])}")
    click.echo(f"source: {listed(found['by_source'])}")
    click.echo(
        f"decayed: {decayed['expired']} expired, {decayed['expiring within 7 days']} expiring within 7 days, "
        f"{decayed['archived']} archived; {found['flagged']} flagged"
    )
    click.echo(f"model: {found['model']} ({found['dimension']} dimensions), schema version {found['schema_version']}")
    click.echo(f"file: {found['file_bytes']:,} bytes (+ {found['wal_bytes']:,} in the write-ahead log)")


def _until_stopped(operation, *args, **kwargs):
    """Run `operation` with a `stop` event that Ctrl-C and SIGTERM set."""
    stop = threading.Event()
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, lambda *_: stop.set())
    return operation(*args, stop=stop, **kwargs)


@brain.command()
@click.argument("db_path", type=click.Path(dir_okay=False, exists=True))
@click.argument("url", required=False)
@click.option(
    "--config",
    type=click.Path(dir_okay=False, exists=True),
    help="run Litestream with this litestream.yml (which must list DB_PATH) instead of URL",
)
@click.option(
    "--sync-interval",
    default=for_plugin.REPLICA_SYNC_INTERVAL,
    show_default=True,
    help="how often changes are sent to the replica (a Litestream duration): the recovery point",
)
def replicate(db_path, url, config, sync_interval):
    """Stream DB_PATH to a Litestream replica URL until stopped (Ctrl-C).

    URL is file:///path or s3://bucket/path (?endpoint=...&region=... for
    S3-compatible stores; credentials in AWS_ACCESS_KEY_ID and
    AWS_SECRET_ACCESS_KEY, as Litestream reads them).

    \b
    Example:
        sqlite-utils brain replicate brain.db s3://bucket/brain
    """
    if (url is None) == (config is None):
        raise click.UsageError("give URL or --config, not both")
    _until_stopped(
        brain_sql.replicate,
        db_path,
        url,
        config=config,
        sync_interval=sync_interval,
        say=lambda line: click.echo(line, err=True),
    )


@brain.command()
@click.argument("url")
@click.argument("copy_path", metavar="COPY", type=click.Path(dir_okay=False))
@click.option(
    "--interval",
    type=click.FloatRange(0.1, 60),
    default=for_plugin.FOLLOW_INTERVAL_SECONDS,
    show_default=True,
    help="seconds between looks for new changes",
)
@click.option(
    "--stall-after",
    type=click.FloatRange(1),
    default=for_plugin.FOLLOW_STALL_SECONDS,
    show_default=True,
    help="seconds behind the replica without progress before it is reported stalled",
)
def follow(url, copy_path, interval, stall_after):
    """Keep COPY a live, read-only copy of the Litestream replica at URL until
    stopped (Ctrl-C); started again, it resumes where it stopped. Serve COPY
    with Datasette for recall; its status is COPY-follow, and /DB/-/replica.

    \b
    Example:
        sqlite-utils brain follow s3://bucket/brain replica/brain.db
        datasette replica/brain.db
    """
    _until_stopped(
        brain_sql.follow,
        url,
        copy_path,
        interval=interval,
        stall_after=stall_after,
        say=lambda line: click.echo(line, err=True),
    )


def _named(ids, external_ids):
    """`ids 7, 9; external id m-1`: those of the two lists that are not empty."""
    return "; ".join(
        f"{label if len(values) == 1 else label + 's'} {', '.join(map(str, values))}"
        for label, values in (("id", ids), ("external id", external_ids))
        if values
    )


def _records(data, name):
    """(records, the line each starts on) from a JSON object, a JSON array of
    objects, or JSON lines, read as the brain reads JSON (for_plugin.loads_json); a
    ClickException naming the line of anything malformed or nested too deeply."""
    try:
        text = data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as ex:
        line = data[: ex.start].count(b"\n") + 1
        raise BadInput(f"{name}:{line}: not UTF-8 text (byte 0x{data[ex.start]:02x})") from ex
    if not text.strip():
        raise BadInput(f"{name}: no records: give a JSON object, a JSON array of them, or JSON lines")
    first = len(text) - len(text.lstrip())
    lines = [(number, line) for number, line in enumerate(text.split("\n"), 1) if line.strip()]
    try:
        whole = for_plugin.loads_json(text, unique_keys=True)
    except json.JSONDecodeError as ex:
        if ex.msg != "Extra data":  # one JSON value, malformed
            raise BadInput(f"{name}:{ex.lineno}: malformed JSON: {for_plugin.said(ex)}") from ex
    except (brain_sql.FieldError, ValueError, RecursionError) as ex:  # a key given twice, NaN, too deep
        if not isinstance(ex, RecursionError) or not _one_a_line(lines):
            raise BadInput(f"{name}:{_line_of(ex, lines)}: malformed JSON: {_malformed(ex)}") from ex
    else:
        if isinstance(whole, list):
            return whole, None  # an array's records are named by their number
        return [whole], [text[:first].count("\n") + 1]
    records, numbers, problems = [], [], []
    for number, line in lines:
        try:
            records.append(for_plugin.loads_json(line, unique_keys=True))
            numbers.append(number)
        except (brain_sql.FieldError, ValueError, RecursionError) as ex:
            problems.append(f"{name}:{number}: malformed JSON line: {_malformed(ex)}")
    if problems:
        raise BadInput("\n".join(problems) + "\nnothing was stored")
    return records, numbers


def _one_a_line(lines):
    """Whether `lines` (numbered, not blank) read as JSON lines: more than one, the first
    a value of its own (or nested too deeply on its own)."""
    if len(lines) < 2:
        return False
    try:
        for_plugin.loads_json(lines[0][1])
    except RecursionError:
        return True
    except ValueError:
        return False
    return True


def _line_of(ex, lines):
    """The line a whole JSON value's problem `ex` is on: json's own where it says; else
    where the NaN or Infinity, the key given again (its second line) or the number past
    Python's digit limit is written; else the first."""
    said = str(ex)
    constant = re.search(r"^(-?Infinity|NaN) is not", said)
    key = re.search(r'^the key (".*") of one object is given twice', said)
    if constant:
        pattern, nth = rf"(?<![\w\"]){constant[1]}\b", 0
    elif key:
        pattern, nth = re.escape(key[1]) + r"\s*:", 1
    elif "digits" in said:
        pattern, nth = r"\d{4301}", 0
    else:
        return getattr(ex, "lineno", None) or lines[0][0]
    found = [number for number, line in lines for _ in re.finditer(pattern, line)]
    return found[nth] if len(found) > nth else lines[0][0]


def _malformed(ex):
    """What is wrong with JSON that `ex` refused, in a few words."""
    return "nested too deeply" if isinstance(ex, RecursionError) else for_plugin.said(ex)


def _readable(result):
    """The recall response as text for a terminal."""
    quality = result["quality"]
    if not result["hits"]:
        if result.get("reason") == "only_decayed":  # the query's words are not the trouble: no advice on them
            return (
                "No memory returned: nothing current matches; expired or archived memories do: "
                "--include-decayed shows them."
            )
        because = result.get("message") or result.get("reason") or "no memory fits this query well enough"
        return (
            f"No memory returned: {because} (confidence {quality['confidence']:.2f}, "
            f"recommendation: {quality['recommendation']})."
        )
    lines = []
    for rank, hit in enumerate(result["hits"], 1):
        provenance = hit.get("provenance", {})
        legs = ", ".join(
            f"{leg} #{provenance[f'{leg}_rank']}" for leg in ("vector", "fts", "graph") if provenance.get(f"{leg}_rank")
        )
        section = for_plugin.section(hit["title"], hit["heading_path"])
        heading = f" › {section}" if section else ""
        where = for_plugin.cited(hit)
        lines.append(
            f"{rank}. {hit['title'] or '(untitled)'}{heading}  "
            f"(relevance {hit['relevance']:.2f}; score {hit['score']:.4f}{'; ' + legs if legs else ''})"
        )
        lines.append(f"   {where} · {hit['class']} · {hit['scope']} · {hit['source']}")
        text = " ".join(hit["content"].split())
        lines.append(f"   {text[:200]}{'…' if len(text) > 200 else ''}")
    expansion = result["hits"][0].get("provenance", {}).get("expansion_terms") if result["hits"] else None
    searched = result.get("query") or {}
    dates = ", ".join(f"{name} {searched[name]}" for name in ("since", "until") if searched.get(name))
    if searched.get("as_of") and searched["as_of"] != searched.get("now"):
        dates = ", ".join(part for part in (dates, f"as of {searched['as_of']}") if part)
    lines.append(
        f"confidence {quality['confidence']:.2f}"
        + (f"; expanded with: {', '.join(expansion)}" if expansion else "")
        + (f"; {dates}" if dates else "")
    )
    return "\n".join(lines)
