// VectorIndex: an exact scan for small sets, hnswlib's HNSW graph for large ones.
//
// hnswlib is compiled without its hand-written SIMD (NO_MANUAL_VECTORIZATION): with it, the
// graph walk reads one link past the end of a node's list to prefetch (hnswlib issues #107 and
// #578, unfixed in 0.6.2), which AddressSanitizer rightly reports, and the header defines
// non-inline functions (cpuid...) that a second including file could not link. The distance is
// ours instead (CosineSpace below), vectorised with GCC/Clang vector types, and serves both the
// scans and the graph, so the two modes agree to the last bit.

#include "grag/vector_index.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <exception>
#include <new>
#include <queue>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "grag/log.h"

#define NO_MANUAL_VECTORIZATION
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wold-style-cast"
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wunused-variable"
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wpedantic"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wcast-align"
#pragma GCC diagnostic ignored "-Wnull-dereference"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#pragma GCC diagnostic ignored "-Wnon-virtual-dtor"
#pragma GCC diagnostic ignored "-Woverloaded-virtual"
#include <hnswlib/hnswlib.h>
#pragma GCC diagnostic pop

namespace grag {
namespace {

// Four floats in one SSE/NEON register; arithmetic on it compiles to packed instructions.
typedef float Float4 __attribute__((vector_size(16)));

Float4 Load(const float* p) {
  Float4 v;
  std::memcpy(&v, p, sizeof(v));  // an unaligned load
  return v;
}

float Dot(const float* a, const float* b, size_t n) {
  // 16 floats a step in four independent sums, so additions do not wait on each other.
  Float4 s0 = {}, s1 = {}, s2 = {}, s3 = {};
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    s0 += Load(a + i) * Load(b + i);
    s1 += Load(a + i + 4) * Load(b + i + 4);
    s2 += Load(a + i + 8) * Load(b + i + 8);
    s3 += Load(a + i + 12) * Load(b + i + 12);
  }
  for (; i + 4 <= n; i += 4) s0 += Load(a + i) * Load(b + i);
  const Float4 sum = (s0 + s1) + (s2 + s3);
  float s = (sum[0] + sum[1]) + (sum[2] + sum[3]);
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

// hnswlib's interface to a metric: 1 - dot product, a distance for unit vectors.
class CosineSpace final : public hnswlib::SpaceInterface<float> {
 public:
  explicit CosineSpace(size_t dimension) : dimension_(dimension) {}
  size_t get_data_size() override { return dimension_ * sizeof(float); }
  hnswlib::DISTFUNC<float> get_dist_func() override { return &Distance; }
  void* get_dist_func_param() override { return &dimension_; }

  static float Distance(const void* a, const void* b, const void* param) {
    const size_t n = *static_cast<const size_t*>(param);
    return 1.0f - Dot(static_cast<const float*>(a), static_cast<const float*>(b), n);
  }

