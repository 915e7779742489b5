# %% [markdown]
# # grag from Python: a first session
#
# A notebook-style script (`# %%` cells: VS Code, Jupyter's jupytext, or plain `python3`). It
# indexes *A Christmas Carol* with no model at all, asks a global and a local question, searches,
# looks at the graph, and turns the index into Microsoft GraphRAG's pandas tables.
#
#     make python
#     PYTHONPATH=build-python python3 examples/python_quickstart.py
#
# To use a model instead, drop `no_llm=True` and pass its settings, e.g.
# `grag.Engine(root, llm__base_url="http://localhost:11434/v1", llm__model="qwen2.5:7b")`.

# %%
import os
import tempfile

import grag

here = os.path.dirname(os.path.abspath(__file__))
book = os.path.join(here, "..", "tests", "data", "christmas_carol", "christmas_carol.txt")
root = os.path.join(tempfile.mkdtemp(prefix="grag-example-"), "carol")

project = grag.Project.init(root)
with open(book, encoding="utf-8") as f:
    text = f.read()
# The story without Project Gutenberg's header and licence.
text = text[text.index("\n", text.index("*** START OF")) + 1:text.index("*** END OF")]
with open(os.path.join(project.input_dir, "christmas_carol.txt"), "w", encoding="utf-8") as f:
    f.write(text)

# %% Index, with a progress line per stage
engine = grag.Engine(root, no_llm=True)
last = {}


def progress(p):
    if last.get("stage") != p.stage:
        print(f"  {p.stage}...")
    last["stage"] = p.stage


summary = engine.index(progress=progress)
print(f"{summary.entities} entities, {summary.relationships} relationships, "
      f"{sum(summary.communities_per_level.values())} communities")

# %% A global question: the router sends it to the community reports
answer = engine.query("What are the main themes of this story?")
print(answer.method, "-", answer.route.reason)
print(answer.answer[:600])

# %% A local question, with what the answer cites
answer = engine.query("Who is Jacob Marley?", method="local")
print(answer.answer[:400])
for c in answer.citations[:5]:
    print(" ", c.id, c.type, c.source)

# %% Retrieval only: hybrid vector + BM25 + graph
for hit in engine.search("Who is Jacob Marley?", k=3).chunks:
    print(hit.rank, round(hit.score, 3), hit.document_id, hit.text.strip()[:70].replace("\n", " "))

# %% The graph
scrooge = engine.entity("Scrooge")
print(scrooge.name, "-", scrooge.description[:120].replace("\n", " "))
for n in scrooge.neighbours[:5]:  # heaviest relationship first
    print("  ->", n.entity.name, round(n.weight, 2))

# %% Microsoft GraphRAG's tables (needs pandas)
try:
    tables = grag.to_pandas(engine)
    top = tables["entities"].sort_values("degree", ascending=False).head(5)
    print(top[["title", "type", "degree"]].to_string(index=False))
except ImportError as e:
    print(e)

# %% A retriever for LangChain or LlamaIndex code
retriever = grag.Retriever(engine, k=2)
for doc in retriever.invoke("Where does Bob Cratchit live?"):
    print(doc.metadata["chunk_id"][:12], doc.page_content.strip()[:70].replace("\n", " "))
