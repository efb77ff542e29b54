"""brain check: every inconsistency found, and repaired from knowledge; ingest
killed mid-write leaves nothing half-written and converges when run again."""

import subprocess
import sys
from pathlib import Path

import brain_sql
from brain_sql.consistency import check

from .conftest import VAULT


def test_check_finds_and_repairs(run, db_path):
    assert run("brain", "ingest", db_path, VAULT).exit_code == 0
    clean = run("brain", "check", db_path)
    assert clean.exit_code == 0 and "consistent" in clean.output
    conn = brain_sql.connect(db_path)
    conn.execute("delete from vec_knowledge where knowledge_id = 1")
    conn.execute(
        "insert into knowledge_fts(knowledge_fts, rowid, title, content, content_hash) "
        "select 'delete', id, title, content, content_hash from knowledge where id = 2"
    )
    conn.execute("update vec_knowledge set scope = '/elsewhere' where knowledge_id = 3")
    conn.execute("insert into relationships (from_entity_id, to_entity_id, relation_type) values (9999, 1, 'x')")
    conn.execute("update documents set chunks = chunks + 1 where rowid = 1")
    problems = check(conn)
    assert set(problems) == {"fts_out_of_sync", "missing_vectors", "stale_vector_filters", "dangling_edges",
                             "incomplete_documents"}  # fmt: skip
    found = run("brain", "check", db_path)
    assert found.exit_code == 1 and "memories without a vector: 1 (1)" in found.output
    repaired = run("brain", "check", db_path, "--repair")
    assert repaired.exit_code == 0 and "is now consistent" in repaired.output
    assert check(brain_sql.connect(db_path)) == {}
    hits = brain_sql.recall(brain_sql.connect(db_path), {"q": "what does the graph leg do", "scope": "/"})["hits"]
    assert hits[0]["title"] == "Graph Leg"  # the repaired filter column no longer hides a memory


def test_killed_ingest_converges(tmp_path):
    """bench/crash.py with 3 kills; run it by hand for 20 or more."""
    script = Path(__file__).resolve().parent.parent / "bench" / "crash.py"
    result = subprocess.run(
        [sys.executable, str(script), "--kills", "2", "--records", "1500", "--work", str(tmp_path)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 kills, 0 failed" in result.stdout
