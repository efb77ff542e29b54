"""Splitting text into chunks under a size cap, with the lines each chunk spans."""

from hypothesis import given, settings
from hypothesis import strategies as st

from brain_sql.chunk import _cut, _last_boundary, line_ends, pack, paragraphs, split_text
from brain_sql.config import CHUNK_MAX_CHARS
from brain_sql.markdown import parse_markdown


def spans(chunks):
    return [(c.content, c.line_start, c.line_end) for c in chunks]


def test_paragraphs_are_blank_line_separated_blocks_with_their_first_line():
    text = "\n\nfirst\nstill first\n\n\n\nsecond\n \t\nthird\n"
    assert list(paragraphs(text)) == [("first\nstill first", 3), ("second", 8), ("third", 10)]


def test_paragraphs_count_lines_from_first_line():
    assert list(paragraphs("a\n\nb", first_line=10)) == [("a", 10), ("b", 12)]


def test_whitespace_only_text_has_no_paragraphs_or_chunks():
    assert list(paragraphs(" \n\n\t\n")) == []
    assert split_text(" \n\n\t\n") == []


def test_short_paragraphs_pack_into_one_chunk_spanning_their_lines():
    chunks = split_text("one\n\ntwo\nthree\n\n\nfour", first_line=5, heading_path="Intro")
    assert spans(chunks) == [("one\n\ntwo\nthree\n\n\nfour", 5, 11)]
    assert chunks[0].heading_path == "Intro"


def test_paragraphs_pack_while_they_fit_with_the_blank_lines_between():
    assert spans(pack([("a" * 10, 1), ("b" * 5, 3)], max_chars=17)) == [("a" * 10 + "\n\n" + "b" * 5, 1, 3)]
    assert spans(pack([("a" * 10, 1), ("b" * 5, 3)], max_chars=16)) == [("a" * 10, 1, 1), ("b" * 5, 3, 3)]
    assert spans(pack([("a" * 10, 1), ("b" * 5, 4)], max_chars=18)) == [("a" * 10 + "\n\n\n" + "b" * 5, 1, 4)]


def test_a_text_that_fits_in_a_chunk_is_stored_as_written():
    """Indentation, trailing spaces and the count of blank lines are meaning in code,
    YAML and Markdown: a chunk keeps them (only blank lines at the text's ends, and
    the spaces on a blank line, are not kept)."""
    for text in ("def f():\n    x = 1\n\n    return x", "a:\n  b: 1\n\n  c: 2", "x  \n\n\n  y\t", "    indented"):
        assert [c.content for c in split_text(text)] == [text]
    assert [c.content for c in split_text("\n \nbody\n  \n\nmore\n\n")] == ["body\n\n\nmore"]


def test_a_text_written_with_crlf_keeps_them_on_its_blank_lines():
    """A blank line's CR is its line end, not a space on it: dropped, the text came
    back with CRLF and LF mixed (review 101)."""
    for text in ("line one\r\nline two\r\n\r\nline three", "a\r\n\r\n\r\nb", "a\r\n  \r\nb"):
        [chunk] = split_text(text)
        assert chunk.content == text.replace("  \r", "\r") and "\n\n" not in chunk.content
    # each line end as written (review 103: CRs were added from the line before, and a last one kept)
    for text, kept in [
        ("a\r\n\nb", "a\r\n\nb"),
        ("a\n\r\nb", "a\n\r\nb"),
        ("a\r\nb\r\n", "a\r\nb"),
        ("a\r\n\r\n", "a"),
    ]:
        assert [c.content for c in split_text(text)] == [kept]


@given(st.lists(st.sampled_from(["word", "two words", "", "  ", "\r", "  \r", "x\r", "y\r\r"]), max_size=12))
def test_a_text_that_fits_keeps_every_line_end_as_written(rows):
    """A text of CRLF and LF lines that fits in a chunk comes back as written, but
    for its blank lines' spaces and its blank lines at either end."""
    text = "\n".join(rows)
    written = [i for i, row in enumerate(rows) if row.strip()]
    if not written:
        assert split_text(text) == []
        return
    first, last = written[0], written[-1]
    lines = [row if row.strip() else "\r" * row.endswith("\r") for row in rows[first : last + 1]]
    if last < len(rows) - 1 and lines[-1].endswith("\r"):
        lines[-1] = lines[-1][:-1]  # the CR of the line end dropped after the text's last line
    expected = "\n".join(lines)
    assert [c.content for c in split_text(text)] == ([expected] if expected else [])


