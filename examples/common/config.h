#pragma once
// Typed run configuration for the example programs: a schema of named, typed options with
// defaults and descriptions; values come from (lowest to highest precedence) the defaults, a
// JSON file (--config FILE) and command-line flags (--key value or --key=value).
//
//   examples::Config config("sequence_reversal", "Learns to reverse strings with a transformer.");
//   config.add_int("steps", 2000, "optimiser steps per training");
//   config.add_float("lr", 1e-3, "Adam learning rate");
//   config.add_string("positions", "all", "position encoding", {"learned", "sinusoidal", "rotary", "all"});
//   std::vector<std::string> rest = config.parse_args(argc, argv);   // throws ConfigError
//   std::int64_t steps = config.get_int("steps");
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
#include <vector>

#include <nlohmann/json.hpp>

#include "tapegrad/autograd/error.h"

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
  void declare(const std::string& key, ConfigType type, nlohmann::json default_value, const std::string& description,
               std::vector<std::string> choices = {});
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

}  // namespace tapegrad::examples
