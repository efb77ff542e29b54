"""`sqlite-utils brain check`: every inconsistency found, and repaired from knowledge.
Ingest killed mid-write is tested in test_check.py."""

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

