#pragma once
// Typed run configuration for the example programs: a schema of named, typed options with
// defaults and descriptions; values come from (lowest to highest precedence) the defaults, a
// JSON file (--config FILE) and command-line flags (--key value or --key=value).
//
// A program writes its options once, as a plain struct whose static `fields` lists each field with
// its key and description (and, for a string, its choices); the defaults are the members' initialisers:
//
//   struct ReversalConfig {
//     std::int64_t steps = 2000;
//     double lr = 1e-3;
//     std::string positions = "all";
//     template <class F> static void fields(F& f) {
//       f("steps", &ReversalConfig::steps, "optimiser steps per training");
//       f("lr", &ReversalConfig::lr, "Adam learning rate");
//       f("positions", &ReversalConfig::positions, "position encoding", {"learned", "sinusoidal", "rotary", "all"});
//     }
//   };
//   examples::Config config = examples::make_config<ReversalConfig>("sequence_reversal", "Learns to reverse strings.");
//   std::vector<std::string> rest = config.parse_args(argc, argv);   // throws ConfigError
//   const ReversalConfig c = examples::read_config<ReversalConfig>(config);
//   examples::flag(&ReversalConfig::steps)   // "--steps", for messages about the field
//
// Every mistake throws ConfigError naming the key and, for a bad value, the expected type:
//   "option --steps expects an integer, got \"ten\""
//   "config.json: unknown key \"stpes\" (see --help)"
// Integers accept only whole numbers; floats accept any finite number; bools accept JSON
// true/false or, on the command line, true/false/1/0/yes/no/on/off (a bare --flag means true
// when no value follows it); strings may be limited to a list of choices. On the command line
// '-' and '_' in a key are the same (--data-dir is --data_dir).

#include <cstdint>
#include <map>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "tapegrad/autograd/error.h"
#include "tapegrad/autograd/format.h"
#include "tapegrad/io/json.h"

namespace tapegrad::examples {

// A bad configuration: unknown key, ill-typed or out-of-range value, unreadable config file.
// Programs print what() and exit with status 2.
class ConfigError : public ValueError {
 public:
  using ValueError::ValueError;
};

// Exit status of a program whose command line or configuration was rejected.
inline constexpr int kConfigErrorExit = 2;

enum class ConfigType { Int, Float, Bool, String };

// "integer", "float", "bool", "string".
const char* type_name(ConfigType type);

class Config {
 public:
  Config(std::string program, std::string summary);

  // Declares an option; throws ConfigError for a duplicate or empty name.
  void add_int(const std::string& key, std::int64_t default_value, const std::string& description);
  void add_float(const std::string& key, double default_value, const std::string& description);
  void add_bool(const std::string& key, bool default_value, const std::string& description);
  void add_string(const std::string& key, const std::string& default_value, const std::string& description,
                  const std::vector<std::string>& choices = {});

  // Overrides values from a JSON object (keys as declared). `origin` names the source in
  // messages (a file name).
  void merge_json(const nlohmann::json& values, const std::string& origin);
  // Reads a JSON file and merges it; ConfigError naming the file when it cannot be read or parsed.
  void load_file(const std::string& path);
  // Sets one value from command-line text, converted to the option's type.
  void set_from_string(const std::string& key, const std::string& text);

  // Parses argv[first..]: "--config FILE" is applied first, then every --key value / --key=value
  // in order; "--help" sets help_requested(), "--print-config" print_config_requested().
  // Arguments that do not start with "--" are returned in order (subcommands, file names). "--"
  // ends the flags: everything after it is returned.
  std::vector<std::string> parse_args(int argc, const char* const* argv, int first = 1);
  bool help_requested() const { return help_requested_; }
  bool print_config_requested() const { return print_config_requested_; }

  std::int64_t get_int(const std::string& key) const;
  double get_float(const std::string& key) const;
  bool get_bool(const std::string& key) const;
  const std::string& get_string(const std::string& key) const;
  bool has(const std::string& key) const { return options_.count(key) != 0; }

  // The current values as one JSON object (what a run records in config.json).
  nlohmann::json to_json() const;
  // Usage text: the summary, then every option with its type, default and description.
  std::string help(const std::string& usage = "") const;
  const std::string& program() const { return program_; }

 private:
  struct Option {
    ConfigType type;
    std::string description;
    std::vector<std::string> choices;
    nlohmann::json default_value;
    nlohmann::json value;
  };
  void declare(const std::string& key, ConfigType type, const nlohmann::json& default_value,
               const std::string& description, std::vector<std::string> choices = {});
  const Option& find(const std::string& key, ConfigType type) const;
  // Checks a JSON value against the declared option `key` and stores it; subject begins the
  // message ("file.json: key \"steps\"" or "program: option --steps").
  void assign(const std::string& key, const nlohmann::json& value, const std::string& subject);