def test_a_cut_paragraph_keeps_its_indentation_and_drops_only_the_spaces_at_a_cut():
    assert [c.content for c in pack([("    aaaa. bb cc dd  ", 1)], max_chars=12)] == ["    aaaa.", "bb cc dd  "]


def test_long_paragraph_is_cut_after_a_sentence_end_before_a_space():
    assert [c.content for c in pack([("aaaa. bb cc dd", 1)], max_chars=12)] == ["aaaa.", "bb cc dd"]


def test_long_paragraph_without_sentence_ends_is_cut_at_a_space():
    assert [c.content for c in pack([("aaaa bbbb cccc", 1)], max_chars=10)] == ["aaaa bbbb", "cccc"]


def test_long_word_is_cut_hard():
    assert [c.content for c in pack([("a" * 25, 1)], max_chars=10)] == ["a" * 10, "a" * 10, "a" * 5]


def test_pieces_of_a_cut_paragraph_keep_their_own_lines():
    chunks = pack([("first line.\nsecond line.\nthird line here", 3)], max_chars=20)
    assert spans(chunks) == [("first line.", 3, 3), ("second line.", 4, 4), ("third line here", 5, 5)]


def test_split_text_honours_the_configured_cap():
    text = "word " * (CHUNK_MAX_CHARS // 2) + "\n\n" + "x" * (CHUNK_MAX_CHARS + 1)
    chunks = split_text(text)
    assert len(chunks) >= 3
    assert all(len(c.content) <= CHUNK_MAX_CHARS for c in chunks)
    assert max(len(c.content) for c in chunks) == CHUNK_MAX_CHARS


def non_space_with_lines(text, first_line):
    """(character, line) for every non-whitespace character of text, in order."""
    out, line = [], first_line
    for ch in text:
        if ch == "\n":
            line += 1
        elif not ch.isspace():
            out.append((ch, line))
    return out


@given(
    text=st.text(alphabet="ab.!? \t\n", max_size=200),
    max_chars=st.integers(1, 30),
    first_line=st.integers(1, 5),
)
def test_chunks_fit_the_cap_keep_every_character_and_name_their_lines(text, max_chars, first_line):
    chunks = pack(paragraphs(text, first_line), max_chars=max_chars)
    assert all(0 < len(c.content) <= max_chars for c in chunks)
    expected = non_space_with_lines(text, first_line)
    assert "".join(ch for c in chunks for ch in c.content if not ch.isspace()) == "".join(ch for ch, _ in expected)
    position = 0
    for chunk in chunks:
        count = sum(not ch.isspace() for ch in chunk.content)
        assert chunk.line_start == expected[position][1]
        assert chunk.line_end == expected[position + count - 1][1]
        position += count


class CountingText(str):
    """Text that counts the characters its count() scans: the work of finding the
    lines a piece starts on."""

    scanned = 0

    def count(self, sub, start=0, end=None):
        end = len(self) if end is None else end
        CountingText.scanned += max(end - start, 0)
        return super().count(sub, start, end)


def test_cutting_a_long_paragraph_scans_its_text_a_bounded_number_of_times():
    """Chunking is linear in the text: the lines of each piece are counted on from
    the last piece's, not from the paragraph's start (a 60 MB record once took minutes)."""
    text = ("word " * 99 + "end.\n") * 2_000  # 1 MB, one paragraph, cut into ~500 pieces
    CountingText.scanned = 0
    chunks = pack([(CountingText(text), 1)])
    assert len(chunks) > 400
    assert CountingText.scanned <= 2 * len(text)


def old_cut_spans(body, start, max_chars):
    """The pieces and line spans of the cut with each line counted from the
    paragraph's start, as it did before it counted lines as it went: the reference.
    Only the spaces at a cut are dropped (the paragraph's own first and last kept, and
    the indentation of a piece that starts a line)."""
    spans_, pos = [], 0
    while pos < len(body):
        end = min(len(body), pos + max_chars)
        if end < len(body):
            end = pos + (_last_boundary(body[pos:end]) or max_chars)
        piece = body[pos:end]
        text = piece
        if pos:
            text = (text if body[pos - 1] == "\n" else text.lstrip(" \t")).lstrip("\r\n")
        first = start + body.count("\n", 0, pos + len(piece) - len(text))
        text = text.rstrip() if end < len(body) else text
        if text.strip():
            spans_.append((text, first, first + text.count("\n")))
        pos = end
    return spans_


@given(
    text=st.text(alphabet="ab.!? \t\r\n", max_size=300),
    max_chars=st.integers(1, 40),
    first_line=st.integers(1, 5),
)
def test_pieces_keep_the_lines_they_had(text, max_chars, first_line):
    assert _cut(text, first_line, max_chars) == old_cut_spans(text, first_line, max_chars)


def test_pieces_of_long_lines_and_crlf_text_keep_the_lines_they_had():
    texts = [
        "a" * 5_000 + "\r\n" + "b. " * 2_000 + "\r\n\r\n" + "c" * 3,
        ("line of words. " * 300 + "\r\n") * 5,
        "x" * 9_000,
        "\r\n".join("short line." for _ in range(800)),
    ]
    for text in texts:
        assert _cut(text, 3, CHUNK_MAX_CHARS) == old_cut_spans(text, 3, CHUNK_MAX_CHARS)


def test_code_over_the_cap_is_cut_between_lines_and_keeps_its_indentation():
    """A block with no blank line and no sentence end (code) over CHUNK_MAX_CHARS was
    cut at its last space, mid-line, and the next piece lost its first line's
    indentation: read back, the pieces were other code. Now each is cut at a line end
    and keeps its lines as written."""
    code = "\n".join(f"    if value_{n} > limit:\n        total = total + value_{n} * weight" for n in range(80))
    chunks = split_text(code)
    assert len(chunks) > 1
    assert "\n".join(chunk.content for chunk in chunks) == code
    assert all(chunk.content.startswith("    ") for chunk in chunks)  # each piece starts a line, indented
    after_prose = "A sentence ends here.\n" + "  indented words " * 200  # cut after the sentence's line end
    pieces = split_text(after_prose)
    assert pieces[0].content == "A sentence ends here."
    assert pieces[1].content.startswith("  indented words") and pieces[1].line_start == 2


def test_a_line_of_one_long_word_keeps_its_indentation():
    """With no sentence end or line end to cut at, the last space of the window was
    the line's indentation (a base64 blob or a long URL in a code block): the piece of
    spaces was dropped and the line lost its indentation. Such a line is cut hard."""
    for text, first in (("x\n    " + "y" * 2500, 2), ("    " + "y" * 2500, 1)):
        pieces = split_text(text)
        assert pieces[first - 1].content.startswith("    y") and pieces[first - 1].line_start == first
        assert "".join(piece.content for piece in pieces) == text.replace("\n", "")  # nothing dropped


def test_a_long_code_block_is_cut_without_a_blank_line_inside_it():
    """A note's blocks are joined by a blank line; the pieces of one long block were
    too, once it was cut at a line end: a blank line appeared inside the code and the
    chunk's line span no longer matched its lines. And a sliver (the fence line alone)
    is not cut off before one long line: that line is cut at a space."""
    note = "Intro.\n\n```\n    " + ("x" * 15 + " ") * 137 + "\n```\n"
    [document] = list(parse_markdown("n.md", note))
    for chunk in document.chunks:
        assert "\n\n" not in chunk.content.split("```", 1)[-1]
        assert chunk.line_end - chunk.line_start == chunk.content.count("\n")
    assert document.chunks[0].content.startswith("Intro.\n\n```\n    xxx") and len(document.chunks) == 2


@settings(max_examples=500, deadline=None)
@given(
    st.lists(st.sampled_from(["a", "bb", "ccc", " ", "  ", ".", "!", "\n", "\n", "\t", "dddddddddd"]), max_size=120),
    st.integers(5, 40),
)
def test_a_crlf_text_counted_so_is_cut_as_its_lf_twin(parts, max_chars):
    """A note or text file counts a CRLF as one character of a chunk, so it is cut
    where its LF twin is, on the same lines (review 108, H4; review 109, H4: a line
    end's CR was counted in the half-window test, and a window starting with a CRLF
    was cut after it)."""
    lf = "".join(parts)
    crlf = lf.replace("\n", "\r\n")

    def chunks(text, crlf):
        found = pack(paragraphs(text), ends=line_ends(text), crlf=crlf, max_chars=max_chars)
        return [(c.line_start, c.line_end, c.content.replace("\r\n", "\n")) for c in found]

    twins = chunks(crlf, True)
    assert twins == chunks(lf, False)
    assert all(len(text) <= max_chars for _, _, text in twins)
