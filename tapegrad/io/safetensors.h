#pragma once
// Named tensors in the safetensors format (the layout the safetensors Python package reads and
// writes; tests/read_safetensors.py checks our files with an independent reader):
//
//   [8 bytes: N, little-endian u64][N bytes: JSON header, space-padded to a multiple of 8][data buffer]
//
// The header maps each tensor name to {"dtype": "F32"|"F64"|"BF16"|"I64"|"BOOL", "shape": [...],
// "data_offsets": [begin, end]} (offsets relative to the data buffer, end exclusive, data little-endian
// C order), plus an optional "__metadata__" string -> string map.
//
// Writes go through io::write_file_atomic (file.h): a failed or interrupted write leaves the previous
// file as it was. Loading validates every header field and bounds every offset against the file size;
// any corrupt, truncated or inconsistent file throws IoError naming the file, the entry and the values.
//
// Checksums: save_safetensors stores the CRC-32 of each tensor's bytes in the metadata, as
// "tapegrad.crc32.<name>": "<8 hex digits>" (plain metadata strings, so other readers load the file
// as before). When a file has such entries, load_safetensors requires one for every tensor and
// recomputes each: a changed bit in the data is an IoError naming the file and the tensor. The
// entries are the format's own: they are not returned in SafetensorsFile::metadata, and a caller's
// metadata may not use the prefix.

#include <map>
#include <string>

#include "tapegrad/autograd/graph.h"

namespace tapegrad::io {

using Metadata = std::map<std::string, std::string>;

struct SafetensorsFile {
  NamedTensors tensors;  // in data-offset order; every tensor contiguous, requires_grad false
  Metadata metadata;     // "__metadata__" (empty if absent)
};

// Writes tensors and metadata to path atomically. The header lists the tensors in the given order; their
// data goes in order of decreasing element size (stable), so that every tensor starts at a multiple of its
// element size. metadata always contains "format": "pt" unless the caller sets "format".
// Throws ValueError for duplicate or empty names or a metadata key with the checksum prefix, IoError
// (naming path) when the file cannot be written.
void save_safetensors(const std::string& path, const NamedTensors& tensors, const Metadata& metadata = {});

// Reads a file written by save_safetensors (or any conforming writer). Tensors come back in the order
// of their data offsets (for files from save_safetensors: by decreasing element size, then as given).
SafetensorsFile load_safetensors(const std::string& path);

// Loads path and copies each tensor into the same-named tensor of target (in place, no graph).
// A module's state: io::load_into(model->state_dict(), path), since the state dict's tensors share
// the module's storage.
// Strict: every name must match both ways. Shapes and dtypes must always match, and every target
// tensor be defined (ValueError). Any mismatch throws before a tensor is written. Returns the metadata.
Metadata load_into(const NamedTensors& target, const std::string& path, bool strict = true);

}  // namespace tapegrad::io
