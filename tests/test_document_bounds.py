"""The work one document makes is bounded: a note, a record or an exported record
making more memories (chunks) than MAX_DOCUMENT_CHUNKS is refused by name before
any is embedded or written, the rest still goes in; headings with no text make no
memory of their own; a note's size is told as the user wrote it."""

import json

import pytest
from datasette.app import Datasette
from mcp import Client
from mcp.server.mcpserver import MCPServer

import brain_sql
from brain_sql.config import CHUNK_MAX_CHARS, MAX_CONTENT_BYTES, MAX_DOCUMENT_CHUNKS
from datasette_brain import mcp_tools

from .conftest import rows

LIMIT = f"the limit is {MAX_DOCUMENT_CHUNKS:,} for one document"
TOO_MANY = [{"content": f"chunk {i}"} for i in range(MAX_DOCUMENT_CHUNKS + 1)]


def test_a_note_or_record_making_too_many_memories_is_skipped_by_name_and_the_rest_goes_in(run, tmp_path):
    """A note of one-line headings, each a section (a 1 MB one made half a million
    memories, holding the write lock for a minute), and a record of too many
    exported chunks are skipped with their file and line; the others go in."""
    folder = tmp_path / "vault"
    folder.mkdir()
    (folder / "headings.md").write_text("".join(f"# Heading {i}\n" for i in range(MAX_DOCUMENT_CHUNKS + 1)))
    (folder / "deploys.md").write_text("# Deploys\n\nDeploys happen on Tuesdays.\n")
    records = [{"_id": "a", "text": "The pager rota changes on Mondays."}, {"_id": "b", "_chunks": TOO_MANY}]
    records.append({"_id": "c", "text": "Backups run nightly."})
    (folder / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    db_path = tmp_path / "brain.db"
    result = run("brain", "ingest", db_path, folder)
    assert result.exit_code == 1, result.output
    skipped = [line for line in result.output.splitlines() if line.startswith("skipped")]
    assert len(skipped) == 2, result.output
    assert f"{folder / 'headings.md'}:{MAX_DOCUMENT_CHUNKS + 1}: " in skipped[0] and LIMIT in skipped[0]
    assert f"{folder / 'records.jsonl'}:2: " in skipped[1] and LIMIT in skipped[1]
    assert f"{MAX_DOCUMENT_CHUNKS + 1:,} memories" in skipped[1]
    conn = brain_sql.connect(db_path)
    assert sorted(r[0] for r in rows(conn, "select content from knowledge")) == [
        "# Deploys\n\nDeploys happen on Tuesdays.",
        "Backups run nightly.",
        "The pager rota changes on Mondays.",
    ]


def test_headings_with_no_text_make_no_memory_of_their_own(tmp_path):
    """A run of `#` lines was a memory each with no words (a 1 MB note of them, half
    a million): they pack with what follows them. An empty heading under a named one
    stays in its section; one closing it starts a section of no heading."""
    folder = tmp_path / "vault"
    folder.mkdir()
    hashes = "#\n" * (MAX_DOCUMENT_CHUNKS + 1)
    (folder / "hashes.md").write_text(hashes)
    (folder / "deploys.md").write_text("# Deploys\n##\nOn Tuesdays.\n\n# Backups\n#\nNightly.\n")
    conn = brain_sql.connect(tmp_path / "brain.db")
    report = brain_sql.ingest(conn, [folder])
    assert not report.errors, report.errors
    packed = rows(conn, "select content from knowledge where title = 'hashes' order by chunk_index")
    assert len(packed) <= 2 * len(hashes) // CHUNK_MAX_CHARS + 1
    assert "".join(c[0] for c in packed).replace("\n", "") == hashes.replace("\n", "")  # every character kept
    assert rows(conn, "select heading_path, content from knowledge where title = 'deploys' order by chunk_index") == [
        ("Deploys", "# Deploys\n\n##\n\nOn Tuesdays."),  # a note's blocks joined by a blank line
        ("Backups", "# Backups"),
        (None, "#\n\nNightly."),
    ]


def test_a_notes_size_is_the_size_of_its_text_as_written(tmp_path):
    """The content limit holds a note's text after its frontmatter as written, and a
    refusal names that size: chunking joins blocks with blank lines, which made a
    note under 1 MB "1,101,396 bytes" and refused it."""
    rules = "---\n" * 2_400  # blocks on lines of their own: chunking puts a blank line between each
    frontmatter = "---\ntitle: Long\n---\n"
    fits = "word " * ((MAX_CONTENT_BYTES - len(rules) - 100) // 5) + "\n\n" + rules
    over = "word " * ((MAX_CONTENT_BYTES - len(rules) + 100) // 5) + "\n\n" + rules
    assert len(fits) <= MAX_CONTENT_BYTES < len(over)
    folder = tmp_path / "vault"
    folder.mkdir()
    (folder / "fits.md").write_text(frontmatter + fits)
    (folder / "over.md").write_text(frontmatter + over)
    conn = brain_sql.connect(tmp_path / "brain.db")
    report = brain_sql.ingest(conn, [folder])
    assert [(e.path.rsplit("/", 1)[-1], e.message) for e in report.errors] == [
        ("over.md", f"content is {len(over):,} bytes; the limit is {MAX_CONTENT_BYTES:,} (1 MB)")
    ]
    assert rows(conn, "select distinct title from knowledge") == [("Long",)]


@pytest.mark.asyncio
async def test_remember_of_a_record_making_too_many_memories_is_a_400_naming_the_limit(tmp_path):
    """Over HTTP and MCP, before any of its chunks is read or embedded; nothing is stored."""
    path = tmp_path / "brain.db"
    conn = brain_sql.connect(path)
    brain_sql.migrate(conn)
    conn.close()
    datasette = Datasette([str(path)], metadata={"plugins": {"datasette-brain": {"allow_write": True}}})
    record = {"_id": "many", "_chunks": TOO_MANY}
    response = await datasette.client.post("/brain/-/remember", json=record)
    assert response.status_code == 400 and LIMIT in response.text, response.text[:500]
    server = MCPServer("test")
    mcp_tools.register(datasette, server)
    async with Client(server) as client:
        result = await client.call_tool("brain_remember", {"records": [record]})
    assert result.is_error and result.structured_content["status"] == 400 and LIMIT in str(result.content), result
    assert rows(brain_sql.connect(path), "select count(*) from knowledge") == [(0,)]
