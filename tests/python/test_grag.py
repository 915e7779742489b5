"""The Python package against the real engine: the book indexed without a model, questions,
search, entities, a scripted model over loopback HTTP, progress, cancellation, errors, pandas."""

import json
import math
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

import grag

QUESTION = "Who is Jacob Marley?"


def cli_json(grag_bin, root, *args):
    out = subprocess.run([grag_bin, "--root", root, "--no-llm", *args, "--json"],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


# ---------------------------------------------------------------- indexing without a model

def test_index_summary_and_progress(book_project):
    s = book_project["summary"]
    assert isinstance(s, grag.IndexSummary)
    assert s.documents.added == 1 and s.no_llm
    assert s.entities > 50 and s.relationships > 50
    assert s.to_dict()["documents"]["added"] == 1
    stages = [p.stage for p in book_project["progress"]]
    assert "load" in stages and "extract" in stages
    for p in book_project["progress"]:
        assert isinstance(p, grag.Progress)
        assert p.total == 0 or 0 <= p.done <= p.total


def test_reindex_unchanged_does_nothing(book_copy):
    s = grag.Engine(book_copy, no_llm=True).index()
    assert s.documents.unchanged == 1 and s.documents.added == 0
    assert s.chunks.extracted == 0


def test_dry_run_writes_nothing(book_copy, tmp_path):
    extra = tmp_path / "extra.txt"
    extra.write_text("Tiny Tim lived in London with Bob Cratchit.\n", encoding="utf-8")
    engine = grag.Engine(book_copy, no_llm=True)
    plan = engine.add([extra], dry_run=True)
    assert len(plan.documents.added) == 1 and plan.chunks_to_extract >= 1
    assert len(engine.documents()) == 1
    summary = engine.add(extra)
    assert summary.documents.added == 1
    ids = [d.id for d in engine.documents()]
    assert len(ids) == 2
    # The engine's questions see the new document at once.
    hits = engine.search("Tiny Tim Bob Cratchit London", k=20, method="bm25").chunks
    assert any(h.document_id != "christmas_carol.txt" for h in hits)
    other = next(i for i in ids if i != "christmas_carol.txt")
    engine.remove(other)
    assert [d.id for d in engine.documents()] == ["christmas_carol.txt"]


# ---------------------------------------------------------------- questions

def test_query_matches_cli(book_project, grag_bin):
    root = book_project["root"]
    engine = grag.Engine(root, no_llm=True)
    for method in ("local", "global", "hybrid"):
        py = engine.query(QUESTION if method != "global" else "What are the main themes?",
                          method=method)
        cli = cli_json(grag_bin, root, "query", "--method", method,
                       QUESTION if method != "global" else "What are the main themes?")
        assert isinstance(py, grag.QueryResult)
        assert py.method == cli["method"] == method
        assert py.answer == cli["answer"]
        assert py.to_dict()["citations"] == cli["citations"]


def test_query_auto_routes(book_project):
    r = grag.Engine(book_project["root"], no_llm=True).query("What are the main themes?")
    assert r.method == "global"
    assert r.route.method == "global" and r.route.reason
    assert not r.llm and r.answer


def test_search(book_project, grag_bin):
    engine = grag.Engine(book_project["root"], no_llm=True)
    r = engine.search(QUESTION, k=3)
    assert isinstance(r, grag.SearchResult)
    assert [h.rank for h in r.chunks] == [1, 2, 3]
    assert all("Marley" in h.text for h in r.chunks[:1])
    cli = cli_json(grag_bin, book_project["root"], "search", "--k", "3", QUESTION)
    assert [h.chunk_id for h in r.chunks] == [c["chunk_id"] for c in cli["chunks"]]
    bm25 = engine.search(QUESTION, k=2, method="bm25")
    assert len(bm25.chunks) == 2


@pytest.mark.parametrize("method", ["hybrid", "bm25", "vector", "graph"])
def test_search_objects_equal_the_engine_json(book_project, method):
    # search() builds its objects in C++ rather than parsing the engine's JSON: the same fields,
    # types and values (timings aside, which differ between two runs).
    engine = grag.Engine(book_project["root"], no_llm=True)
    for question in (QUESTION, "Scrooge Marley Fezziwig", "the"):
        objects = engine.search(question, k=10, method=method).to_dict()
        parsed = json.loads(engine._engine.search(question, 10, method, as_json=True))
        for r in (objects, parsed):
            r["stats"].pop("signal_ms")
            r["stats"].pop("total_ms")
        assert objects == parsed
        assert json.dumps(objects, sort_keys=True) == json.dumps(parsed, sort_keys=True)


def test_settings_by_name(book_project):
    root = book_project["root"]
    assert len(grag.Engine(root, no_llm=True, search__top_k=4).search(QUESTION).chunks) == 4
    assert len(grag.Engine(root, no_llm=True, **{"search.top_k": 2}).search(QUESTION).chunks) == 2
    settings = grag.Engine(root, no_llm=True, search__top_k=7).settings()
    assert settings["search.top_k"] == 7
    assert any(s.key == "search.top_k" for s in grag.settings_reference())


def test_route_states_cost(book_project):
    r = grag.Engine(book_project["root"], no_llm=True).route(QUESTION, "local")
    assert r.method == "local" and r.estimated_llm_calls == 0


def test_threads_share_an_engine(book_project):
    engine = grag.Engine(book_project["root"], no_llm=True)
    expected = [h.chunk_id for h in engine.search(QUESTION, k=5).chunks]
    results, errors = [], []

    def ask():
        try:
            for _ in range(5):
                results.append([h.chunk_id for h in engine.search(QUESTION, k=5).chunks])
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=ask) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert results == [expected] * 20


