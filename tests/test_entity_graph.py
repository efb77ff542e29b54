"""The read state's entity graph: its local walk scores every node as Personalized
PageRank's power iteration over the whole visible graph does (a matrix over every
node, as the graph leg once built per write), and its name index finds in a
query what an Aho-Corasick automaton of every name finds."""

import random

import numpy as np
import pytest

import brain_sql
from brain_sql import entity_graph, mentions, slots, state
from brain_sql.config import MENTION_MIN_CHARS, PPR_DAMPING, PPR_THETA
from brain_sql.entity_graph import MAX_ITERATIONS, TOLERANCE, Walk

from .conftest import VAULT, write


def reference_ties(graph, visible):
    """(node visible, introduced, and per live tie: its ends, weight, whether seen,
    mention, edge ends) over every node and tie at once: the walk's definitions."""
    nodes, ties = graph.nodes, graph.ties
    node_visible = nodes.live.copy()
    is_chunk = nodes.chunk >= 0
    node_visible[is_chunk] &= visible[nodes.chunk[is_chunk]]
    alive = ties.live & nodes.live[ties.a] & nodes.live[ties.b]
    a, b, weight, owner, mention, edge_a, edge_b = (
        ties.arrays[name][: ties.size][alive] for name in ("a", "b", "weight", "owner", "mention", "edge_a", "edge_b")
    )
    seen = node_visible[a] & node_visible[b] & ((owner < 0) | node_visible[np.maximum(owner, 0)])
    introduced = is_chunk.copy()
    introduced[a[seen & ~mention]] = True
    introduced[b[seen & ~mention]] = True
    return node_visible, introduced, (a, b, weight, seen, mention, edge_a, edge_b)


def reference_rank(graph, visible, seeds, damping=PPR_DAMPING):
    """PPR over every node with a dense transition matrix: the walk's definition."""
    n = graph.nodes.size
    node_visible, introduced, (a, b, weight, seen, mention, edge_a, edge_b) = reference_ties(graph, visible)
    node_visible &= introduced
    keep = seen & (~mention | (introduced[np.maximum(edge_a, 0)] & introduced[np.maximum(edge_b, 0)]))
    source, target = np.concatenate([a[keep], b[keep]]), np.concatenate([b[keep], a[keep]])
    weight = np.concatenate([weight[keep], weight[keep]])
    degree = np.bincount(source, minlength=n)
    weight = weight * np.minimum(1.0, PPR_THETA / np.maximum(degree[target], 1))
    out = np.bincount(source, weights=weight, minlength=n)
    transition = np.zeros((n, n))
    np.add.at(transition, (target, source), weight / out[source])
    restart = np.zeros(n)
    for node, value in seeds.items():
        if node_visible[node]:
            restart[node] += value
    if restart.sum() <= 0:
        return np.zeros(n)
    restart /= restart.sum()
    scores, dangling = restart.copy(), out == 0
    for _ in range(MAX_ITERATIONS):
        updated = (1 - damping) * restart + damping * (transition @ scores + scores[dangling].sum() * restart)
        converged = np.abs(updated - scores).sum() < TOLERANCE
        scores = updated
        if converged:
            break
    return scores


def linked_brain(tmp_path, seed):
    """Notes that name and link each other, in several scopes, some flagged."""
    rng = random.Random(seed)
    folder = tmp_path / "notes"
    people = [f"Person {i}" for i in range(6)]
    for i in range(30):
        links = " ".join(
            f"[[{rng.choice(['owned_by', 'works_with', 'tagged_with'])}::{rng.choice(people)}]]"
            for _ in range(rng.randrange(3))
        )
        names = " ".join(rng.sample(people + [f"Note {j}" for j in range(30)], 3))
        scope = rng.choice(["/", "/acme", "/acme/support", "/other"])
        write(folder / f"Note {i}.md", f"---\nscope: {scope}\n---\n# Note {i}\n\nAbout {names}. {links}\n")
    conn = brain_sql.connect(tmp_path / "brain.db")
    brain_sql.ingest(conn, [folder, VAULT])
    conn.execute("update knowledge set flagged = 1 where id % 7 = 0")
    return conn


