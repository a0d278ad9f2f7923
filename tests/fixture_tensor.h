#pragma once
// Tensors as the PyTorch fixtures (tests/data/torch_reference.json, training_trajectory.json) write
// them: {"shape": [...], "data": [...] row-major, "dtype": "bool" | "int64" | absent for float64}.

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tapegrad/autograd/autograd.h"

namespace tapegrad::testing {

// tests/data/<file>, parsed; IoError saying how to regenerate it (`generator`, a script in
// tests/torch_reference/) when it cannot be opened.
inline nlohmann::json read_fixture(const std::string& file, const std::string& generator) {
  const std::string path = std::string(TAPEGRAD_TEST_DATA_DIR) + "/" + file;
  std::ifstream in(path);
  if (!in)
    throw IoError("cannot open " + path + "; regenerate it with /usr/bin/python3 tests/torch_reference/" + generator);
  return nlohmann::json::parse(in);
}

inline Shape shape_of(const nlohmann::json& entry) { return Shape(entry.at("shape").get<std::vector<std::int64_t>>()); }

inline std::string dtype_of(const nlohmann::json& entry) { return entry.value("dtype", std::string("float64")); }

inline Tensor tensor_from(const nlohmann::json& entry) {
  const Shape shape = shape_of(entry);
  const std::string dtype = dtype_of(entry);
  if (dtype == "bool") return from_vector(entry.at("data").get<std::vector<bool>>(), shape);
  if (dtype == "int64") return from_vector(entry.at("data").get<std::vector<std::int64_t>>(), shape);
  return from_vector(entry.at("data").get<std::vector<double>>(), shape);
}

// {name: tensor entry, ...} -> named tensors, in the file's order (a state dict to load).
inline NamedTensors named_tensors_from(const nlohmann::json& entries) {
  NamedTensors out;
  for (const auto& [name, entry] : entries.items()) out.emplace_back(name, tensor_from(entry));
  return out;
}

}  // namespace tapegrad::testing
