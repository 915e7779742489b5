#!/usr/bin/env python3
"""Validate the entity-resolution gold sets and print their counts.

Usage: python3 tools/stats.py [FILE.json ...]
(default: christmas_carol.json and synthetic.json next to this folder)

Standard library only. Exits non-zero if a file fails validation.

Definitions
  token        lower-cased, accents removed, "'s" removed, split on anything that is
               not a letter or digit, minus the stop words in STOP.
  positive     a pair of entities with the same cluster.
  hard neg.    a pair of entities in different clusters whose names share a token.
  same-name    a pair of entities in different clusters whose names are equal after
               lower-casing and dropping a leading "the ".
  level        a positive pair's difficulty: the harder of its two members' "evidence"
               (name < description < story); a member without "evidence" counts as name.
  clean        leaving out every entity flagged "conflated" or "uncertain".
"""
import itertools, json, os, re, sys, unicodedata
from collections import Counter, defaultdict

TYPES = {"PERSON", "ORGANIZATION", "GEO", "EVENT", "PRODUCT"}
EVIDENCE = ("name", "description", "story")
STOP = {"a", "an", "the", "of", "and", "or", "in", "on", "at", "to", "for", "by", "with", "from", "s"}


def fold(s):
    s = unicodedata.normalize("NFKD", s)
    return "".join(c for c in s if not unicodedata.combining(c)).lower()


def tokens(name):
    s = re.sub(r"['’]s\b", "", fold(name))
    return {t for t in re.split(r"[^a-z0-9]+", s) if t and t not in STOP}


def plain(name):
    s = fold(name).strip()
    return s[4:] if s.startswith("the ") else s


def validate(path, doc):
    errs = []
    if not isinstance(doc, dict) or not isinstance(doc.get("entities"), list):
        return ["top level must be an object with an 'entities' list"]
    for k in ("source", "licence"):
        if not isinstance(doc.get(k), str) or not doc[k]:
            errs.append(f"missing top-level '{k}'")
    ids = Counter()
    for i, e in enumerate(doc["entities"]):
        for k in ("id", "name", "type", "description", "cluster"):
            if not isinstance(e.get(k), str) or not e[k].strip():
                errs.append(f"entity #{i}: missing or empty '{k}'")
        if e.get("type") not in TYPES:
            errs.append(f"entity #{i} {e.get('name')!r}: type {e.get('type')!r} not in {sorted(TYPES)}")
        if "evidence" in e and e["evidence"] not in EVIDENCE:
            errs.append(f"entity #{i} {e.get('name')!r}: bad evidence {e['evidence']!r}")
        ids[e.get("id")] += 1
    errs += [f"duplicate id {k!r}" for k, n in ids.items() if n > 1]
    return errs


def counts(ents):
    by = defaultdict(list)
    for e in ents:
        by[e["cluster"]].append(e)
    multi = [c for c in by.values() if len(c) > 1]
    lvl = Counter()
    for c in multi:
        for a, b in itertools.combinations(c, 2):
            la = EVIDENCE.index(a.get("evidence", "name"))
            lb = EVIDENCE.index(b.get("evidence", "name"))
            lvl[EVIDENCE[max(la, lb)]] += 1
    tok = [tokens(e["name"]) for e in ents]
    hard = same = 0
    for i, j in itertools.combinations(range(len(ents)), 2):
        if ents[i]["cluster"] == ents[j]["cluster"]:
            continue
        if tok[i] & tok[j]:
            hard += 1
        if plain(ents[i]["name"]) == plain(ents[j]["name"]):
            same += 1
    return {
        "entities": len(ents),
        "clusters": len(by),
        "clusters with >1 member": len(multi),
        "largest cluster": max(len(c) for c in by.values()),
        "gold positive pairs": sum(lvl.values()),
        "  of level name": lvl["name"],
        "  of level description": lvl["description"],
        "  of level story": lvl["story"],
        "hard negative pairs (shared token)": hard,
        "same-name negative pairs": same,
    }


def main(paths):
    ok = True
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
        except (OSError, ValueError) as ex:
            print(f"{path}: cannot read: {ex}")
            ok = False
            continue
        errs = validate(path, doc)
        print(f"== {os.path.basename(path)}: {'valid' if not errs else 'INVALID'}")
        for m in errs[:20]:
            print("   error:", m)
        if errs:
            ok = False
            continue
        ents = doc["entities"]
        full = counts(ents)
        flagged = [e for e in ents if e.get("conflated") or e.get("uncertain")]
        clean = counts([e for e in ents if not (e.get("conflated") or e.get("uncertain"))])
        print(f"   {'':36} {'all':>7} {'clean':>7}")
        for k in full:
            print(f"   {k:36} {full[k]:7} {clean[k]:7}")
        print(f"   {'flagged conflated':36} {sum(1 for e in ents if e.get('conflated')):7}")
        print(f"   {'flagged uncertain':36} {sum(1 for e in ents if e.get('uncertain')):7}")
        ty = Counter(e["type"] for e in ents)
        print("   types:", ", ".join(f"{t} {n}" for t, n in sorted(ty.items())))
        if any("doc" in e for e in ents):
            print("   docs:", len({e.get("doc") for e in ents}))
    return 0 if ok else 1


if __name__ == "__main__":
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    args = sys.argv[1:] or [os.path.join(here, n) for n in ("christmas_carol.json", "synthetic.json")]
    sys.exit(main(args))
