// What an Engine holds, for the engine module's own files (engine_eval.cpp) and the tests: not
// part of the library's API. include/grag/engine.h hands none of it out; a front end that
// includes this header does not build (src/engine/ is on no front end's include path).
#pragma once

#include <string>

#include "grag/citations.h"
#include "grag/drift_search.h"
#include "grag/engine.h"
#include "grag/global_search.h"
#include "grag/indexer.h"
#include "grag/lazy_search.h"
#include "grag/llm.h"
#include "grag/local_search.h"
#include "grag/passage_search.h"
#include "grag/retrieval.h"
#include "grag/router.h"
#include "grag/store.h"
#include "grag/store_copy.h"
#include "grag/tokenizer.h"

namespace grag {

struct EngineInternals {
  static Store& store(Engine& e) { return e.store(); }
  static const Tokenizer& tokenizer(const Engine& e) { return e.tokenizer(); }
  static ChatModel* chat(Engine& e) { return e.chat(); }
  static Result<ChatModel*> QueryModel(Engine& e, const std::string& name) {
    return e.QueryModel(name);
  }
  static EmbeddingModel* embedder(Engine& e) { return e.embedder(); }
  static Result<const Retriever*> retriever(Engine& e) { return e.retriever(); }
  static GlobalSearchOptions GlobalOptions(const Engine& e) { return e.GlobalOptions(); }
  static LocalSearchOptions LocalOptions(const Engine& e) { return e.LocalOptions(); }
  static PassageSearchOptions PassageOptions(const Engine& e, RetrievalMethod method) {
    return e.PassageOptions(method);
  }
  static DriftSearchOptions DriftOptions(const Engine& e) { return e.DriftOptions(); }
  static LazySearchOptions LazyOptions(const Engine& e) { return e.LazyOptions(); }
  static RetrievalOptions SearchOptions(const Engine& e) { return e.SearchOptions(); }
};

}  // namespace grag
