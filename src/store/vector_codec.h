// Stored vector encodings (VectorEncoding, grag/store_types.h), internal to the store module: the
// bytes a backend keeps for a vector and back. Little-endian, as the store's other blobs.
//
//   f32:  4 bytes a value, the floats as they are.
//   f16:  2 bytes a value, IEEE 754 half precision, rounded to nearest even; values beyond the
//         half range become ±65504 (no infinities from finite input).
//   int8: a 4-byte float scale s = max |v| / 127, then one signed byte q a value: v ≈ q × s.
//         Cosine similarity ignores the scale, so it only matters to readers of raw values.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "grag/status.h"
#include "grag/store_types.h"

namespace grag::store {

// Bytes a vector of `dimension` values takes in `encoding`.
size_t EncodedVectorSize(VectorEncoding encoding, size_t dimension);

// The stored bytes of `values`.
std::string EncodeVector(std::span<const float> values, VectorEncoding encoding);

// Decodes `bytes` into `out` (dimension values); kCorruption when the size does not match.
Status DecodeVector(std::string_view bytes, VectorEncoding encoding, std::span<float> out);

// The dimension `bytes` hold in `encoding`, or -1 when no dimension fits.
int64_t DecodedDimension(std::string_view bytes, VectorEncoding encoding);

// One value to half precision and back (exposed for tests).
uint16_t FloatToHalf(float value);
float HalfToFloat(uint16_t half);

}  // namespace grag::store
