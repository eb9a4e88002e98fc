#include "model/config_fields.h"

#include <cmath>

namespace kvlm {

ConfigFields::ConfigFields(const nlohmann::json& object, std::string source, std::string needs)
    : object_(object), source_(std::move(source)), needs_(std::move(needs)) {}

Result<nlohmann::json> ConfigFields::parse_object(std::string_view text,
                                                  const std::string& source) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return Status::error(source + ": not valid JSON: " + e.what());
  }
  if (!j.is_object()) return Status::error(source + ": expected a JSON object");
  return j;
}

bool ConfigFields::has(const char* field) const {
  return object_.is_object() && object_.contains(field) && !object_.at(field).is_null();
}

Status ConfigFields::error(const std::string& what) const {
  return Status::error(source_ + ": " + what);
}

Result<int64_t> ConfigFields::integer_in(const char* field, int64_t low) const {
  const nlohmann::json& v = object_.at(field);
  // Unsigned values above INT64_MAX read as negative: refused as well.
  if (!v.is_number_integer() || v.get<int64_t>() < low || v.get<int64_t>() > kMaxInt) {
    return error("field '" + std::string(field) + "' must be " +
                 (low > 0 ? "a positive integer" : "an integer >= 0") + ", found " + v.dump() +
                 " (kvlm reads values up to 2^30)");
  }
  return v.get<int64_t>();
}

Result<int64_t> ConfigFields::positive(const char* field) const {
  if (!has(field)) {
    return error("missing required field '" + std::string(field) + "'" +
                 (needs_.empty() ? "" : "; " + needs_));
  }
  return integer_in(field, 1);
}

Result<int64_t> ConfigFields::positive_or(const char* field, int64_t fallback) const {
  if (!has(field)) return fallback;
  return integer_in(field, 1);
}

Result<int64_t> ConfigFields::non_negative_or(const char* field, int64_t fallback) const {
  if (!has(field)) return fallback;
  return integer_in(field, 0);
}

Result<double> ConfigFields::positive_number_or(const char* field, double fallback) const {
  if (!has(field)) return fallback;
  const nlohmann::json& v = object_.at(field);
  if (!v.is_number() || !(v.get<double>() > 0.0) || !std::isfinite(v.get<double>()) ||
      v.get<double>() > 3.0e38) {  // stays finite as a float
    return error("field '" + std::string(field) + "' must be a positive number, found " + v.dump());
  }
  return v.get<double>();
}

Result<bool> ConfigFields::boolean_or(const char* field, bool fallback) const {
  if (!has(field)) return fallback;
  const nlohmann::json& v = object_.at(field);
  if (!v.is_boolean())
    return error("field '" + std::string(field) + "' must be true or false, found " + v.dump());
  return v.get<bool>();
}

std::string ConfigFields::string_or(const char* field, std::string fallback) const {
  return has(field) && object_.at(field).is_string() ? object_.at(field).get<std::string>()
                                                     : fallback;
}

Result<std::set<int64_t>> ConfigFields::index_set(const char* field) const {
  std::set<int64_t> out;
  if (!has(field)) return out;
  const nlohmann::json& v = object_.at(field);
  bool ok = v.is_array();
  if (ok) {
    for (const nlohmann::json& e : v) {
      if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() > kMaxInt) {
        ok = false;
        break;
      }
      out.insert(e.get<int64_t>());
    }
  }
  if (!ok) {
    return error("field '" + std::string(field) + "' must be a list of layer indices, found " +
                 v.dump());
  }
  return out;
}

Result<std::vector<int32_t>> ConfigFields::token_ids(const char* field, int64_t n_vocab) const {
  std::vector<int32_t> ids;
  if (!has(field)) return ids;
  const nlohmann::json& v = object_.at(field);
  const nlohmann::json list = v.is_array() ? v : nlohmann::json::array({v});
  if (list.empty()) return error("field '" + std::string(field) + "' must be a token id, found []");
  for (const nlohmann::json& item : list) {
    if (!item.is_number_integer())
      return error("field '" + std::string(field) + "' must be a token id, found " + v.dump());
    const int64_t id = item.get<int64_t>();
    if (id < 0 || id >= n_vocab) {
      return error(std::string(field) + " " + item.dump() + " is outside the vocabulary [0, " +
                   std::to_string(n_vocab) + ")");
    }
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

Status ConfigFields::positive(const char* field, int* out) const {
  Result<int64_t> v = positive(field);
  KVLM_RETURN_IF_ERROR(v);
  *out = static_cast<int>(v.value());
  return Status::ok();
}

Status ConfigFields::positive_or(const char* field, int64_t fallback, int* out) const {
  Result<int64_t> v = positive_or(field, fallback);
  KVLM_RETURN_IF_ERROR(v);
  *out = static_cast<int>(v.value());
  return Status::ok();
}

Status ConfigFields::positive_number_or(const char* field, float fallback, float* out) const {
  Result<double> v = positive_number_or(field, fallback);
  KVLM_RETURN_IF_ERROR(v);
  *out = static_cast<float>(v.value());
  return Status::ok();
}

Status ConfigFields::boolean_or(const char* field, bool fallback, bool* out) const {
  Result<bool> v = boolean_or(field, fallback);
  KVLM_RETURN_IF_ERROR(v);
  *out = v.value();
  return Status::ok();
}

Status ConfigFields::token_id(const char* field, int64_t n_vocab, int* first,
                              std::vector<int32_t>* all) const {
  Result<std::vector<int32_t>> ids = token_ids(field, n_vocab);
  KVLM_RETURN_IF_ERROR(ids);
  if (ids->empty()) return Status::ok();
  *first = ids.value()[0];
  if (all) *all = ids.value();
  return Status::ok();
}

}  // namespace kvlm
