"""grag: a GraphRAG engine, in-process.

    import grag
    grag.Project.init("my-project")             # grag.toml, prompts/, input/
    engine = grag.Engine("my-project", no_llm=True)
    engine.index()                              # the files in my-project/input/
    result = engine.query("What are the main themes?")
    print(result.answer)
    for hit in engine.search("Who is Jacob Marley?", k=3).chunks:
        print(hit.score, hit.document_id, hit.text[:80])

Settings are the ones `grag config --reference` lists, by name: ``grag.Engine(path,
**{"llm.model": "gpt-4o-mini"})`` or, as keywords, with ``__`` for the dot:
``grag.Engine(path, llm__model="gpt-4o-mini", chunks__size=600)``. They apply on top of the
project's grag.toml and the GRAG_* environment, as ``grag --set`` does.

Every call releases the GIL; index(), query() and eval() can be stopped with Ctrl-C
(KeyboardInterrupt) or Engine.cancel() from another thread (grag.Cancelled), and what was done
is kept: index() again resumes. Errors are grag.Error subclasses carrying the engine's message.
See docs/python.md.
"""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Union

from . import _grag
from ._grag import (  # noqa: F401  (re-exported: the exception classes)
    AlreadyExists,
    Cancelled,
    Corruption,
    Error,
    InternalError,
    InvalidArgument,
    IoError,
    NotFound,
    ParseError,
    PermissionDenied,
    RateLimited,
    ResourceExhausted,
    Timeout,
    Unavailable,
    Unimplemented,
)
from .retriever import Document, Node, Retriever  # noqa: F401

__version__: str = _grag.__version__

PathLike = Union[str, "os.PathLike[str]"]

__all__ = [
    "Project", "Engine", "Record", "QueryResult", "SearchResult", "IndexSummary", "Progress",
    "Retriever", "Document", "Node", "to_pandas", "settings_reference",
    "Error", "InvalidArgument", "NotFound", "AlreadyExists", "IoError", "Corruption",
    "Unavailable", "Timeout", "RateLimited", "PermissionDenied", "ParseError", "Cancelled",
    "ResourceExhausted", "Unimplemented", "InternalError",
]


