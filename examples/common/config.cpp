#include "examples/common/config.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <utility>

namespace tapegrad::examples {

const char* type_name(ConfigType type) {
  switch (type) {
    case ConfigType::Int:
      return "integer";
    case ConfigType::Float:
      return "float";
    case ConfigType::Bool:
      return "bool";
    case ConfigType::String:
      return "string";
  }
  return "?";
}

namespace {

// text as a JSON string, cut short: keys come from the user's files and may be of any length.
std::string json_quoted(const std::string& text) { return io::json_excerpt(nlohmann::json(text), 80); }

std::string join(const std::vector<std::string>& items, const char* separator) {
  std::string out;
  for (std::size_t i = 0; i < items.size(); ++i) out += (i ? separator : "") + items[i];
  return out;
}

// The value as the user would write it on the command line.
std::string show(const nlohmann::json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number_float()) return format_number(value.get<double>());
  return io::json_excerpt(value);
}

}  // namespace

Config::Config(std::string program, std::string summary) : program_(std::move(program)), summary_(std::move(summary)) {}

void Config::declare(const std::string& key, ConfigType type, const nlohmann::json& default_value,
                     const std::string& description, std::vector<std::string> choices) {
  if (key.empty() || key == "config" || key == "help" || key == "print-config")
    throw ConfigError(program_ + ": option name " + json_quoted(key) + " is empty or reserved");
  if (options_.count(key)) throw ConfigError(program_ + ": option " + json_quoted(key) + " declared twice");
  if (!choices.empty() && std::find(choices.begin(), choices.end(), default_value.get<std::string>()) == choices.end())
    throw ConfigError(program_ + ": default of option " + json_quoted(key) + " is not one of its choices");
  Option option{type, description, std::move(choices), default_value, default_value};
  options_.emplace(key, std::move(option));
  order_.push_back(key);
}

void Config::add_int(const std::string& key, std::int64_t default_value, const std::string& description) {
  declare(key, ConfigType::Int, default_value, description);
}
void Config::add_float(const std::string& key, double default_value, const std::string& description) {
  declare(key, ConfigType::Float, default_value, description);
}
void Config::add_bool(const std::string& key, bool default_value, const std::string& description) {
  declare(key, ConfigType::Bool, default_value, description);
}
void Config::add_string(const std::string& key, const std::string& default_value, const std::string& description,
                        const std::vector<std::string>& choices) {
  declare(key, ConfigType::String, default_value, description, choices);
}

void Config::assign(const std::string& key, const nlohmann::json& value, const std::string& subject) {
  Option& option = options_.at(key);
  bool ok = false;
  nlohmann::json stored = value;
  switch (option.type) {
    case ConfigType::Int:
      ok = value.is_number_integer();
      if (value.is_number_unsigned() && value.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) ok = false;
      if (ok) stored = value.get<std::int64_t>();
      break;
    case ConfigType::Float:
      ok = value.is_number() && std::isfinite(value.get<double>());
      if (ok) stored = value.get<double>();
      break;
    case ConfigType::Bool:
      ok = value.is_boolean();
      break;
    case ConfigType::String:
      ok = value.is_string();
      break;
  }
  if (!ok)
    throw ConfigError(subject + " expects " + (option.type == ConfigType::Int ? "an " : "a ") + type_name(option.type) +
                      ", got " + io::json_excerpt(value));
  if (!option.choices.empty() &&
      std::find(option.choices.begin(), option.choices.end(), stored.get<std::string>()) == option.choices.end())
    throw ConfigError(subject + " expects one of " + join(option.choices, ", ") + ", got " + io::json_excerpt(value));
  option.value = std::move(stored);
}

void Config::merge_json(const nlohmann::json& values, const std::string& origin) {
  if (!values.is_object()) throw ConfigError(origin + ": expected a JSON object of options, got " + values.type_name());
  for (const auto& [key, value] : values.items()) {
    if (!options_.count(key)) throw ConfigError(origin + ": unknown key " + json_quoted(key) + " (see --help)");
    assign(key, value, origin + ": key " + json_quoted(key));
  }
}

void Config::load_file(const std::string& path) {
  nlohmann::json values;
  try {
    values = io::read_json_file(path);
  } catch (const IoError& e) {
    throw ConfigError(program_ + ": " + e.what());
  }
  merge_json(values, path);
}

void Config::set_from_string(const std::string& key, const std::string& text) {
  const auto it = options_.find(key);
  if (it == options_.end()) throw ConfigError(program_ + ": unknown option --" + key + " (see --help)");
  const ConfigType type = it->second.type;
  const std::string where = program_ + ": option --" + key;
  auto reject = [&]() {
    return ConfigError(where + " expects " + (type == ConfigType::Int ? "an " : "a ") + type_name(type) + ", got " +
                       json_quoted(text));
  };
  nlohmann::json value;
  switch (type) {
    case ConfigType::Int: {
      if (text.empty()) throw reject();
      errno = 0;
      char* end = nullptr;
      const long long parsed = std::strtoll(text.c_str(), &end, 10);
      if (errno == ERANGE || end != text.c_str() + text.size() || std::isspace(static_cast<unsigned char>(text[0])))
        throw reject();
      value = static_cast<std::int64_t>(parsed);
      break;
    }
    case ConfigType::Float: {
      if (text.empty()) throw reject();
      errno = 0;
      char* end = nullptr;
      const double parsed = std::strtod(text.c_str(), &end);
      if (errno == ERANGE || end != text.c_str() + text.size() || !std::isfinite(parsed) ||
          std::isspace(static_cast<unsigned char>(text[0])))
        throw reject();
      value = parsed;
      break;
    }
    case ConfigType::Bool: {
      std::string lower = text;
      std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
      if (lower == "true" || lower == "1" || lower == "yes" || lower == "on") value = true;
      else if (lower == "false" || lower == "0" || lower == "no" || lower == "off") value = false;
      else throw reject();
      break;
    }
    case ConfigType::String:
      value = text;
      break;
  }
  assign(key, value, where);
}

