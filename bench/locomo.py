"""Conversations: turn- and session-level recall, per question category.

    python3 bench/locomo.py [--data ../shared/data/locomo-dev] [--work DIR] [--modes full,no_graph] [--shift-years N]
                            [--rename OLD=NEW,...]

Each conversation (a folder holding a BEIR `corpus.jsonl` of turns, `queries.jsonl`
and `qrels/test.tsv`, as `locomo-dev/conv-26`; --data may name one or a folder of
them) is ingested as `brain ingest` does, into --work (kept and reused when given:
give a fresh one after changing the ingest), and every judged question is recalled
as `brain eval` recalls it (k 10, no cut-off). For each mode and question category
(LoCoMo's, from the id's `-c<N>`: 1 multi-hop, 2 temporal, 3 open-domain/inference,
4 single-hop) it prints:

- turn Recall@5 and @10: the share of a question's evidence turns among the first
  5 / 10 hits (all of them are needed: a multi-hop question scores 1 only with
  every turn it rests on), averaged over the questions;
- session Recall@5 and @10, the figure other memory systems publish: the share of
  questions one of whose evidence sessions is among the sessions of the first
  5 / 10 hits (a turn's session is its record's `session_id`, `conversation_id` or
  `thread_id`).

`--shift-years N` measures each conversation moved N years (its turns' times, the
years its turns and questions name; Feb 29 becomes Feb 28): the temporal handling
must not depend on the year a conversation was held, as conversations you do not
see were held in others. `--rename OLD=NEW,...` measures each conversation with its
people called otherwise (whole words, in its turns, titles, speakers and questions):
recall must not depend on who the speakers are.

Conversations are weighed by their questions. Each conversation's per-query file
(`brain eval --per-query`'s lines) is written to --work, so two runs compare query by
query with `python3 bench/compare.py A.jsonl B.jsonl`.
"""

import argparse
import datetime
import json
import re
import sys
import tempfile
from pathlib import Path

import brain_sql
from brain_sql.conversation import SESSION_KEYS
from brain_sql.evaluation import MODES, evaluate

ROOT = Path(__file__).resolve().parent.parent
CATEGORIES = {"1": "multi-hop", "2": "temporal", "3": "inference", "4": "single-hop"}
FIGURES = ("turn@5", "turn@10", "session@5", "session@10")


def conversations(data):
    """The conversation folders under `data` (itself, when it is one), sorted."""
    if (data / "corpus.jsonl").exists():
        return [data]
    return sorted(folder for folder in data.iterdir() if (folder / "corpus.jsonl").exists())


def sessions(corpus):
    """{corpus id: its session} of the turns of a corpus.jsonl."""
    found = {}
    with open(corpus, encoding="utf-8") as lines:
        for record in map(json.loads, filter(str.strip, lines)):
            session = next((record[key] for key in SESSION_KEYS if record.get(key) is not None), None)
            if session is not None:
                found[str(record["_id"])] = str(session)
    return found


def category(query_id):
    """A LoCoMo question's category from its id ('conv-26-q3-c1': '1'), None for none."""
    match = re.search(r"-c(\d+)$", query_id)
    return match.group(1) if match else None


def figures(line, mode, session_of):
    """{figure: value} of one question's per-query line in `mode`."""
    ranked, judged = line["ranked"][mode], set(line["judged"])
    wanted = {session_of.get(turn) for turn in judged} - {None}
    values = {}
    for k in (5, 10):
        values[f"turn@{k}"] = len(judged & set(ranked[:k])) / len(judged) if judged else 0.0
        values[f"session@{k}"] = float(bool(wanted & {session_of.get(turn) for turn in ranked[:k]}))
    return values


_YEAR = re.compile(r"\b(?:19|20)\d\d\b")


def _moved(moment, years):
    """A datetime `years` later (earlier when negative); Feb 29 to Feb 28 where the year has none."""
    try:
        return moment.replace(year=moment.year + years)
    except ValueError:
        return moment.replace(year=moment.year + years, day=28)


def _copy(folder, copy, question, record):
    """The conversation `folder` copied to `copy`, each query's text through
    question(text) and each corpus record through record(dict)."""
    (copy / "qrels").mkdir(parents=True, exist_ok=True)
    (copy / "qrels" / "test.tsv").write_text(
        (folder / "qrels" / "test.tsv").read_text(encoding="utf-8"), encoding="utf-8"
    )
    for name, change in (("queries.jsonl", lambda q: {**q, "text": question(q["text"])}), ("corpus.jsonl", record)):
        with open(folder / name, encoding="utf-8") as lines, open(copy / name, "w", encoding="utf-8") as out:
            for line in map(json.loads, filter(str.strip, lines)):
                out.write(json.dumps(change(line)) + "\n")
    return copy