  std::string program_;
  std::string summary_;
  std::map<std::string, Option> options_;
  std::vector<std::string> order_;  // declaration order, for help and to_json
  bool help_requested_ = false;
  bool print_config_requested_ = false;
};

// The front end of every example's main(): parses argv[first..] into config and handles what
// ends the program at once. Returns an exit status when the program should stop now: 0 after
// printing --help or --print-config (the resolved configuration as JSON) to stdout, 2
// (kConfigErrorExit) after printing a ConfigError to stderr, also when positional arguments are
// given but max_positional is 0. Otherwise returns -1 and fills *positional (may be null).
int parse_command_line(Config& config, int argc, const char* const* argv, int first,
                       std::vector<std::string>* positional, const std::string& usage = "",
                       std::size_t max_positional = 0);

// ---------------------------------------------------------------- typed configs (a struct's `fields`)

namespace detail {

// Declares each field of T in a Config, with the default taken from a default-constructed T.
template <class T>
struct DeclareFields {
  Config& config;
  const T defaults{};
  void operator()(const std::string& key, std::int64_t T::*m, const std::string& description) {
    config.add_int(key, defaults.*m, description);
  }
  void operator()(const std::string& key, double T::*m, const std::string& description) {
    config.add_float(key, defaults.*m, description);
  }
  void operator()(const std::string& key, bool T::*m, const std::string& description) {
    config.add_bool(key, defaults.*m, description);
  }
  void operator()(const std::string& key, std::string T::*m, const std::string& description,
                  const std::vector<std::string>& choices = {}) {
    config.add_string(key, defaults.*m, description, choices);
  }
};

// Copies the Config's values into the fields of a T.
template <class T>
struct ReadFields {
  const Config& config;
  T& out;
  void operator()(const std::string& key, std::int64_t T::*m, const std::string&) { out.*m = config.get_int(key); }
  void operator()(const std::string& key, double T::*m, const std::string&) { out.*m = config.get_float(key); }
  void operator()(const std::string& key, bool T::*m, const std::string&) { out.*m = config.get_bool(key); }
  void operator()(const std::string& key, std::string T::*m, const std::string&, const std::vector<std::string>& = {}) {
    out.*m = config.get_string(key);
  }
};

// Finds the key of one field.
template <class T, class M>
struct FindKey {
  M T::*target;
  std::string key;
  template <class N>
  void operator()(const std::string& k, N T::*m, const std::string&, const std::vector<std::string>& = {}) {
    if constexpr (std::is_same_v<M, N>)
      if (m == target) key = k;
  }
};

}  // namespace detail

// A Config holding T's fields, with T's defaults.
template <class T>
Config make_config(std::string program, std::string summary) {
  Config config(std::move(program), std::move(summary));
  detail::DeclareFields<T> declare{config};
  T::fields(declare);
  return config;
}

// The same with other defaults: a program that reads another's options but not all of their defaults
// (bench/lm_libtorch.cpp: the language model's options with its own run_dir).
template <class T>
Config make_config(std::string program, std::string summary, const T& defaults) {
  Config config(std::move(program), std::move(summary));
  detail::DeclareFields<T> declare{config, defaults};
  T::fields(declare);
  return config;
}

// The Config's current values as a T (config made by make_config<T>).
template <class T>
T read_config(const Config& config) {
  T out;
  detail::ReadFields<T> read{config, out};
  T::fields(read);
  return out;
}

// The key of a field of T, as its `fields` names it ("steps" for &Config::steps).
template <class T, class M>
std::string key_of(M T::*member) {
  detail::FindKey<T, M> find{member, {}};
  T::fields(find);
  if (find.key.empty()) throw ConfigError("key_of: the field is not listed in fields()");
  return find.key;
}

// "--steps": the command-line flag of a field, for messages.
template <class T, class M>
std::string flag(M T::*member) {
  return "--" + key_of(member);
}

// A value as messages show it: 3, 0.5, true, "text".
inline std::string show_value(std::int64_t v) { return std::to_string(v); }
inline std::string show_value(double v) { return format_number(v); }
inline std::string show_value(bool v) { return v ? "true" : "false"; }
inline std::string show_value(const std::string& v) { return nlohmann::json(v).dump(); }

// ", got --a 1, --b 2": the values of the fields a message is about.
template <class T, class... M>
std::string got(const T& config, M T::*... members) {
  std::string out;
  ((out += (out.empty() ? ", got " : ", ") + flag(members) + " " + show_value(config.*members)), ...);
  return out;
}

// ConfigError "<program>: <message>" unless ok.
inline void require(bool ok, const std::string& program, const std::string& message) {
  if (!ok) throw ConfigError(program + ": " + message);
}

// ConfigError "<program>: --steps must be positive, got -3" for the first listed field that is not > 0.
template <class T, class... M>
void require_positive(const std::string& program, const T& config, M T::*... members) {
  ((require(config.*members > 0, program, flag(members) + " must be positive, got " + show_value(config.*members))),
   ...);
}

// The same for ">= 0".
template <class T, class... M>
void require_non_negative(const std::string& program, const T& config, M T::*... members) {
  ((require(config.*members >= 0, program, flag(members) + " must be >= 0, got " + show_value(config.*members))), ...);
}

}  // namespace tapegrad::examples