std::vector<std::string> Config::parse_args(int argc, const char* const* argv, int first) {
  struct Flag {
    std::string key;
    std::string value;
    bool has_value;
  };
  std::vector<Flag> flags;
  std::vector<std::string> positional;
  std::string config_file;
  for (int i = first; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") {
      for (++i; i < argc; ++i) positional.emplace_back(argv[i]);
      break;
    }
    if (arg.rfind("--", 0) != 0 || arg.size() == 2) {
      positional.push_back(arg);
      continue;
    }
    std::string key = arg.substr(2);
    std::string value;
    bool has_value = false;
    if (const auto eq = key.find('='); eq != std::string::npos) {
      value = key.substr(eq + 1);
      key = key.substr(0, eq);
      has_value = true;
    }
    if (key == "help" || key == "print-config") {
      if (has_value) throw ConfigError(program_ + ": option --" + key + " takes no value");
      (key == "help" ? help_requested_ : print_config_requested_) = true;
      continue;
    }
    // --data-dir and --data_dir name the same option.
    const std::string typed = key;
    std::replace(key.begin(), key.end(), '-', '_');
    const auto it = options_.find(key);
    if (key != "config" && it == options_.end())
      throw ConfigError(program_ + ": unknown option --" + typed + " (see --help)");
    const bool is_bool = key != "config" && it->second.type == ConfigType::Bool;
    if (!has_value) {
      const bool next_is_value = i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0;
      if (is_bool && !next_is_value) {
        value = "true";  // a bare --flag switches it on
      } else if (i + 1 < argc && (next_is_value || !is_bool)) {
        value = argv[++i];
      } else {
        throw ConfigError(program_ + ": option --" + key + " needs a value (" +
                          (key == "config" ? "a file name" : type_name(it->second.type)) + ")");
      }
    }
    if (key == "config") config_file = value;
    else flags.push_back({key, value, true});
  }
  // The file first, so flags override it wherever they appear on the line.
  if (!config_file.empty()) load_file(config_file);
  for (const Flag& flag : flags) set_from_string(flag.key, flag.value);
  return positional;
}

const Config::Option& Config::find(const std::string& key, ConfigType type) const {
  const auto it = options_.find(key);
  if (it == options_.end()) throw ConfigError(program_ + ": no option " + json_quoted(key) + " declared");
  if (it->second.type != type)
    throw ConfigError(program_ + ": option " + json_quoted(key) + " is " + type_name(it->second.type) + ", read as " +
                      type_name(type));
  return it->second;
}

std::int64_t Config::get_int(const std::string& key) const {
  return find(key, ConfigType::Int).value.get<std::int64_t>();
}
double Config::get_float(const std::string& key) const { return find(key, ConfigType::Float).value.get<double>(); }
bool Config::get_bool(const std::string& key) const { return find(key, ConfigType::Bool).value.get<bool>(); }
const std::string& Config::get_string(const std::string& key) const {
  return find(key, ConfigType::String).value.get_ref<const std::string&>();
}

nlohmann::json Config::to_json() const {
  nlohmann::json out = nlohmann::json::object();
  for (const std::string& key : order_) out[key] = options_.at(key).value;
  return out;
}

std::string Config::help(const std::string& usage) const {
  std::ostringstream out;
  out << program_ << ": " << summary_ << "\n\n";
  out << "Usage: " << (usage.empty() ? program_ + " [--config FILE] [--key value | --key=value ...]" : usage) << "\n\n";
  out << "Options (precedence: defaults < --config FILE < flags):\n";
  out << "  --config FILE  JSON object of options (keys as below)\n";
  out << "  --print-config print the resolved options as JSON and exit\n";
  out << "  --help         this text\n";
  for (const std::string& key : order_) {
    const Option& option = options_.at(key);
    std::string type = type_name(option.type);
    if (!option.choices.empty()) type = join(option.choices, "|");
    out << "  --" << key << " <" << type << ">  (default "
        << (option.default_value.is_string() ? json_quoted(show(option.default_value)) : show(option.default_value))
        << ")\n";
    out << "      " << option.description << "\n";
  }
  return out.str();
}

int parse_command_line(Config& config, int argc, const char* const* argv, int first,
                       std::vector<std::string>* positional, const std::string& usage, std::size_t max_positional) {
  try {
    std::vector<std::string> rest = config.parse_args(argc, argv, first);
    if (config.help_requested()) {
      std::cout << config.help(usage);
      return 0;
    }
    if (rest.size() > max_positional)
      throw ConfigError(config.program() + ": unexpected argument " + json_quoted(rest[max_positional]) +
                        " (options are written --key value; see --help)");
    if (config.print_config_requested()) {
      std::cout << config.to_json().dump(2) << "\n";
      return 0;
    }
    if (positional) *positional = std::move(rest);
    return -1;
  } catch (const ConfigError& e) {
    std::cerr << e.what() << "\n";
    return kConfigErrorExit;
  }
}

}  // namespace tapegrad::examples