def test_gil_is_released_while_indexing(book_copy, tmp_path):
    # A Python thread keeps running while the engine indexes (the GIL is not held).
    (tmp_path / "more").mkdir()
    for i in range(20):
        (tmp_path / "more" / f"d{i}.txt").write_text(
            f"Document {i}. Scrooge met Fezziwig in London in the year 18{i:02d}.\n" * 40,
            encoding="utf-8")
    ticks = []
    stop = threading.Event()

    def tick():
        while not stop.is_set():
            ticks.append(1)
            time.sleep(0.001)

    t = threading.Thread(target=tick)
    engine = grag.Engine(book_copy, no_llm=True)
    t.start()
    before = len(ticks)
    engine.add(tmp_path / "more")
    during = len(ticks) - before
    stop.set()
    t.join()
    assert during > 0


# ---------------------------------------------------------------- the graph

def test_entities_and_entity(book_project):
    engine = grag.Engine(book_project["root"], no_llm=True)
    top = engine.entities(limit=5)
    assert len(top) == 5
    assert top[0].degree >= top[-1].degree
    scrooge = engine.entities("Scrooge", limit=None)
    assert any(e.name == "Scrooge" for e in scrooge)
    detail = engine.entity("Scrooge")
    assert detail.name == "Scrooge" and detail.neighbours
    by_id = engine.entity(detail.id)
    assert by_id.name == "Scrooge"
    assert isinstance(engine.aliases(), grag.Record)


def test_merge_and_split(book_copy):
    engine = grag.Engine(book_copy, no_llm=True)
    a, b = "Bob Cratchit", "Tiny Tim"
    assert engine.entity(a).id != engine.entity(b).id
    summary = engine.merge(a, b)
    assert isinstance(summary, grag.IndexSummary)
    assert engine.entity(a).id == engine.entity(b).id
    assert engine.split(a, b) is not None
    assert engine.entity(a).id != engine.entity(b).id


def test_stats_check_documents(book_project):
    engine = grag.Engine(book_project["root"], no_llm=True)
    stats = engine.stats(top_entities=3)
    assert stats.entities > 0 and len(stats.top_entities) == 3
    check = engine.check()
    assert check.ok, check.problems
    docs = engine.documents()
    assert [d.id for d in docs] == ["christmas_carol.txt"]
    assert "Marley" in engine.document("christmas_carol.txt").text
    rows = engine.sql("SELECT count(*) AS n FROM entities")
    assert rows[0]["n"] == stats.entities


def test_eval(book_project):
    engine = grag.Engine(book_project["root"], no_llm=True)
    seen = []
    report = engine.eval([{"question": QUESTION, "answers": ["Marley"]},
                          {"question": "Who is Tiny Tim's father?", "answers": ["Cratchit"]}],
                         methods=["hybrid"], k=5, progress=lambda d, t: seen.append((d, t)))
    assert report.questions == 2
    assert report.method_order == ["bm25", "hybrid"]
    assert report.methods["hybrid"].at_k["5"].answer_contained == 1.0
    assert seen[-1] == (2, 2)


