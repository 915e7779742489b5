// The tunable weights of retrieval: the fusion of its signals and the graph signal's walk.
//
// Declared once, here, with the reasons for their defaults: retrieval's options
// (RetrievalOptions, grag/retrieval.h) are built on this struct, and the settings' [search]
// section (SearchConfig, grag/config.h) reads into it, so a default cannot differ between the
// library and grag.toml. Plain data in core because both the settings and the query module need
// it.
#pragma once

#include <cstdint>

namespace grag {

struct RetrievalTuning {
  // ---- fusion
  // Reciprocal rank fusion: score = Σ weight / (rrf_k + rank). Cormack et al.'s 60 flattens the
  // difference between ranks 1 and 5, which suits lists of equal strength; here the graph list
  // is the strong one (it already holds the other two signals' best passages as seeds) and its
  // top ranks must count: 5, tuned with graph_weight on half of HotpotQA-100 (docs/retrieval.md).
  double rrf_k = 5;
  // Signal weights in the fusion: seed 002's 1.125 for vector and 1.0 for BM25, and the graph's,
  // which breaks ties only where the walk has no opinion at 1.0 and carried multi-hop recall
  // from 0.79 to 0.92 at 6 (recall@5 on the tuning half).
  double vector_weight = 1.125;
  double bm25_weight = 1.0;
  double graph_weight = 6.0;
  // The graph's weight when nothing anchors its walk: no entity named in the question and no
  // fact seed in the best passages, only entity descriptions near the question by embedding and
  // the passages themselves. The walk then guesses; at 6 a guess from one loosely similar
  // description outranked the only passage both BM25 and vector put first.
  double unanchored_graph_weight = 1.0;
  // Between the two, the graph counts by how specific the most specific name the question says
  // is (its specificity, below): at min_name_specificity or less it gets
  // unanchored_graph_weight, at this or more graph_weight, in between in proportion. A walk
  // from "Shirley Temple" (in 2 of 994 passages: 0.87) knows where it goes; one from "Scrooge"
  // (in most of a novel's 42 chunks: 0.04) or "skin cancer" (in 21 of a medical book's 199:
  // 0.42) wanders, and there BM25's and the sentence windows' ranking is the better guide. 0.8,
  // tuned with passage_weight on the even questions of bench/eval_shapes.py's sets (0.9 gave the
  // same figures, 0.6 one point less on the medical book at BM25's characters).
  double anchored_specificity = 0.8;
  // With the built-in lexical embedder the vector signal is a second keyword signal: it gets
  // this weight instead of vector_weight.
  double lexical_vector_weight = 0.5;
  // Hybrid's sentence-window list: the best candidates of the three signals (passage_pool of
  // each) ranked again by their two best windows of passage_window_sentences sentences, each
  // window scored by the distinct question words it holds, weighted by their specificity. A
  // chunk of 1,200 tokens is one BM25 unit, so a chunk that spreads the question's words over
  // unrelated scenes ranks beside one that holds them in one place, the fact; the windows tell
  // them apart. It counts in full when the candidates' chunks hold eight windows or more and
  // not at all at two or fewer (short passages: BM25 already ranks them by their words). 12,
  // tuned on the even questions of the medical and novel sets (bench/eval_shapes.py): evidence
  // recall@5 +3 points on the medical book's, where 6 gave +0.5 and 24 the same as 12. 0: off.
  double passage_weight = 12.0;
  // Sentences per window (passage_weight); words without a sentence end count as a sentence
  // every 40 words.
  int64_t passage_window_sentences = 3;
  // A question often asks for several things at once ("the symptoms and the tests"), and the
  // fusion's best chunks can all answer the same one. After the fusion, the first passage_pool
  // places are filled greedily: a chunk's fused score counts 1 + diversity x the share of the
  // question's worth (its words, weighted by specificity) it holds that the chunks above it do
  // not. 1 of 1, 2 and 4 (bench/eval_shapes.py, retrieval_eval): HotpotQA-100 recall@2 0.830 to
  // 0.865 and @5 0.940 to 0.950, the medical book's evidence recall@5 0.904 to 0.906; 2 and 4
  // cost the LLM path's novel a question and HotpotQA some recall@2. 0: off.
  double diversity = 1.0;

  // ---- graph signal (personalised PageRank over entities and chunks)
  // Probability that the walk takes one more step (HippoRAG 2's 0.5).
  double damping = 0.5;
  // Of an entity's mass for chunks (RetrievalOptions::entity_to_chunk), the share that goes to
  // the chunks of the documents the entity is the title of (when there are such): "Christopher
  // Nolan"'s own article before the films that name him.
  double titled_chunk_share = 0.9;
  // Entities named in the question whose specificity (IDF of the name's phrase, normalised to
  // 0-1) is below this seed nothing unless no name clears it: "located" or "film" are in too
  // many chunks to point anywhere. A name in fewer than 5 chunks always clears it (in a small
  // index every name is in a large share of the chunks; that says nothing).
  double min_name_specificity = 0.25;
  // Of the seed mass, the share given to the best passages of the vector and BM25 signals
  // (HippoRAG 2 seeds passage nodes too, at a small weight), split over
  // RetrievalOptions::passage_seeds.
  double passage_seed_share = 0.2;
  // Fact seeds, HippoRAG 2's "query to triple" step without a model: in the best passages,
  // the sentences that share the most specific words with the question ("He played for the
  // Philadelphia Eagles (1941, 1945–1949)" for "...played for an NFL team from 1945-1949") seed
  // the entities they name, weighted by the sentence's match and the entity's specificity. They
  // are how the walk finds a bridge the question never names. Their share of the seed mass:
  double fact_seed_share = 0.3;

  // ---- the evidence chain (hybrid)
  // A multi-hop question's second passage is the one its first passage points to: "Dick Humbert
  // ... played for the Philadelphia Eagles" leads to the Eagles' own article, which shares few
  // words with the question, while a look-alike ("Brooklyn Dodgers (NFL)") shares many. After
  // the fusion, of its first chain_depth chunks, the first chain_links whose document is titled
  // by an entity the first chunk names (one chunk per entity; an entity specific enough to seed
  // the walk, not the first chunk's own title) move up to follow it, in their order. A corpus
  // whose documents are not about one entity each (a book, a report) has no such titles and is
  // left as fused. 2 and 30, chosen on the even questions of HotpotQA-100 (recall@2 0.73 to 0.81
  // there, 0.70 to 0.82 on the odd ones); 0 links: off.
  int64_t chain_links = 2;
  int64_t chain_depth = 30;
};

}  // namespace grag