class Record(Mapping[str, Any]):
    """A result from the engine: its fields as attributes (``r.answer``) and as a read-only
    mapping (``r["answer"]``). Nested objects are Records too, lists are lists. ``to_dict()``
    gives plain dicts and lists, the JSON shape `grag ... --json` prints (docs/python.md)."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, Any]):
        object.__setattr__(self, "_data", dict(data))

    def __getattr__(self, name: str) -> Any:
        try:
            return _wrap(self._data[name])
        except KeyError:
            raise AttributeError(
                f"{type(self).__name__} has no field {name!r} (it has: {', '.join(self._data)})"
            ) from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is read-only")

    def __getitem__(self, key: str) -> Any:
        return _wrap(self._data[key])

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __dir__(self) -> List[str]:
        return sorted(set(super().__dir__()) | set(self._data))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Record):
            return self._data == other._data
        return self._data == other

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={_short(v)}" for k, v in list(self._data.items())[:6])
        more = ", ..." if len(self._data) > 6 else ""
        return f"{type(self).__name__}({shown}{more})"

    def to_dict(self) -> Dict[str, Any]:
        """The fields as plain dicts and lists (a copy)."""
        return json.loads(json.dumps(self._data))

    def to_json(self, indent: Optional[int] = None) -> str:
        return json.dumps(self._data, indent=indent, ensure_ascii=False)


def _wrap(value: Any) -> Any:
    if isinstance(value, dict):
        return Record(value)
    if isinstance(value, list):
        return [_wrap(v) for v in value]
    return value


def _short(value: Any) -> str:
    text = repr(value) if not isinstance(value, (dict, list)) else (
        f"<{len(value)} fields>" if isinstance(value, dict) else f"<{len(value)} items>")
    return text if len(text) <= 60 else text[:57] + "..."


class QueryResult(Record):
    """An answer: ``answer`` (markdown with citation markers such as [S3] or [C12]), ``method``
    (the method that answered), ``llm`` (a model wrote it; else an extractive answer),
    ``citations`` (what the markers refer to: chunks, entities, relationships, community
    reports, with their document), the method's context or points, ``route`` (for
    method="auto": what the router chose and why) and ``stats`` (tokens, timing). The fields
    are those of `grag query --json` (docs/python.md)."""

    __slots__ = ()


class SearchResult(Record):
    """Ranked chunks: ``chunks`` (each with ``chunk_id``, ``document_id``, ``chunk_index``,
    ``text``, ``score``, ``rank`` and per-signal ranks and scores) and the retrieval's
    statistics, as `grag search --json` prints them."""

    __slots__ = ()


class IndexSummary(Record):
    """What an index(), add(), remove(), merge() or split() did, as `grag index --json` prints
    it: ``documents`` (added, changed, unchanged, removed), ``chunks`` (total, added, extracted,
    ...), ``entities``, ``relationships``, ``communities_per_level``, ``reports``, ``llm``
    (calls, tokens), ``elapsed_seconds``; ``plan`` is what it set out to do. A dry run returns
    the plan itself (``documents.added`` a list of ids, ``chunks_to_extract``, ``estimate``)."""

    __slots__ = ()


class Progress(Record):
    """One progress report of a long update: ``stage`` (load, extract, resolve, summarize,
    communities, reports, embed), ``done`` of ``total`` (0: unknown), ``calls``,
    ``prompt_tokens``, ``completion_tokens`` of the run so far and ``elapsed_seconds``."""

    __slots__ = ()


def _setting_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return ",".join(_setting_text(v) for v in value)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return str(value)


def _toml_value(text: str) -> Any:
    try:
        import tomllib  # Python 3.11
        return tomllib.loads("v = " + text)["v"]
    except Exception:  # older Python, or a value TOML cannot hold: the text as grag wrote it
        return text


def _progress_adapter(progress: Optional[Callable[[Progress], Any]]):
    if progress is None:
        return None

    def call(stage, done, total, calls, prompt_tokens, completion_tokens, elapsed):
        progress(Progress({"stage": stage, "done": done, "total": total, "calls": calls,
                           "prompt_tokens": prompt_tokens,
                           "completion_tokens": completion_tokens,
                           "elapsed_seconds": elapsed}))

    return call


def _paths(paths: Union[None, PathLike, Iterable[PathLike]]) -> List[str]:
    if paths is None:
        return []
    if isinstance(paths, (str, os.PathLike)):
        return [os.fspath(paths)]
    return [os.fspath(p) for p in paths]


class Engine:
    """A grag project opened for use: indexing and every kind of question.

    ``path`` is the project folder (the one `grag init` made; ``grag --root``). ``config_file``
    another grag.toml. ``no_llm=True`` calls no model whatever is configured (the built-in
    extractor, embedder, extractive reports and answers). ``log_level`` (error, warn, info,
    debug) is for the engine's messages on stderr; Python's default is "warn". ``settings``:
    any setting by name (see the module's help). Errors: grag.InvalidArgument for a bad
    setting; grag.NotFound for a missing config file.

    The index is opened on first use and kept open, with the graph in memory, for many
    questions; it is reopened when it changes (this engine's index(), or another process's).
    index(), add(), remove(), merge() and split() take the index's writer lock for their
    duration only. Methods may be called from several threads at once.
    """

    def __init__(self, path: PathLike = ".", *, config_file: Optional[PathLike] = None,
                 no_llm: bool = False, log_level: Optional[str] = "warn", **settings: Any):
        named = {key.replace("__", "."): _setting_text(value) for key, value in settings.items()}
        self._engine = _grag.Engine(os.fspath(path),
                                    os.fspath(config_file) if config_file else "",
                                    named, no_llm, log_level or "")
        self.path = os.fspath(path)

    # ---- questions
    def query(self, question: str, method: str = "auto", *, level: Optional[int] = None,
              k: Optional[int] = None, budget: Optional[int] = None,
              on_text: Optional[Callable[[str], Any]] = None,
              model: Optional[str] = None) -> QueryResult:
        """Answers ``question``. ``method``: auto (the router picks), global, local, basic,
        hybrid, drift or lazy (budgeted search, for indexes built without a model). ``level``:
        global search's community level; ``k``: local search's entities, basic/hybrid's
        passages; ``budget``: lazy's relevance-test calls. ``on_text(piece)`` is called with
        each piece of a model's answer as it is written (streaming), on this thread.
        ``model``: the model that answers, on the query role's server (default
        ``llm.query.model``, else ``llm.model``); nothing indexed changes."""
        return QueryResult(json.loads(self._engine.query(question, method, level, k, budget,
                                                         on_text, model)))

    def search(self, question: str, k: Optional[int] = None,
               method: Optional[str] = None) -> SearchResult:
        """Ranks the chunks for ``question`` without an answer (`grag search`). ``method``:
        hybrid (default: search.method), vector, bm25 or graph; ``k``: chunks returned
        (default search.top_k)."""
        return SearchResult(self._engine.search(question, k, method))

    def route(self, question: str, method: str = "auto") -> Record:
        """What ``query(question, method)`` would do and cost, without doing it."""
        return Record(json.loads(self._engine.route(question, method)))

    def eval(self, questions: Union[PathLike, Iterable[Mapping[str, Any]]], *,
             methods: Optional[Sequence[str]] = None, k: int = 5, limit: int = 0,
             details: bool = False,
             progress: Optional[Callable[[int, int], Any]] = None) -> Record:
        """Scores retrieval on questions with gold answers, beside BM25 (`grag eval`,
        docs/eval.md). ``questions``: a JSONL file's path, or dicts of the same shape
        ({"question": ..., "answers": [...], "chunks"/"documents"/"evidence": [...]}).
        ``progress(done, total)`` after each question."""
        if isinstance(questions, (str, os.PathLike)):
            with open(questions, encoding="utf-8") as f:
                text = f.read()
        else:
            text = "".join(json.dumps(dict(q), ensure_ascii=False) + "\n" for q in questions)
        return Record(json.loads(self._engine.eval(text, list(methods or []), k, limit, details,
                                                   progress)))

    # ---- the index
    def index(self, paths: Union[None, PathLike, Iterable[PathLike]] = None, *,
              progress: Optional[Callable[[Progress], Any]] = None, dry_run: bool = False,
              refresh_reports: bool = False, wait: bool = False) -> IndexSummary:
        """Builds or updates the index (`grag index`): from ``paths`` (files and folders;
        documents gone from a folder named are removed) or, by default, the input folder. Only
        what changed is redone. ``progress(p)`` is called on this thread with a
        grag.Progress. ``dry_run=True``: the plan (what would be added, changed, removed and
        called), nothing written. ``wait=True``: wait for another writer instead of failing."""
        return IndexSummary(json.loads(self._engine.index(
            _paths(paths), [], True, refresh_reports, dry_run, wait,
            _progress_adapter(progress))))

    def add(self, paths: Union[PathLike, Iterable[PathLike]], *,
            progress: Optional[Callable[[Progress], Any]] = None, dry_run: bool = False,
            wait: bool = False) -> IndexSummary:
        """Adds or updates these files and folders' documents, removing nothing (`grag add`)."""
        return IndexSummary(json.loads(self._engine.index(
            _paths(paths), [], False, False, dry_run, wait, _progress_adapter(progress))))

    def remove(self, document_ids: Union[str, Iterable[str]], *,
               progress: Optional[Callable[[Progress], Any]] = None, dry_run: bool = False,
               wait: bool = False) -> IndexSummary:
        """Removes documents by id (see documents()) and what only they supported."""
        ids = [document_ids] if isinstance(document_ids, str) else list(document_ids)
        return IndexSummary(json.loads(self._engine.index(
            [], ids, False, False, dry_run, wait, _progress_adapter(progress))))

    def documents(self) -> List[Record]:
        """The indexed documents: id, title, source path, chunks, hashes, dates."""
        return [Record(d) for d in json.loads(self._engine.documents())]

    def document(self, document_id: str) -> Record:
        """One document with its text and chunks. grag.NotFound for an unknown id."""
        return Record(json.loads(self._engine.document(document_id)))

    def stats(self, top_entities: int = 10) -> Record:
        """What the index holds and what it cost (`grag stats`)."""
        return Record(json.loads(self._engine.stats(top_entities)))

    def check(self, max_per_check: int = 20) -> Record:
        """Runs every integrity check (`grag check`): ``ok``, ``checks``, ``problems``."""
        return Record(json.loads(self._engine.check(max_per_check)))

    def export(self, out_dir: PathLike, format: str = "csv", *, force: bool = False) -> Record:
        """Writes the index in another tool's format (`grag export`): graphml, csv, json or
        neo4j. grag.AlreadyExists when files would be overwritten, unless ``force``."""
        return Record(json.loads(self._engine.export(format, os.fspath(out_dir), force)))

    def sql(self, query: str, *, max_rows: int = 1000,
            time_limit: float = 30.0) -> List[Dict[str, Any]]:
        """One read-only SELECT over the documented views (`grag sql`, docs/schema.md): rows as
        dicts keyed by column."""
        return json.loads(self._engine.sql(query, max_rows, time_limit))

    # ---- entities and resolution
    def entities(self, search: str = "", limit: Optional[int] = 100) -> List[Record]:
        """Entities, highest degree first, with the other names resolved into each; ``search``
        filters by name (`grag entities list`). ``limit=None``: all."""
        listed = json.loads(self._engine.entities(search, -1 if limit is None else limit))
        return [Record(e) for e in listed]

    def entity(self, name_or_id: Union[str, int], *, neighbours: int = 50,
               chunks: int = 20) -> Record:
        """One entity by name (or any name resolved into it) or id: its description, aliases,
        heaviest neighbours, communities and source chunks. grag.NotFound when there is none."""
        if isinstance(name_or_id, int):
            text = self._engine.entity(name_or_id, "", neighbours, chunks)
        else:
            text = self._engine.entity(None, name_or_id, neighbours, chunks)
        return Record(json.loads(text))

    def aliases(self, search: str = "") -> Record:
        """Names folded into another entity, how and why, and people's corrections."""
        return Record(json.loads(self._engine.aliases(search)))

    def merge(self, a: str, b: str, *, progress: Optional[Callable[[Progress], Any]] = None,
              wait: bool = False) -> IndexSummary:
        """Makes the things named ``a`` and ``b`` one entity, and applies it (the graph,
        communities and reports are rebuilt from the stored extractions; no extraction call).
        Kept across re-indexing (`grag entities merge`)."""
        return IndexSummary(json.loads(self._engine.merge(a, b, wait,
                                                          _progress_adapter(progress))))

    def split(self, entity: str, alias: str = "", *,
              progress: Optional[Callable[[Progress], Any]] = None,
              wait: bool = False) -> Optional[IndexSummary]:
        """Undoes resolution: ``alias`` stands alone again (without: every name of ``entity``
        does), and applies it. None when the entity has no other name to split off."""
        text = self._engine.split(entity, alias, wait, _progress_adapter(progress))
        return IndexSummary(json.loads(text)) if text else None

    # ---- the engine
    def settings(self) -> Dict[str, Any]:
        """Every setting's current value (after grag.toml, the environment and the settings
        given), by name."""
        return {s["key"]: _toml_value(s["value"]) for s in json.loads(self._engine.settings())}

    def cancel(self) -> None:
        """Stops the index(), query() or eval() running on this engine (from another thread):
        it raises grag.Cancelled; an index keeps what was done and resumes on the next call."""
        self._engine.cancel()

    def close(self) -> None:
        """Closes the index (opened again by the next call)."""
        self._engine.close()

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"grag.Engine({self.path!r}, index={self._engine.index_label!r})"

    def _search_loop(self, question: str, k: int, method: str, n: int) -> float:
        """``n`` searches inside the engine with no Python between them: seconds (for
        bench/python_search_bench.py, which compares it with search() from Python)."""
        return self._engine.search_loop(question, k, method, n)