@pytest.mark.parametrize("seed", [1, 2])
def test_the_local_walk_scores_as_the_whole_graph_does(tmp_path, seed):
    conn = linked_brain(tmp_path, seed)
    current = state.current(conn, 256)
    rng = random.Random(seed)
    graph, chunks = current.graph, current.chunks
    scopes = [None, ("/", "/acme"), ("/", "/acme", "/acme/support"), ("/", "/other")]
    with current.lock:
        for _ in range(12):
            visible = chunks.rows.live & (chunks.rows.flagged == 0)
            scope = rng.choice(scopes)
            if scope:
                codes = [chunks.codes["scope"][s] for s in scope if s in chunks.codes["scope"]]
                visible &= np.isin(chunks.rows.scope, codes)
            live_nodes = np.flatnonzero(graph.nodes.live)
            seeds = {int(n): rng.random() for n in rng.sample(live_nodes.tolist(), rng.randrange(1, 6))}
            nodes, scores = Walk(graph, visible).rank(seeds)
            expected = reference_rank(graph, visible, seeds)
            found = np.zeros(graph.nodes.size)
            found[nodes] = scores
            assert np.allclose(found, expected, atol=1e-9), (seeds, np.abs(found - expected).max())


def reference_chunk_degree(graph, visible, nodes):
    """Per node, the distinct visible chunks of other documents tied to it by ties
    the walk keeps, from the reference's ties."""
    _, introduced, (a, b, _, seen, mention, edge_a, edge_b) = reference_ties(graph, visible)
    keep = seen & (~mention | (introduced[np.maximum(edge_a, 0)] & introduced[np.maximum(edge_b, 0)]))
    counts = []
    for node in nodes:
        others = set(b[keep & (a == node)].tolist()) | set(a[keep & (b == node)].tolist())
        slots = [int(graph.nodes.chunk[o]) for o in others if graph.nodes.chunk[o] >= 0]
        counts.append(int((graph.doc_nodes(np.array(slots, dtype=np.int64)) != node).sum()) if slots else 0)
    return np.array(counts)


@pytest.mark.parametrize("first", [1, 2, 8])
def test_an_entity_is_introduced_by_any_tie_a_visible_chunk_stated(tmp_path, monkeypatch, first):
    """The walk looks at the first ties of an entity first (the speaker of half a
    long conversation has 10^5 to 10^6) and reads the rest only when none of those
    settles it: whichever the number, over an index that writes have made stale
    (ties added since, ties dead), it finds the entities the reference finds, and
    chunk_degree counts what the reference counts and keeps the degree `degree`
    counts, whole or in runs of as many ties towards a cap."""
    monkeypatch.setattr(entity_graph, "INTRODUCED_FIRST", first)
    monkeypatch.setattr(entity_graph, "COUNT_BLOCK", first)  # a node's ties counted towards a cap in runs
    conn = linked_brain(tmp_path, 3)
    state.current(conn, 256)
    notes = [
        {"id": f"late-{i}", "title": f"Late {i}", "text": f"Person {i} met Person {i + 1} and Note {i}."}
        for i in range(5)
    ]
    brain_sql.remember(conn, notes)
    brain_sql.forget(conn, ids=[row[0] for row in conn.execute("select id from knowledge order by id limit 4")])
    current = state.current(conn, 256)
    graph, chunks = current.graph, current.chunks
    assert graph.recent_ties and not graph.ties.live[: graph.ties.size].all()  # the index is stale
    rng = random.Random(first)
    entities = np.flatnonzero(graph.nodes.live & (graph.nodes.chunk < 0))
    chunk_nodes = np.flatnonzero(graph.nodes.live & (graph.nodes.chunk >= 0))[:5]
    assert max(len(graph.incident([node])[0]) for node in entities) > first  # some are cut
    settled_late = 0
    with current.lock:
        for scope in [None, ("/",), ("/", "/acme"), ("/", "/other"), ("/acme/support",)]:
            visible = chunks.rows.live & (chunks.rows.flagged == 0)
            if scope:
                codes = [chunks.codes["scope"][s] for s in scope if s in chunks.codes["scope"]]
                visible &= np.isin(chunks.rows.scope, codes)
            _, expected, _ = reference_ties(graph, visible)
            walk = Walk(graph, visible)
            order = np.array(rng.sample(entities.tolist(), len(entities)))
            assert (walk.introduced(order) == expected[order]).all()
            settled_late += int((expected[entities] & ~walk._stated(entities, first)).sum())
            nodes = np.concatenate([order, order[:5], chunk_nodes])  # repeated nodes and chunks too
            counted = Walk(graph, visible)
            counted.degree(order[:3])  # some degrees known before
            np.testing.assert_array_equal(counted.chunk_degree(nodes), reference_chunk_degree(graph, visible, nodes))
            np.testing.assert_array_equal(counted.degree(nodes), Walk(graph, visible).degree(nodes))
            for node, expected_count in zip(nodes, reference_chunk_degree(graph, visible, nodes)):
                degree = Walk(graph, visible).degree([node])[0]
                for cap in range(expected_count + 2):  # counted until over the cap, then only that is known
                    capped = Walk(graph, visible)
                    count = capped.chunk_degree([node], cap=cap)[0]
                    assert count == expected_count if expected_count <= cap else count > cap
                    if expected_count <= cap:  # every tie read: the degree is kept, as the whole count keeps it
                        assert capped._degree[node] == degree + 1
                    assert capped.degree([node])[0] == degree
            for after in [0, 1, first, 3]:  # a node's ties in runs: each node's, whichever the others
                together = graph.incident(nodes, first=after + first, after=after)
                for at, node in enumerate(nodes):
                    alone = graph.incident([node], first=after + first, after=after)
                    np.testing.assert_array_equal(together[1][together[0] == at], alone[1])
                    np.testing.assert_array_equal(together[2][together[0] == at], alone[2])
    if first == 1:
        assert settled_late > 0  # some were introduced only by a tie after their first
    # an entity node dead (its last memory gone) is judged dead in the one pass too
    dead = graph.nodes.arrays["live"].copy()
    dead[entities[0]] = False
    monkeypatch.setitem(graph.nodes.arrays, "live", dead)
    with current.lock:
        visible = chunks.rows.live & (chunks.rows.flagged == 0)
        every = np.arange(graph.nodes.size)
        once = Walk(graph, visible).node_visible(np.concatenate([every, every]))
        assert not once[entities[0]]
        np.testing.assert_array_equal(once, np.concatenate([Walk(graph, visible).node_visible(every)] * 2))