 private:
  size_t dimension_;
};

}  // namespace

struct VectorIndex::Impl {
  std::string model;
  size_t dimension = 0;
  size_t unusable = 0;
  std::vector<std::string> ids;  // label (position) -> owner id
  // Exact mode: every vector, normalised, back to back (ids.size() * dimension floats).
  LargeVector<float> flat;
  // Declared before `hnsw`, which points at it and so must be destroyed first.
  std::unique_ptr<CosineSpace> space;
  std::unique_ptr<hnswlib::HierarchicalNSW<float>> hnsw;  // null in exact mode
};

namespace {

constexpr std::string_view kLog = "vector";

// Scales `v`, whose SumOfSquares is `norm2`, to unit length in place; false (and `v` zeroed)
// when that is impossible.
bool Normalise(std::span<float> v, double norm2) {
  if (!(norm2 > 0) || !std::isfinite(norm2)) {
    std::fill(v.begin(), v.end(), 0.0f);
    return false;
  }
  const auto scale = static_cast<float>(1.0 / std::sqrt(norm2));
  for (float& x : v) x *= scale;
  return true;
}

// Most similar first; equal similarities by owner id, so results do not depend on build order.
void SortHits(std::vector<VectorHit>& hits) {
  std::sort(hits.begin(), hits.end(), [](const VectorHit& a, const VectorHit& b) {
    if (a.similarity != b.similarity) return a.similarity > b.similarity;
    return a.id < b.id;
  });
}

}  // namespace

VectorIndex::VectorIndex(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
VectorIndex::~VectorIndex() = default;

size_t VectorIndex::size() const { return impl_->ids.size(); }
size_t VectorIndex::dimension() const { return impl_->dimension; }
const std::string& VectorIndex::model() const { return impl_->model; }
bool VectorIndex::approximate() const { return impl_->hnsw != nullptr; }
size_t VectorIndex::unusable() const { return impl_->unusable; }

Result<std::unique_ptr<VectorIndex>> VectorIndex::Build(Store& store, EmbeddingOwner owner,
                                                        const VectorIndexOptions& options) {
  auto packed = store.ListPackedEmbeddings(owner);
  if (!packed.ok()) {
    return packed.status().WithContext(std::string("loading ") +
                                       std::string(EmbeddingOwnerName(owner)) + " embeddings");
  }
  auto index = FromPacked(std::move(packed).value(), options);
  if (!index.ok() && index.status().code() == ErrorCode::kInvalidArgument) {
    // The store promises one model and dimension per kind: a mix means the file is damaged.
    return Status::Corruption(index.status().message());
  }
  return index;
}

Result<std::unique_ptr<VectorIndex>> VectorIndex::FromRecords(std::vector<EmbeddingRecord> records,
                                                              const VectorIndexOptions& options) {
  GRAG_ASSIGN_OR_RETURN(PackedEmbeddings packed, PackEmbeddings(std::move(records)));
  return FromPacked(std::move(packed), options);
}

Result<std::unique_ptr<VectorIndex>> VectorIndex::FromPacked(PackedEmbeddings packed,
                                                             const VectorIndexOptions& options) {
  auto impl = std::make_unique<Impl>();
  if (packed.ids.empty()) return std::make_unique<VectorIndex>(std::move(impl));

  impl->model = packed.model;
  if (packed.dimension <= 0) {
    return Status::InvalidArgument("embedding of " + packed.ids.front() + " is empty");
  }
  impl->dimension = static_cast<size_t>(packed.dimension);
  const size_t n = packed.ids.size();
  const size_t dim = impl->dimension;
  if (packed.values.size() != n * dim) {
    return Status::InvalidArgument(std::to_string(packed.values.size()) + " values for " +
                                   std::to_string(n) + " vectors of dimension " +
                                   std::to_string(dim));
  }
  try {
    impl->space = std::make_unique<CosineSpace>(dim);
    for (size_t i = 0; i < n; ++i) {
      std::span<float> v(packed.values.data() + i * dim, dim);
      const bool known = packed.sums_of_squares.size() == n;
      if (!Normalise(v, known ? packed.sums_of_squares[i] : SumOfSquares(v))) ++impl->unusable;
    }
    impl->ids = std::move(packed.ids);
    if (n * dim <= options.max_exact_floats) {
      impl->flat = std::move(packed.values);
    } else {
      impl->hnsw = std::make_unique<hnswlib::HierarchicalNSW<float>>(
          impl->space.get(), n, options.hnsw_m, options.hnsw_ef_construction,
          static_cast<size_t>(options.seed));
      impl->hnsw->setEf(options.hnsw_ef_search);
      for (size_t i = 0; i < n; ++i) impl->hnsw->addPoint(packed.values.data() + i * dim, i);
      LargeVector<float>().swap(packed.values);
    }
  } catch (const std::bad_alloc&) {
    return Status::Internal("out of memory building a vector index of " + std::to_string(n) +
                            " vectors of dimension " + std::to_string(dim));
  } catch (const std::exception& e) {
    return Status::Internal(std::string("building a vector index: ") + e.what());
  }
  if (impl->unusable > 0) {
    Log(LogLevel::kWarn, kLog,
        std::to_string(impl->unusable) + " of " + std::to_string(n) +
            " vectors have zero length or non-finite values; they will match nothing");
  }
  Log(LogLevel::kDebug, kLog,
      std::string(impl->hnsw ? "HNSW" : "exact") + " index of " + std::to_string(n) +
          " vectors, dimension " + std::to_string(dim) + ", model '" + impl->model + "'");
  return std::make_unique<VectorIndex>(std::move(impl));
}

Result<std::vector<VectorHit>> VectorIndex::Search(std::span<const float> query, size_t k) const {
  const Impl& m = *impl_;
  std::vector<VectorHit> hits;
  if (m.ids.empty() || k == 0) return hits;
  if (query.size() != m.dimension) {
    return Status::InvalidArgument("query vector has dimension " + std::to_string(query.size()) +
                                   ", the index holds vectors of dimension " +
                                   std::to_string(m.dimension) + " (model '" + m.model + "')");
  }
  std::vector<float> q(query.begin(), query.end());
  Normalise(q, SumOfSquares(q));
  k = std::min(k, m.ids.size());

  try {
    if (m.hnsw) {
      // searchKnn is const and safe to run concurrently once no more points are added.
      auto found = m.hnsw->searchKnn(q.data(), k);
      hits.reserve(found.size());
      while (!found.empty()) {
        const auto [distance, label] = found.top();
        found.pop();
        hits.push_back({m.ids[label], 1.0f - distance});
      }
    } else {
      // A heap of the k best seen so far with the worst on top; among equal distances the
      // larger owner id counts as worse, so ties at the k-th place go to the smaller id.
      using Entry = std::pair<float, size_t>;
      auto worse = [&m](const Entry& a, const Entry& b) {
        if (a.first != b.first) return a.first < b.first;
        return m.ids[a.second] < m.ids[b.second];
      };
      std::priority_queue<Entry, std::vector<Entry>, decltype(worse)> best(worse);
      for (size_t i = 0; i < m.ids.size(); ++i) {
        const float d = 1.0f - Dot(q.data(), m.flat.data() + i * m.dimension, m.dimension);
        if (best.size() < k) {
          best.emplace(d, i);
        } else if (worse(Entry{d, i}, best.top())) {
          best.pop();
          best.emplace(d, i);
        }
      }
      hits.reserve(best.size());
      while (!best.empty()) {
        hits.push_back({m.ids[best.top().second], 1.0f - best.top().first});
        best.pop();
      }
    }
  } catch (const std::exception& e) {
    return Status::Internal(std::string("vector search: ") + e.what());
  }
  SortHits(hits);
  return hits;
}

}  // namespace grag
