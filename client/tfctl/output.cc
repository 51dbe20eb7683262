#include "client/tfctl/output.h"

#include <yaml-cpp/yaml.h>

#include <regex>

#include "client/terminal_text.h"

namespace tfslurm::tfctl {
namespace {

using nlohmann::json;

// Plain only when no YAML reader could take it for a bool, null, number,
// time or syntax; otherwise double-quoted.
bool CanBePlain(const std::string& s) {
  static const std::regex kPlain(R"([A-Za-z_/][A-Za-z0-9_./ -]*[A-Za-z0-9_./-]|[A-Za-z_/])");
  static const std::regex kReserved("(y|n|yes|no|on|off|true|false|null)", std::regex::icase);
  return std::regex_match(s, kPlain) && !std::regex_match(s, kReserved);
}

void EmitString(YAML::Emitter& e, const std::string& s) {
  if (CanBePlain(s))
    e << s;
  else
    e << YAML::DoubleQuoted << s;
}

void Emit(YAML::Emitter& e, const json& v) {
  switch (v.type()) {
    case json::value_t::object:
      if (v.empty()) {
        e << YAML::Flow << YAML::BeginMap << YAML::EndMap;
        return;
      }
      e << YAML::BeginMap;
      for (const auto& [key, item] : v.items()) {
        e << YAML::Key;
        EmitString(e, key);
        e << YAML::Value;
        Emit(e, item);
      }
      e << YAML::EndMap;
      return;
    case json::value_t::array:
      if (v.empty()) {
        e << YAML::Flow << YAML::BeginSeq << YAML::EndSeq;
        return;
      }
      e << YAML::BeginSeq;
      for (const json& item : v) Emit(e, item);
      e << YAML::EndSeq;
      return;
    case json::value_t::string:
      EmitString(e, v.get<std::string>());
      return;
    case json::value_t::null:
      e << YAML::Null;
      return;
    default:
      // Numbers and booleans as JSON writes them: the shortest text that
      // reads back as the same value.
      e << v.dump();
      return;
  }
}

}  // namespace

std::string ToYaml(const json& value) {
  YAML::Emitter e;
  Emit(e, value);
  return std::string(e.c_str()) + "\n";
}

void PrintStructured(const json& value, OutputFormat format, std::ostream& out) {
  // Exact: EscapeInStructured writes DEL, C1 and bidi controls as \u
  // escapes, which read back as the same characters.
  if (format == OutputFormat::kYaml)
    out << client::EscapeInStructured(ToYaml(value));
  else
    out << client::EscapeInStructured(value.dump(2, ' ', false, json::error_handler_t::replace))
        << "\n";
}

}  // namespace tfslurm::tfctl
