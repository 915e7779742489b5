// SQLite-only details of the store's full-text search. The store's tables through its API
// (documents, chunks, cascades, search, extraction results, the graph, communities, reports,
// embeddings, runs, stats, transactions, resolution) are tested on every backend by
// store_backend_test.cpp.
#include <gtest/gtest.h>

#include "store/sqlite/store_impl.h"

namespace grag {
namespace {

TEST(StoreFtsQueryTest, QuotesEveryWordAndDropsOperators) {
  EXPECT_EQ(store::FtsMatchQuery("Who is \"Jacob\" Marley?"),
            "\"Who\" OR \"is\" OR \"Jacob\" OR \"Marley\"");
  EXPECT_EQ(store::FtsMatchQuery("a* AND (b)"), "\"a\" OR \"AND\" OR \"b\"");
  EXPECT_EQ(store::FtsMatchQuery("café café"), "\"café\"");
  EXPECT_EQ(store::FtsMatchQuery("?!()\"*"), "");
}

}  // namespace
}  // namespace grag