def test_a_common_speaker_is_settled_by_its_first_ties(tmp_path, monkeypatch):
    """Naming a speaker of half a conversation (tied to more visible turns than
    COMMON_TERM_SHARE of them) reads its ties a run at a time and stops once it is
    common: the same names as when every tie is read, and its degree, which a
    whole count keeps for the walk, never counted."""
    import json

    from brain_sql import graph as graph_leg

    turns = [
        {"_id": f"t{i}", "speaker": ("Mel", "Cy")[i % 2], "session_id": "s", "text": f"Turn {i} of the walk."}
        for i in range(40)
    ]
    conn = brain_sql.connect(tmp_path / "chat.db")
    assert not brain_sql.ingest(conn, [write(tmp_path / "chat.jsonl", "\n".join(map(json.dumps, turns)) + "\n")]).errors
    current = state.current(conn, 256)
    graph = current.graph
    mel = graph.entity_node(conn.execute("select id from entities where name = 'Mel'").fetchone()[0])
    visible = current.chunks.rows.live & (current.chunks.rows.flagged == 0)
    text = "What did Mel say about the walk?"
    with current.lock:
        whole, capped = Walk(graph, visible), Walk(graph, visible)
        named = graph_leg.naming(current, whole, text)
        monkeypatch.setattr(entity_graph, "COUNT_BLOCK", 2)
        assert graph_leg.naming(current, capped, text) == named
    assert mel not in [node for _, node in named]
    assert whole._degree[mel] > 0 and capped._degree[mel] == 0


