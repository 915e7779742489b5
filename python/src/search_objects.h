// A search's result as Python objects, built straight from the engine's RetrievalResult.
//
// Everything else crosses as the engine's JSON (grag/engine_json.h). search() is the call people
// make in a loop (a retriever in a RAG pipeline), and for it writing JSON and parsing it back in
// Python was a quarter of a BM25 search's time (bench/python_search_bench.py). The dict has
// exactly the shape RetrievalResultJson writes; a test compares the two on every field.
#pragma once

#include <pybind11/pybind11.h>

#include <string_view>

#include "grag/search_results.h"

namespace grag::python {

pybind11::dict SearchObject(const RetrievalResult& result, std::string_view question);

}  // namespace grag::python
