#include "client/spec_file.h"

#include "client/yaml_errors.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>

namespace tfslurm::client {
namespace {

using nlohmann::json;

// Thrown inside the conversion only, caught by YamlToJson.
struct ConversionError {
  std::string message;
};

std::string Where(const std::string& name, const YAML::Mark& mark) {
  return name + ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

// An integer in YAML 1.2 core notation ([-+]digits, 0o octal, 0x hex), or
// nullopt when the text is not one or does not fit 64 bits.
std::optional<json> CoreInteger(const std::string& text) {
  static const std::regex kInteger(R"([-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)");
  if (!std::regex_match(text, kInteger)) return std::nullopt;
  int base = 10;
  std::string_view digits = text;
  bool negative = false;
  if (text.rfind("0o", 0) == 0 || text.rfind("0x", 0) == 0) {
    base = text[1] == 'o' ? 8 : 16;
    digits.remove_prefix(2);
  } else if (text[0] == '-' || text[0] == '+') {
    negative = text[0] == '-';
    digits.remove_prefix(1);
  }
  uint64_t magnitude = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), magnitude, base);
  if (ec != std::errc() || end != digits.data() + digits.size()) return std::nullopt;
  if (!negative) return json(magnitude);
  if (magnitude > uint64_t{1} << 63) return std::nullopt;
  return json(static_cast<int64_t>(0 - magnitude));
}

// A plain scalar by YAML 1.2's core schema. An integer too large for 64 bits
// becomes a float, as in JSON parsers; infinities and NaN have no JSON form
// and stay strings.
json CoreScalar(const std::string& text) {
  static const std::regex kNull("~|null|Null|NULL");
  static const std::regex kTrue("true|True|TRUE");
  static const std::regex kFalse("false|False|FALSE");
  static const std::regex kFloat(R"([-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?)");
  if (text.empty() || std::regex_match(text, kNull)) return nullptr;
  if (std::regex_match(text, kTrue)) return true;
  if (std::regex_match(text, kFalse)) return false;
  if (auto integer = CoreInteger(text)) return *integer;
  if (std::regex_match(text, kFloat)) return std::stod(text);
  return text;
}

json ToJson(const YAML::Node& node, const std::string& name) {
  switch (node.Type()) {
    case YAML::NodeType::Undefined:
    case YAML::NodeType::Null:
      return nullptr;
    case YAML::NodeType::Scalar:
      // yaml-cpp tags plain scalars "?" and quoted ones "!": only plain
      // scalars are typed, so "5" stays a string as it would in JSON.
      if (node.Tag() == "?") return CoreScalar(node.Scalar());
      return node.Scalar();
    case YAML::NodeType::Sequence: {
      json array = json::array();
      for (const YAML::Node& item : node) array.push_back(ToJson(item, name));
      return array;
    }
    case YAML::NodeType::Map: {
      json object = json::object();
      for (const auto& entry : node) {
        if (!entry.first.IsScalar())
          throw ConversionError{Where(name, entry.first.Mark()) +
                                ": a mapping key must be a plain name, like `cluster`"};
        object[entry.first.Scalar()] = ToJson(entry.second, name);
      }
      return object;
    }
  }
  return nullptr;
}

}  // namespace

StatusOr<json> YamlToJson(const std::string& text, const std::string& name) {
  std::vector<YAML::Node> documents;
  try {
    documents = YAML::LoadAll(text);
  } catch (const YAML::ParserException& e) {
    return Error(ExplainYamlError(text, name, e.mark.line, e.mark.column, e.msg));
  }
  if (documents.empty() || documents[0].IsNull())
    return Error(name + ": the file is empty; it must hold an experiment spec");
  if (documents.size() > 1)
    return Error(name + ": holds " + std::to_string(documents.size()) +
                 " YAML documents; put one experiment spec in the file");
  try {
    return ToJson(documents[0], name);
  } catch (const ConversionError& e) {
    return Error(e.message);
  }
}

StatusOr<json> LoadSpecFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error(path + ": cannot read the spec file: " + std::strerror(errno));
  std::stringstream text;
  text << in.rdbuf();
  bool is_json = path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0;
  if (!is_json) return YamlToJson(text.str(), path);
  try {
    return json::parse(text.str());
  } catch (const json::parse_error& e) {
    return Error(path + ": not valid JSON: " + e.what());
  }
}

}  // namespace tfslurm::client