@pytest.mark.parametrize("seed", range(6))
def test_distinct_values_and_counts_are_np_uniques(seed):
    """The walk's distinct nodes (a mark per node when they are many, a sort when few)
    and distinct chunks per node (a stamp per chunk) are np.unique's, whether the
    groups are in order or not, empty, or one; a stamp left by an earlier group is
    never read as this one's."""
    rng = np.random.default_rng(seed)
    size = int(rng.integers(1, 400))
    for n in [0, 1, 5, size // 8, size, 4 * size]:
        values = rng.integers(0, size, n)
        np.testing.assert_array_equal(slots.distinct(values, size), np.unique(values))
        for count in [1, 2, 7]:
            groups = rng.integers(0, count, n)
            expected = [len(np.unique(values[groups == g])) for g in range(count)]
            np.testing.assert_array_equal(slots.distinct_counts(groups, values, count, size), expected)


@pytest.mark.parametrize("shapes", ["kept", "made", "made from a snapshot"])
def test_names_are_found_as_an_automaton_of_every_name_finds_them(tmp_path, shapes, monkeypatch):
    """Whole names, longest first, as an automaton of every name key finds them: the
    spans tried only where a key's first and last characters and length stand (their
    shapes, kept as names are added, or made from the names where a snapshot saved
    before they were kept holds none)."""
    conn = linked_brain(tmp_path, 3)
    brain_sql.remember(
        conn,
        [
            {"title": "Mark King (musician)", "text": "bass", "entities": ["O'Neil & Sons", "ß-Team"]},
            {"title": "Dana Whitfield", "text": "owns the runbook", "entities": [".NET", "C++", "!!!", "(Ab)"]},
            {"title": "Straße İzmir", "text": "a road", "entities": ["ﬁsh ﬂy", "ΣΊΣΥΦΟΣ (myth)", "ab)"]},
        ],
    )
    current = state.current(conn, 256)
    if shapes == "made from a snapshot":  # the names read in bulk from the snapshot's text
        monkeypatch.setattr(state, "SNAPSHOT_MIN_CHUNKS", 1)
        current.save(str(tmp_path / "brain.db-brainstate"), str(tmp_path / "brain.db"))
        state._states.clear()
        conn = brain_sql.connect(tmp_path / "brain.db")
        brain_sql.remember(conn, [{"title": "Later Name", "text": "added after the snapshot"}])
        conn.execute("update entities set name = 'Renamed Person' where name = 'Person 1'")
        current = state.current(conn, 256)
        assert len(current.graph.node_names.ends) > 0  # loaded, not built
    graph = current.graph
    if shapes != "kept":
        graph.names.shapes = graph.names.firsts = None
        live = graph.nodes.entity[graph.nodes.live & (graph.nodes.entity >= 0)].tolist()
        keys = [key for entity_id in live for key in graph._keys(entity_id)]
        assert graph._every_shape() == (
            {entity_graph._shape(k[0], k[-1], len(k)) for k in keys},
            {k[0] for k in keys},
        )
    named = {}
    for entity_id in graph.entity_ids().tolist():
        node = graph.entity_node(entity_id)
        name = graph.node_names[node]
        if not graph.nodes.tag[node] and len(name) >= MENTION_MIN_CHARS:
            for key in mentions.names_of(name):
                named.setdefault(key, []).append(entity_id)
    automaton = mentions.automaton_of(named)
    texts = [
        "who is mark king",
        "MARK KING (MUSICIAN) and dana whitfield",
        "o'neil & sons vs ß-team",
        "note 1 note 12",
        "person 3's notes about Note 2.",
        "nothing here",
        "person",
        "Dana Whitfield's note 7",
        "c++ and .net, !!! (ab) c++c++ .net. !!!! ((ab)) ,,,",
        "STRASSE izmir, straße İzmir, fish fly, σίσυφος (myth), Σίσυφος, ab), later name, renamed person",
        "!!!" * 40 + ",!!!, c++" * 30,
    ]
    for text in texts:
        with current.lock:
            found = graph.seed_entities(text)
        # the automaton's matches, longest first, non-overlapping, as the graph takes them
        spans = {}
        for start, end, target in mentions.spans(automaton, text):
            spans.setdefault((start, end), set()).add(target)
        taken, expected = [], set()
        for start, end in sorted(spans, key=lambda s: (-(s[1] - s[0]), s[0])):
            if not any(start < e and s < end for s, e in taken):
                taken.append((start, end))
                expected.add(graph.alias_target(min(spans[(start, end)])))
        assert found == sorted(expected), text


def test_a_text_of_punctuation_looks_up_no_name_no_key_has_the_shape_of(tmp_path, monkeypatch):
    """Every place of a text of punctuation starts and ends a word-bounded span: only
    spans with a key's first and last characters and length are looked up, not the
    millions of pairs up to the longest name (seconds a query, review 87)."""
    conn = linked_brain(tmp_path, 3)
    title = "A long title " + "x" * 480
    brain_sql.remember(conn, [{"title": title, "text": "t", "entities": ["C++", ".NET"]}])
    current = state.current(conn, 256)
    graph, looked_up = current.graph, []
    named = graph.named
    monkeypatch.setattr(graph, "named", lambda key: looked_up.append(key) or named(key))
    with current.lock:
        for text in ("," * 2000, "\\" * 2000, "[[" * 1000):
            assert graph.seed_entities(text) == []
        assert looked_up == []
        assert len(graph.seed_entities("c++ " * 500)) == 1
        assert len(looked_up) == 500  # each "c++": the one span of a key's shape there
        assert graph.seed_entities(title.upper() + ", " + "," * 1000) != []


def test_a_bare_word_is_one_word_in_any_script(tmp_path):
    """A bare word (seed_spans) is one word an entity writes only before its
    disambiguator, whatever its letters: "İzmir" casefolds to an i and a combining
    dot, still one word."""
    conn = linked_brain(tmp_path, 1)
    brain_sql.remember(
        conn,
        [
            {"title": "İzmir (city)", "text": "a port on the Aegean"},
            {"title": "Mark King (musician)", "text": "bass"},
        ],
    )
    current = state.current(conn, 256)
    with current.lock:
        assert [bare for _, _, bare in current.graph.seed_spans("What is in İzmir?")] == [True]
        assert [bare for _, _, bare in current.graph.seed_spans("Who is Mark King?")] == [False]
        # an emoji's variation selector after a name ends its word (review 63)
        assert [bare for _, _, bare in current.graph.seed_spans("Who is Mark King\ufe0f?")] == [False]
