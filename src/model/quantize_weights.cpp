#include "model/quantize_weights.h"

#include <omp.h>

#include <algorithm>
#include <cstring>

#include "ops/half_rows.h"
#include "ops/quant.h"
#include "ops/thread_team.h"

namespace kvlm {

bool store_row(std::vector<uint8_t>* out, const float* row, size_t n, DType to) {
  const size_t at = out->size();
  out->resize(at + dtype_bytes(to, n));
  uint8_t* dst = out->data() + at;
  switch (to) {
    case DType::kF32:
      std::memcpy(dst, row, n * 4);
      return true;
    case DType::kF16:
      f32_to_f16_row(reinterpret_cast<uint16_t*>(dst), row, n);
      return true;
    case DType::kBF16:
      f32_to_bf16_row(reinterpret_cast<uint16_t*>(dst), row, n);
      return true;
    default:
      return quantize_row(dst, row, to, n);
  }
}

Result<std::vector<uint8_t>> weight_matrix_bytes(const WeightMatrix& m, DType to,
                                                 const std::string& name, int n_threads) {
  const size_t n_in = m.n_in, n_out = m.n_out;
  const size_t block = dtype_block_elements(to);
  if (n_in % block != 0)
    return Status::error(name + ": " + dtype_name(to) + " stores rows in blocks of " +
                         std::to_string(block) + " values, but the matrix's input width is " +
                         std::to_string(n_in));
  const size_t in_bytes = dtype_bytes(m.dtype, n_in), out_bytes = dtype_bytes(to, n_in);
  std::vector<uint8_t> out(out_bytes * n_out);
  const int threads = static_cast<int>(std::clamp<size_t>(n_out, 1, std::max(1, n_threads)));
  run_team(threads, [&](int t, int nt) {
    std::vector<float> row(n_in);
    std::vector<uint8_t> converted;
    const auto [begin, end] = static_share(n_out, t, nt);
    for (size_t o = begin; o < end; ++o) {
      if (m.layout == WeightLayout::kOutIn) {
        dequantize_row(row.data(), static_cast<const uint8_t*>(m.data) + o * in_bytes, m.dtype,
                       n_in);
      } else {  // kInOut: plain types only
        for (size_t i = 0; i < n_in; ++i) row[i] = load_as_f32(m.data, m.dtype, i * n_out + o);
      }
      converted.clear();
      store_row(&converted, row.data(), n_in, to);
      std::memcpy(out.data() + o * out_bytes, converted.data(), out_bytes);
    }
  });
  return out;
}

Result<WeightMatrix> convert_weight_matrix(const WeightMatrix& m, DType to, OwnedTensors* owned,
                                           const std::string& name, int n_threads) {
  // By default every core (OMP_NUM_THREADS caps it): the K-quants' scale searches run at about
  // 7M weights/s per core, and the bytes do not depend on the thread count.
  if (n_threads <= 0) n_threads = omp_get_max_threads();
  KVLM_ASSIGN_OR_RETURN(const auto bytes, weight_matrix_bytes(m, to, name, n_threads));
  void* dst = owned->allocate(bytes.size());
  std::memcpy(dst, bytes.data(), bytes.size());
  WeightMatrix out = m;
  out.data = dst;
  out.dtype = to;
  out.layout = WeightLayout::kOutIn;
  return out;
}

DType stored_weight_type(DType wanted, int64_t n_in, DType source) {
  const auto fits = [n_in](DType t) {
    return n_in % static_cast<int64_t>(dtype_block_elements(t)) == 0;
  };
  if (fits(wanted)) return wanted;
  if (wanted != DType::kQ4_K && wanted != DType::kQ6_K) return source;
  const DType fallback = wanted == DType::kQ4_K ? DType::kQ5_0 : DType::kQ8_0;
  return fits(fallback) ? fallback : DType::kF16;
}

Result<WeightMatrix> convert_matrix_on_load(const WeightMatrix& m, DType to, OwnedTensors* owned,
                                            const std::string& name, int n_threads) {
  const DType stored = stored_weight_type(to, m.n_in, m.dtype);
  if (stored == m.dtype) return m;
  return convert_weight_matrix(m, stored, owned, name, n_threads);
}

std::string count_weight_types(const std::vector<const WeightMatrix*>& matrices) {
  std::vector<std::pair<int, std::string>> counts;  // (count, type name)
  for (const WeightMatrix* m : matrices) {
    const std::string name = dtype_name(m->dtype);
    auto it =
        std::find_if(counts.begin(), counts.end(), [&](const auto& c) { return c.second == name; });
    if (it == counts.end()) {
      counts.emplace_back(1, name);
    } else {
      ++it->first;
    }
  }
  std::stable_sort(counts.begin(), counts.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  std::string out;
  for (const auto& [n, name] : counts)
    out += (out.empty() ? "" : ", ") + name + " x " + std::to_string(n);
  return out;
}

}  // namespace kvlm
