"""The `sqlite-utils brain` command group."""

import sys
from pathlib import Path

import click
import sqlite_utils

import brain_sql
from brain_sql.config import configured_model
from brain_sql.ingest import discover


@sqlite_utils.hookimpl
def prepare_connection(conn):
    brain_sql.prepare_connection(conn)


def _open(db_path, must_exist=True, model_id=None):
    if must_exist and not Path(db_path).exists():
        raise click.ClickException(f"{db_path} does not exist: create it with sqlite-utils brain init {db_path}")
    try:
        return brain_sql.connect(db_path, model_id)
    except brain_sql.BrainError as ex:
        raise click.ClickException(str(ex)) from ex


@sqlite_utils.hookimpl
def register_commands(cli):
    @cli.group()
    def brain():
        """A long-term memory in this SQLite file: ingest, recall, evaluate."""

    @brain.command()
    @click.argument("db_path", type=click.Path(dir_okay=False))
    @click.option("--model", help=f"model2vec folder or hub id (default: {configured_model()})")
    def init(db_path, model):
        """Create the brain schema in DB_PATH, or migrate it to the current version."""
        conn = _open(db_path, must_exist=False, model_id=model)
        try:
            brain_sql.migrate(conn, model or None)
        except brain_sql.BrainError as ex:
            raise click.ClickException(str(ex)) from ex
        model_id, dimension = conn.execute(
            "select (select value from brain_meta where key = 'model'), "
            "(select value from brain_meta where key = 'dimension')"
        ).fetchone()
        click.echo(f"{db_path}: brain ready, model {model_id} ({dimension} dimensions)")

    @brain.command()
    @click.argument("db_path", type=click.Path(dir_okay=False))
    @click.argument("paths", nargs=-1, required=True, type=click.Path())
    @click.option("--scope", help="scope path for memories that name none, e.g. /acme/support")
    @click.option("--class", "klass", type=click.Choice(["memory", "reference", "policy"]), help="class for memories that name none")
    @click.option("--source", help="source tag for memories that name none")
    @click.option("--domain", help="domain for memories that name none")
    @click.option("--prune", is_flag=True, help="remove memories whose files under PATHS no longer exist")
    def ingest(db_path, paths, scope, klass, source, domain, prune):
        """Ingest Markdown notes and folders, .txt files, and JSON / JSONL / CSV records."""
        conn = _open(db_path, must_exist=False)
        files, _ = discover(paths)
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
