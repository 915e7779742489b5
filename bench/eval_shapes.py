#!/usr/bin/env python3
"""Retrieval on four corpus shapes, measured with `grag eval` in the no-LLM mode.

  hotpotqa   HotpotQA-100 (bench/data/hotpotqa-100): 100 multi-hop questions over 994 short
             Wikipedia passages, one document each; gold: the supporting passages' documents
             and the short answer (yes/no answers left out: those words are in any passage).
  medical    GraphRAG-Bench medical (bench/data/graphrag-bench-medical): one 1 MB document,
             its 2,062 questions of four types (--medical-questions N: the first N); gold: the
             evidence sentences (the 70% content-word rule).
  carol      A Christmas Carol (tests/data/christmas_carol), a novel as one document, with 60
             hand-written questions (bench/data/christmas-carol); gold: short answers and the
             book's sentence that answers each.
  carol-llm  The same questions over the LLM path: Microsoft GraphRAG's recorded extraction of
             the book (its 42 text units as documents) replayed through grag's pipeline by
             bench/index_cost --only book (a scripted model: one entity in ten left to gleaning,
             the judge and reports scripted). Needs --index-cost; not in the default shapes.

For each shape it makes a project under --work, indexes it with `grag --no-llm index`, writes
the questions as grag eval's JSONL and runs `grag eval` (text to stdout, JSON beside it).

  python3 bench/eval_shapes.py [--grag build-release/grag] [--work /tmp/grag-eval-shapes]
                               [--shapes hotpotqa,medical,carol] [--k 5] [--medical-questions N]
                               [--grag-args '--set embeddings.encoding=f16']
                               [--index-cost build-release/bench/index_cost]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def run(cmd, **kw):
    print("$ " + " ".join(cmd), file=sys.stderr, flush=True)
    return subprocess.run(cmd, check=True, **kw)


def hotpotqa(project, limit):
    data = os.path.join(HERE, "data", "hotpotqa-100")
    with open(os.path.join(data, "hotpotqa_train_corpus.json")) as f:
        corpus = json.load(f)
    with open(os.path.join(project, "input", "passages.jsonl"), "w") as out:
        for title, sentences in corpus.items():
            # As bench/retrieval_eval does: the title is the document id and the first line.
            out.write(json.dumps({"id": title, "title": title,
                                  "text": title + "\n\n" + "".join(sentences)}) + "\n")
    with open(os.path.join(data, "hotpotqa_train.json")) as f:
        questions = json.load(f)
    lines = []
    for q in questions[:limit]:
        item = {"question": q["question"],
                "gold_documents": sorted({fact[0] for fact in q["supporting_facts"]})}
        if q["answer"].lower() not in ("yes", "no"):
            item["answers"] = [q["answer"]]
        lines.append(item)
    return lines


def medical(project, limit):
    data = os.path.join(HERE, "data", "graphrag-bench-medical")
    with open(os.path.join(data, "medical.json")) as f:
        doc = json.load(f)[0]["context"]
    with open(os.path.join(project, "input", "medical.txt"), "w") as out:
        out.write(doc)
    with open(os.path.join(data, "medical_questions.jsonl")) as f:
        questions = [json.loads(line) for line in f if line.strip()]
    if limit > 0:
        questions = questions[:limit]
    # The answers are whole sentences, not short answers: only the evidence is gold.
    return [{"question": q["question"], "evidence": q["evidence"]}
            for q in questions if q.get("evidence")]


def carol(project, limit):
    shutil.copy(os.path.join(ROOT, "tests", "data", "christmas_carol", "christmas_carol.txt"),
                os.path.join(project, "input", "christmas_carol.txt"))
    with open(os.path.join(HERE, "data", "christmas-carol", "questions.jsonl")) as f:
        questions = [json.loads(line) for line in f if line.strip()]
    return questions[:limit] if limit > 0 else questions


def carol_llm(a, project):
    """Indexes the replayed extraction with index_cost (into `project`'s parent) and returns
    the project index_cost kept, holding the questions of `carol`."""
    tmp = os.path.dirname(project)
    os.makedirs(tmp, exist_ok=True)
    env = dict(os.environ, TMPDIR=tmp)
    run([a.index_cost, "--only", "book", "--keep"], env=env, stdout=subprocess.DEVNULL)
    kept = os.path.join(tmp, "grag-index-cost-book")
    shutil.rmtree(project, ignore_errors=True)
    os.rename(kept, project)
    return carol(project, 0)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--grag", default=os.path.join(ROOT, "build-release", "grag"))
    p.add_argument("--work", default="/tmp/grag-eval-shapes")
    p.add_argument("--shapes", default="hotpotqa,medical,carol")
    p.add_argument("--k", default="5")
    p.add_argument("--medical-questions", type=int, default=0,
                   help="ask only the first N medical questions (0: all 2,062)")
    p.add_argument("--eval-args", default="", help="more arguments for grag eval")
    p.add_argument("--index-cost", default=os.path.join(ROOT, "build-release", "bench",
                                                        "index_cost"),
                   help="bench/index_cost, for the carol-llm shape")
    p.add_argument("--grag-args", default="",
                   help="global arguments for grag index and eval, e.g. "
                        "'--set embeddings.encoding=f16'")
    a = p.parse_args()
    makers = {"hotpotqa": (hotpotqa, 100), "medical": (medical, a.medical_questions),
              "carol": (carol, 0)}
    for shape in a.shapes.split(","):
        project = os.path.join(a.work, shape)
        extra = a.grag_args.split()
        if shape == "carol-llm":
            questions = carol_llm(a, project)
        else:
            make, limit = makers[shape]
            shutil.rmtree(project, ignore_errors=True)
            run([a.grag, "init", project], stdout=subprocess.DEVNULL)
            questions = make(project, limit)
        qfile = os.path.join(project, "questions.jsonl")
        with open(qfile, "w") as out:
            for q in questions:
                out.write(json.dumps(q, ensure_ascii=False) + "\n")
        if shape != "carol-llm":
            run([a.grag, "--root", project, "--no-llm"] + extra + ["index", "--no-progress"],
                stdout=subprocess.DEVNULL)
        base = [a.grag, "--root", project, "--no-llm"] + extra + ["eval", "--k", a.k,
                                                                   "--no-progress"]
        base += a.eval_args.split()
        print(f"\n===== {shape}: {len(questions)} questions", flush=True)
        run(base + [qfile])
        with open(os.path.join(a.work, shape + ".json"), "w") as out:
            run(base + ["--json", qfile], stdout=out)


if __name__ == "__main__":
    main()