# ---------------------------------------------------------------- errors

def test_errors_are_typed(book_project, tmp_path):
    root = book_project["root"]
    with pytest.raises(grag.InvalidArgument) as bad:
        grag.Engine(root, no_llm=True, search__top_k="many")
    assert isinstance(bad.value, ValueError) and bad.value.kind == "invalid_argument"
    assert "search.top_k" in str(bad.value)
    with pytest.raises(grag.InvalidArgument):
        grag.Engine(root, no_llm=True, no__such_setting=1)
    engine = grag.Engine(root, no_llm=True)
    with pytest.raises(grag.InvalidArgument):
        engine.query(QUESTION, method="psychic")
    with pytest.raises(grag.NotFound) as missing:
        engine.entity("Nobody At All In This Book")
    assert isinstance(missing.value, LookupError)
    with pytest.raises(grag.NotFound):
        engine.document("no-such-document")
    with pytest.raises(grag.InvalidArgument):
        engine.sql("DELETE FROM entities")
    empty = str(tmp_path / "empty")
    grag.Project.init(empty)
    with pytest.raises(grag.NotFound) as no_index:
        grag.Engine(empty, no_llm=True).query(QUESTION)
    assert "grag index" in str(no_index.value)
    out = tmp_path / "export"
    engine.export(out, "csv")
    with pytest.raises(grag.AlreadyExists):
        engine.export(out, "csv")
    engine.export(out, "csv", force=True)


def test_project_init(tmp_path):
    p = grag.Project.init(tmp_path / "p")
    assert any(f.endswith("grag.toml") for f in p.written)
    again = grag.Project.init(tmp_path / "p")
    assert not again.written and again.kept
    assert os.path.isdir(p.input_dir)


# ---------------------------------------------------------------- a model over loopback HTTP

def test_request_ranges_are_the_engines(book_project):
    engine = grag.Engine(book_project["root"], no_llm=True)
    for args in ({"k": 1001}, {"k": 0}, {"budget": 1001}, {"level": -1}):
        with pytest.raises(grag.InvalidArgument) as bad:
            engine.query(QUESTION, method="local", **args)
        assert "must be between" in str(bad.value)
    with pytest.raises(grag.InvalidArgument):
        engine.search(QUESTION, k=1001)


def test_query_with_scripted_model_streams(book_project, scripted_model):
    model = scripted_model(reply="Jacob Marley was Scrooge's late business partner [S1].")
    engine = grag.Engine(book_project["root"], llm__base_url=model.base_url,
                         llm__model="scripted", llm__api_key="k")
    pieces = []
    r = engine.query(QUESTION, method="basic", on_text=pieces.append)
    assert r.llm and r.method == "basic"
    assert r.answer.startswith("Jacob Marley was Scrooge's late business partner")
    assert "".join(pieces).strip() == r.answer.strip() or len(pieces) > 1
    asked = json.dumps(model.requests[-1])
    assert "Jacob Marley" in asked
    assert r.citations and r.citations[0].to_dict()


def test_query_chooses_its_model(book_project, scripted_model):
    model = scripted_model(reply="Jacob Marley was Scrooge's partner [S1].")
    engine = grag.Engine(book_project["root"], llm__base_url=model.base_url,
                         llm__model="scripted", llm__api_key="k")
    # Questions no other test asks: a cached answer would make no request to look at.
    before = len(model.requests)
    engine.query("Who is Fezziwig?", method="basic", model="a-cheaper-model")
    assert len(model.requests) > before
    assert model.requests[-1]["model"] == "a-cheaper-model"
    before = len(model.requests)
    engine.query("Who is Belle?", method="basic")
    assert len(model.requests) > before
    assert model.requests[-1]["model"] == "scripted"


def test_cancel_from_another_thread(book_copy, scripted_model, tmp_path):
    model = scripted_model(reply="not an extraction", delay=1.0)
    (tmp_path / "new").mkdir()
    for i in range(6):
        (tmp_path / "new" / f"n{i}.txt").write_text(
            f"Chapter {i}. Ebenezer Scrooge visited Belle in Camden Town.\n" * 30,
            encoding="utf-8")
    engine = grag.Engine(book_copy, llm__base_url=model.base_url, llm__model="scripted",
                         llm__api_key="k", llm__concurrency=1)
    timer = threading.Timer(0.5, engine.cancel)
    timer.start()
    with pytest.raises(grag.Cancelled):
        engine.add(tmp_path / "new")
    timer.join()
    # Nothing is damaged; a run without the model finishes the work.
    fresh = grag.Engine(book_copy, no_llm=True)
    assert fresh.check().ok
    assert fresh.index().documents.unchanged >= 1


