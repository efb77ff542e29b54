"""The Datasette plugin: thin hooks over brain_sql."""

from datasette import hookimpl

import brain_sql


@hookimpl
def prepare_connection(conn):
    brain_sql.prepare_connection(conn)
