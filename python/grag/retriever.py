"""Retrievers shaped like LangChain's and LlamaIndex's, without depending on either.

    retriever = grag.Retriever(engine, k=5)
    docs = retriever.invoke("Who is Jacob Marley?")      # LangChain: .page_content, .metadata
    nodes = retriever.retrieve("Who is Jacob Marley?")   # LlamaIndex: .text, .score, .metadata

Hand ``invoke`` (or ``get_relevant_documents``) to code that expects a LangChain retriever, or
wrap the list in ``langchain_core.documents.Document(**vars(d))``; the same for LlamaIndex's
``TextNode``/``NodeWithScore`` from ``retrieve``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Dict, List, Optional

if TYPE_CHECKING:  # pragma: no cover
    from . import Engine


@dataclass
class Document:
    """A retrieved passage as LangChain's Document holds it."""

    page_content: str
    metadata: Dict[str, Any] = field(default_factory=dict)
    id: Optional[str] = None


@dataclass
class Node:
    """A retrieved passage as LlamaIndex's NodeWithScore holds it (``node`` is itself)."""

    text: str
    score: float
    metadata: Dict[str, Any] = field(default_factory=dict)
    id_: Optional[str] = None

    @property
    def node(self) -> "Node":
        return self

    def get_content(self) -> str:
        return self.text


class Retriever:
    """Retrieval over an Engine's index (grag search: hybrid vector + BM25 + graph by default).

    ``k``: passages returned; ``method``: hybrid, vector, bm25 or graph. Each passage's
    metadata: document_id, chunk_id, chunk_index, rank, score and the per-signal ranks."""

    def __init__(self, engine: "Engine", k: int = 5, method: Optional[str] = None):
        self.engine = engine
        self.k = k
        self.method = method

    def _hits(self, query: str) -> List[Dict[str, Any]]:
        return self.engine.search(query, k=self.k, method=self.method).to_dict()["chunks"]

    @staticmethod
    def _metadata(hit: Dict[str, Any]) -> Dict[str, Any]:
        meta = {key: hit[key] for key in ("document_id", "chunk_id", "chunk_index", "rank",
                                          "score") if key in hit}
        meta["signal_ranks"] = hit.get("signal_ranks", {})
        return meta

    # ---- LangChain's BaseRetriever surface
    def invoke(self, input: str, config: Any = None, **kwargs: Any) -> List[Document]:
        return [Document(page_content=h["text"], metadata=self._metadata(h), id=h["chunk_id"])
                for h in self._hits(input)]

    def get_relevant_documents(self, query: str, **kwargs: Any) -> List[Document]:
        return self.invoke(query)

    async def ainvoke(self, input: str, config: Any = None, **kwargs: Any) -> List[Document]:
        import asyncio
        return await asyncio.get_running_loop().run_in_executor(None, self.invoke, input)

    # ---- LlamaIndex's BaseRetriever surface
    def retrieve(self, str_or_query_bundle: Any) -> List[Node]:
        query = getattr(str_or_query_bundle, "query_str", str_or_query_bundle)
        return [Node(text=h["text"], score=float(h["score"]), metadata=self._metadata(h),
                     id_=h["chunk_id"]) for h in self._hits(query)]

    async def aretrieve(self, str_or_query_bundle: Any) -> List[Node]:
        import asyncio
        return await asyncio.get_running_loop().run_in_executor(None, self.retrieve,
                                                                str_or_query_bundle)