def shifted(folder, years, work):
    """A copy of the conversation `folder` under `work`, held `years` later: each turn's
    time and the time in its title moved, and every year its turns and questions name."""

    def later(text):
        return _YEAR.sub(lambda match: str(int(match.group()) + years), text)

    def record(turn):
        if turn.get("observed_at"):
            old = turn["observed_at"]
            new = _moved(datetime.datetime.fromisoformat(old), years).isoformat()
            turn = {**turn, "observed_at": new, "title": turn.get("title", "").replace(old, new)}
        return {**turn, "text": later(turn.get("text", ""))}

    return _copy(folder, work / f"shifted{years:+d}" / folder.name, later, record)


def renamed(folder, names, work):
    """A copy of the conversation `folder` under `work` whose people are called
    otherwise: `names` {old: new} replaced as whole words in its questions and in
    each turn's text, title and speaker."""
    pattern = re.compile(r"\b(?:" + "|".join(map(re.escape, sorted(names, key=len, reverse=True))) + r")\b")

    def rename(text):
        return pattern.sub(lambda match: names[match.group()], text)

    def record(turn):
        return {**turn, **{key: rename(turn[key]) for key in ("text", "title", "speaker") if turn.get(key)}}

    label = "renamed-" + "-".join(names.values())
    return _copy(folder, work / label / folder.name, rename, record)


def measure(folder, work):
    """([(category, {mode: {figure: value}})] of each judged question, the per-query
    file) of one conversation, its brain ingested into `work` once."""
    path = work / f"{folder.name}.db"
    fresh = not path.exists()
    conn = brain_sql.connect(path)
    if fresh:
        brain_sql.ingest(conn, [folder / "corpus.jsonl"])
    per_query = work / f"{folder.name}.jsonl"
    evaluate(conn, folder / "queries.jsonl", folder / "qrels/test.tsv", per_query=per_query)
    session_of = sessions(folder / "corpus.jsonl")
    with open(per_query, encoding="utf-8") as lines:
        rows = [
            (category(line["query_id"]), {mode: figures(line, mode, session_of) for mode in MODES})
            for line in map(json.loads, filter(str.strip, lines))
        ]
    return rows, per_query


def table(rows, modes):
    """{mode: {category or 'all': {figure: mean, 'questions': n}}}."""
    result = {}
    for mode in modes:
        groups = {"all": [values[mode] for _, values in rows]}
        for name in sorted({c for c, _ in rows if c is not None}):
            groups[name] = [values[mode] for c, values in rows if c == name]
        result[mode] = {
            CATEGORIES.get(name, name): {
                "questions": len(group),
                **{figure: round(sum(v[figure] for v in group) / len(group), 3) for figure in FIGURES},
            }
            for name, group in groups.items()
            if group
        }
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(ROOT.parent / "shared/data/locomo-dev"))
    parser.add_argument("--work", help="where the brains and per-query files go (default: a new temporary folder)")
    parser.add_argument("--modes", default="full,no_graph,vector,fts,graph")
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON object")
    parser.add_argument("--shift-years", type=int, default=0, help="measure each conversation held N years later")
    parser.add_argument(
        "--rename", default="", help="OLD=NEW,...: measure each conversation with its people called otherwise"
    )
    args = parser.parse_args()
    modes = [mode for mode in args.modes.split(",") if mode]
    unknown = [mode for mode in modes if mode not in MODES]
    if unknown:
        parser.error(f"unknown modes {', '.join(unknown)}: choose among {', '.join(MODES)}")
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="brain-locomo-"))
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    names = dict(pair.split("=", 1) for pair in args.rename.split(",") if pair)
    for folder in conversations(Path(args.data)):
        copied = bool(args.shift_years or names)
        if args.shift_years:
            folder = shifted(folder, args.shift_years, work)
        if names:
            folder = renamed(folder, names, folder.parent.parent if args.shift_years else work)
        found, per_query = measure(folder, folder.parent if copied else work)
        rows += found
        with open(per_query, encoding="utf-8") as lines:
            abstained = sum(json.loads(line)["abstained"] for line in lines if line.strip())
        print(f"{folder.name}: {len(found)} questions, {abstained} abstained, per query: {per_query}", file=sys.stderr)
    result = table(rows, modes)
    if args.json:
        print(json.dumps(result))
        return
    for mode, groups in result.items():
        print(f"{mode:10s} {'questions':>9s} " + " ".join(f"{figure:>10s}" for figure in FIGURES))
        for name, values in groups.items():
            print(f"  {name:10s} {values['questions']:7d} " + " ".join(f"{values[f]:10.3f}" for f in FIGURES))


if __name__ == "__main__":
    main()
