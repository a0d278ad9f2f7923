#pragma once
// Checkpoint I/O in the safetensors format, readable by the Python tools that read safetensors:
//
//   [8 bytes: N, little-endian u64][N bytes: JSON header, space-padded to a multiple of 8][data buffer]
//
// The header maps each tensor name to {"dtype": "F32"|"F64"|"I64"|"BOOL", "shape": [...],
// "data_offsets": [begin, end]} (offsets relative to the data buffer, end exclusive, data little-endian
// C order), plus an optional "__metadata__" string -> string map.
//
// Writes are atomic: the file is written to "<path>.tmp.<pid>", flushed and fsynced, then renamed over
// path, so a failure (or a crash) mid-write never destroys the previous checkpoint.
// Loading validates every header field and bounds every offset against the file size; any corrupt,
// truncated or inconsistent file throws IoError naming the file, the entry and the values.

#include <map>
#include <string>

#include "tapegrad/nn/module.h"

namespace tapegrad::io {

using Metadata = std::map<std::string, std::string>;

struct SafetensorsFile {
  NamedTensors tensors;  // in header (= file) order; every tensor contiguous, requires_grad false
  Metadata metadata;         // "__metadata__" (empty if absent)
};

// Writes tensors (in the given order, data laid out in that order) and metadata to path atomically.
// metadata always contains "format": "pt" unless the caller sets "format".
// Throws ValueError for duplicate or empty names, IoError (naming path) when the file cannot be written.
void save_safetensors(const std::string& path, const NamedTensors& tensors, const Metadata& metadata = {});

// Reads a file written by save_safetensors (or any conforming writer). Tensors come back in the order
// of their data offsets (which is the writing order for files from save_safetensors).
SafetensorsFile load_safetensors(const std::string& path);

// Loads path and copies it into module via Module::load_state_dict (which checks names, shapes, dtypes).
// Returns the file's metadata.
Metadata load_into(nn::Module& module, const std::string& path, bool strict = true);

// Loads path and copies each tensor into the same-named tensor of target (in place, no graph).
// Strict: every name must match both ways. Shapes and dtypes must always match. Returns the metadata.
Metadata load_into(const NamedTensors& target, const std::string& path, bool strict = true);

}  // namespace tapegrad::io
