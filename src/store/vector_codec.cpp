// Stored vector encodings: see vector_codec.h.
#include "vector_codec.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

namespace grag::store {

static_assert(std::endian::native == std::endian::little,
              "vectors are stored little-endian; add byte swapping for this platform");

uint16_t FloatToHalf(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // infinity or NaN
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7bffu);  // beyond ±65504: clamp
  if (abs < 0x38800000u) {
    // Subnormal half (or zero): value / 2^-24 rounded to nearest even.
    const float magnitude = std::bit_cast<float>(abs);
    const float scaled = magnitude * 16777216.0f;  // 2^24
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(scaled)));
  }
  // Normal: rebias the exponent (127 → 15) and round the 23-bit mantissa to 10 bits, nearest
  // even; a carry into the exponent is the right result.
  uint32_t half = ((abs >> 13) - ((127u - 15u) << 10));
  const uint32_t rest = abs & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;
  return static_cast<uint16_t>(sign | half);
}

float HalfToFloat(uint16_t half) {
  const uint32_t sign = static_cast<uint32_t>(half & 0x8000u) << 16;
  const uint32_t exponent = (half >> 10) & 0x1fu;
  const uint32_t mantissa = half & 0x3ffu;
  if (exponent == 0) {
    const float magnitude = static_cast<float>(mantissa) / 16777216.0f;  // × 2^-24
    return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(magnitude));
  }
  if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 127u - 15u) << 23) | (mantissa << 13));
}

size_t EncodedVectorSize(VectorEncoding encoding, size_t dimension) {
  switch (encoding) {
    case VectorEncoding::kF32:
      return 4 * dimension;
    case VectorEncoding::kF16:
      return 2 * dimension;
    case VectorEncoding::kInt8:
      return 4 + dimension;
  }
  return 4 * dimension;
}

int64_t DecodedDimension(std::string_view bytes, VectorEncoding encoding) {
  const size_t n = bytes.size();
  switch (encoding) {
    case VectorEncoding::kF32:
      return n % 4 == 0 ? static_cast<int64_t>(n / 4) : -1;
    case VectorEncoding::kF16:
      return n % 2 == 0 ? static_cast<int64_t>(n / 2) : -1;
    case VectorEncoding::kInt8:
      return n >= 4 ? static_cast<int64_t>(n - 4) : -1;
  }
  return -1;
}

std::string EncodeVector(std::span<const float> values, VectorEncoding encoding) {
  std::string out(EncodedVectorSize(encoding, values.size()), '\0');
  switch (encoding) {
    case VectorEncoding::kF32:
      if (!values.empty()) std::memcpy(out.data(), values.data(), out.size());
      break;
    case VectorEncoding::kF16:
      for (size_t i = 0; i < values.size(); ++i) {
        const uint16_t h = FloatToHalf(values[i]);
        std::memcpy(out.data() + 2 * i, &h, 2);
      }
      break;
    case VectorEncoding::kInt8: {
      float max_abs = 0;
      for (float v : values) {
        if (std::isfinite(v)) max_abs = std::max(max_abs, std::fabs(v));
      }
      const float scale = max_abs / 127.0f;
      std::memcpy(out.data(), &scale, 4);
      for (size_t i = 0; i < values.size(); ++i) {
        const float v = std::isfinite(values[i]) ? values[i] : 0.0f;
        const float q = scale > 0 ? std::nearbyint(v / scale) : 0.0f;
        const auto byte = static_cast<int8_t>(std::clamp(q, -127.0f, 127.0f));
        std::memcpy(out.data() + 4 + i, &byte, 1);
      }
      break;
    }
  }
  return out;
}

Status DecodeVector(std::string_view bytes, VectorEncoding encoding, std::span<float> out) {
  if (DecodedDimension(bytes, encoding) != static_cast<int64_t>(out.size())) {
    return Status::Corruption("a stored " + std::string(VectorEncodingName(encoding)) +
                              " vector of " + std::to_string(bytes.size()) +
                              " bytes is not of dimension " + std::to_string(out.size()));
  }
  switch (encoding) {
    case VectorEncoding::kF32:
      if (!out.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
      break;
    case VectorEncoding::kF16:
      for (size_t i = 0; i < out.size(); ++i) {
        uint16_t h = 0;
        std::memcpy(&h, bytes.data() + 2 * i, 2);
        out[i] = HalfToFloat(h);
      }
      break;
    case VectorEncoding::kInt8: {
      float scale = 0;
      std::memcpy(&scale, bytes.data(), 4);
      for (size_t i = 0; i < out.size(); ++i) {
        int8_t q = 0;
        std::memcpy(&q, bytes.data() + 4 + i, 1);
        out[i] = static_cast<float>(q) * scale;
      }
      break;
    }
  }
  return Status::Ok();
}

}  // namespace grag::store