def test_ctrl_c_interrupts_cleanly(book_copy, scripted_model, tmp_path):
    model = scripted_model(reply="not an extraction", delay=1.0)
    (tmp_path / "new").mkdir()
    for i in range(6):
        (tmp_path / "new" / f"n{i}.txt").write_text(
            f"Chapter {i}. Scrooge and Fred dined in London.\n" * 30, encoding="utf-8")
    script = f"""
import sys, grag
engine = grag.Engine({book_copy!r}, llm__base_url={model.base_url!r}, llm__model="scripted",
                     llm__api_key="k", llm__concurrency=1)
print("started", flush=True)
try:
    engine.add({str(tmp_path / "new")!r})
except KeyboardInterrupt:
    print("interrupted", flush=True)
    sys.exit(3)
print("finished", flush=True)
"""
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "started"
    time.sleep(1.0)
    child.send_signal(signal.SIGINT)
    out, _ = child.communicate(timeout=120)
    assert child.returncode == 3, out
    assert "interrupted" in out
    assert grag.Engine(book_copy, no_llm=True).check().ok


def test_progress_callback_error_stops_the_run(book_copy, tmp_path):
    (tmp_path / "d.txt").write_text("Scrooge and Marley were partners in London.\n" * 50,
                                    encoding="utf-8")

    def boom(p):
        raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        grag.Engine(book_copy, no_llm=True).add(tmp_path / "d.txt", progress=boom)
    assert grag.Engine(book_copy, no_llm=True).check().ok


# ---------------------------------------------------------------- pandas and retrievers

def test_to_pandas_matches_csv_export(book_project, grag_bin, tmp_path):
    pandas = pytest.importorskip("pandas")
    engine = grag.Engine(book_project["root"], no_llm=True)
    frames = grag.to_pandas(engine)
    assert set(frames) == {"documents", "text_units", "entities", "relationships",
                           "communities", "community_reports"}
    out = tmp_path / "csv"
    subprocess.run([grag_bin, "--root", book_project["root"], "--no-llm", "export", "--format",
                    "csv", "--out", str(out)], check=True, capture_output=True)
    for name, frame in frames.items():
        csv = pandas.read_csv(out / f"{name}.csv", keep_default_na=False, dtype=str)
        assert list(frame.columns) == list(csv.columns), name
        assert len(frame) == len(csv), name
        for column in frame.columns:
            mine = [_csv_text(v) for v in frame[column]]
            assert mine == list(csv[column]), (name, column)
    assert isinstance(frames["entities"]["text_unit_ids"].iloc[0], list)


def _csv_text(value):
    # As the CSV export writes a cell: text as is, none as nothing, anything else as JSON.
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, float):
        return json.dumps(value)
    return str(value)


def test_retriever_shapes(book_project):
    engine = grag.Engine(book_project["root"], no_llm=True)
    retriever = grag.Retriever(engine, k=3)
    docs = retriever.invoke(QUESTION)
    assert len(docs) == 3 and docs[0].page_content and docs[0].metadata["document_id"]
    assert retriever.get_relevant_documents(QUESTION) == docs
    nodes = retriever.retrieve(QUESTION)
    assert [n.id_ for n in nodes] == [d.id for d in docs]
    assert nodes[0].score >= nodes[-1].score and nodes[0].node.get_content() == nodes[0].text


def test_citation_spans_slice_the_document_text(book_project):
    # A span's start/end are code points: Python's own string indices.
    engine = grag.Engine(book_project["root"], no_llm=True)
    r = engine.query(QUESTION, method="local")
    spans = [s for c in r.citations for s in c.get("spans", [])]
    assert spans, r.to_dict()["citations"]
    text = engine.document(spans[0].document_id).text
    for s in spans:
        assert text[s.start:s.end] == s.text


def test_the_example_runs():
    # examples/python_quickstart.py, as a reader would run it (pandas optional).
    example = os.path.join(os.path.dirname(__file__), "..", "..", "examples",
                           "python_quickstart.py")
    done = subprocess.run([sys.executable, example], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "entities" in done.stdout and "Scrooge" in done.stdout