class Project:
    """A grag project folder: grag.toml, prompts/, input/ (and the index, once built)."""

    def __init__(self, path: PathLike = "."):
        self.path = os.fspath(path)
        self.written: List[str] = []
        self.kept: List[str] = []

    @classmethod
    def init(cls, path: PathLike, *, force: bool = False) -> "Project":
        """Creates the project (`grag init`): a commented grag.toml, the prompts and an empty
        input/ folder. Existing files are kept unless ``force``. ``written`` and ``kept`` list
        the files."""
        done = json.loads(_grag.init_project(os.fspath(path), force))
        project = cls(path)
        project.written = list(done.get("written", []))
        project.kept = list(done.get("kept", []))
        return project

    @property
    def input_dir(self) -> str:
        return os.path.join(self.path, "input")

    def engine(self, **options: Any) -> Engine:
        """An Engine on this project (the same keywords as grag.Engine)."""
        return Engine(self.path, **options)

    def __repr__(self) -> str:
        return f"grag.Project({self.path!r})"


def settings_reference() -> List[Record]:
    """Every setting with its default, environment variable and help."""
    return [Record(s) for s in json.loads(_grag.settings_reference())]


# Microsoft GraphRAG's output tables, in its column layout (grag export --format csv/json).
_TABLES = ("documents", "text_units", "entities", "relationships", "communities",
           "community_reports")


def to_pandas(engine: Engine) -> Dict[str, "Any"]:
    """The index as pandas DataFrames in Microsoft GraphRAG's output layout: documents,
    text_units, entities, relationships, communities and community_reports, with list columns
    (text_unit_ids, entity_ids, ...) as Python lists, as GraphRAG's parquet files hold them, so
    notebooks written for GraphRAG's output work on grag's index. Needs pandas."""
    try:
        import pandas
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("grag.to_pandas needs pandas (pip install pandas, or "
                          "apt install python3-pandas)") from e
    with tempfile.TemporaryDirectory(prefix="grag-pandas-") as out:
        engine.export(os.path.join(out, "json"), "json")
        frames = {}
        for name in _TABLES:
            with open(os.path.join(out, "json", name + ".json"), encoding="utf-8") as f:
                rows = json.load(f)
            if rows:
                frames[name] = pandas.DataFrame.from_records(rows, columns=list(rows[0]))
            else:  # no row to take the columns from: the CSV export's header has them
                if not os.path.isdir(os.path.join(out, "csv")):
                    engine.export(os.path.join(out, "csv"), "csv")
                frames[name] = pandas.read_csv(os.path.join(out, "csv", name + ".csv"))
        return frames
