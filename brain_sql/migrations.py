"""datasette-brain's migrations, for `sqlite-utils migrate DB path/to/this/file`.

sqlite-utils runs this file and applies every Migrations object it defines.
"""

from brain_sql.schema import migrations  # noqa: F401
