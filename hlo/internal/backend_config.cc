// backend_config: the JSON XLA's TPU and GPU compilers attach to instructions (GpuBackendConfig, the TPU's
// backend config), read with nlohmann_json. Only what spmdsim uses is typed (hlo/ir.h Attributes); the rest stays
// in the text.
#include <charconv>
#include <string>

#include <nlohmann/json.hpp>

#include "common/user_text.h"
#include "hlo/internal/scanner.h"

namespace spmdsim::hlo::internal {
namespace {

// The most loop iterations a known_trip_count may give (larger ones are not a trip count spmdsim can simulate).
constexpr int64_t kMaxTripCount = int64_t{1} << 50;

// Whether the text's brackets nest at most kMaxNesting deep (nlohmann's values are freed recursively).
bool NestsShallowly(std::string_view text) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      if (++depth > kMaxNesting) return false;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return true;
}

const nlohmann::json* Member(const nlohmann::json& object, const char* key) {
  if (!object.is_object()) return nullptr;
  const auto it = object.find(key);
  return it == object.end() ? nullptr : &*it;
}

bool BoolMember(const nlohmann::json* object, const char* key) {
  const nlohmann::json* v = object == nullptr ? nullptr : Member(*object, key);
  return v != nullptr && v->is_boolean() && v->get<bool>();
}

// known_trip_count.n ("4" in proto JSON, or 4): an integer from 0 to 2^50, else a failure at its column (`base`:
// where the JSON text starts in the module, or npos when it was unescaped from a string: then the value's start).
int64_t TripCount(Scanner& s, const nlohmann::json& n, std::string_view json, size_t base) {
  std::string text = n.is_string() ? n.get<std::string>() : n.is_number() ? n.dump() : "";
  int64_t value = -1;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (!text.empty() && ec == std::errc() && ptr == text.data() + text.size() && value >= 0 && value <= kMaxTripCount) {
    return value;
  }
  size_t at = s.pos();
  const size_t key = json.find("\"known_trip_count\"");
  if (base != std::string_view::npos && key != std::string_view::npos) {
    const size_t n_key = json.find("\"n\"", key);
    const size_t value_at = n_key == std::string_view::npos ? key : json.find_first_not_of(" :\"", n_key + 3);
    at = base + (value_at == std::string_view::npos ? key : value_at);
  }
  s.FailAt(at, fmt::format("known_trip_count {} must be an integer from 0 to 2^50 (the most loop iterations spmdsim "
                           "simulates)", QuoteForError(text.empty() ? n.dump() : text)));
}

}  // namespace

void ReadBackendConfig(Scanner& s, Attributes* a) {
  s.SkipSpace();
  size_t base = std::string_view::npos;  // where the JSON text starts in the module, when it is not unescaped
  if (s.Peek() == '"') {
    a->backend_config = s.QuotedString("backend_config");
  } else {
    base = s.pos();
    const auto [b, e] = s.RawValue("backend_config");
    a->backend_config = ValidUtf8(s.text().substr(b, e - b));
  }
  const std::string& text = a->backend_config;
  if (text.empty() || text.front() != '{' || !NestsShallowly(text)) return;
  const nlohmann::json config = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded() || !config.is_object()) return;  // not JSON: kept as text, as XLA keeps it
  if (const nlohmann::json* trip = Member(config, "known_trip_count")) {
    if (const nlohmann::json* n = Member(*trip, "n")) a->known_trip_count = TripCount(s, *n, text, base);
  }
  const nlohmann::json* collective = Member(config, "collective_backend_config");
  a->is_sync = BoolMember(collective, "is_sync");
  a->is_pipelined = BoolMember(collective, "is_pipelined");
  if (const nlohmann::json* fusion = Member(config, "fusion_backend_config")) {
    if (const nlohmann::json* kind = Member(*fusion, "kind"); kind != nullptr && kind->is_string()) {
      a->gpu_fusion_kind = kind->get<std::string>();
    }
  }
  a->has_async_collective_fusion_config = Member(config, "async_collective_fusion_config") != nullptr;
}

}  // namespace spmdsim::hlo::internal
