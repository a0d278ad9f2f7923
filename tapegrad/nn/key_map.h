#pragma once
// KeyMap: loading state dicts whose names or layouts differ from a module's, and writing a module's
// state under those names. A map goes from the source's names (a PyTorch checkpoint, a file from another
// framework) to the module's, and back:
//
//   nn::KeyMap map = nn::KeyMap()
//                        .rename("encoder.block", "encoder.layers")  // runs of whole path components
//                        .ignore("*.num_batches_tracked")            // source entries to drop
//                        .transpose("*.kernel");                     // 2-D entries stored (in, out)
//   model->load_state_dict(state, nn::LoadOptions().key_map(map));
//   save_safetensors(path, map.to_source(model->state_dict()));      // the same names back
//
// nn::pytorch_key_map() is the map between torch.nn's transformer names and tapegrad's.

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "tapegrad/autograd/graph.h"
#include "tapegrad/autograd/tensor.h"

namespace tapegrad::nn {

class KeyMap {
 public:
  using KeyFunction = std::function<std::string(const std::string&)>;

  // Replaces the run of path components `from` by `to` wherever it occurs in a source key, matching
  // whole components only: rename("linear1", "ff.fc1") maps "layers.0.linear1.weight" to
  // "layers.0.ff.fc1.weight" and leaves "layers.0.linear10.weight" alone. Renames apply in order, each
  // to the result of the ones before; to_source undoes them in reverse order (the exact inverse when no
  // rename matches a name an earlier one produced, as in pytorch_key_map()). ValueError for an empty
  // component in either name ("a..b", ".a").
  KeyMap& rename(const std::string& from, const std::string& to);

  // A function of the whole key, applied after the renames (a std::regex_replace, say). to_source needs
  // its inverse: without one, to_source throws ValueError.
  KeyMap& map(KeyFunction to_module, KeyFunction to_source = nullptr);

  // Source entries whose key matches the glob pattern ('*' matches any characters, '.' included) are
  // dropped: neither loaded nor reported as unexpected.
  KeyMap& ignore(const std::string& pattern);

  // Entries whose module key matches the glob pattern are stored transposed in the source: a 2-D tensor
  // is transposed on the way in and on the way out (another rank is a ShapeError naming the entry).
  KeyMap& transpose(const std::string& pattern);

  // The module's name for a source key (renames then the function); ignored keys are not special here.
  std::string to_module_key(const std::string& source_key) const;
  // The source's name for a module key (the function's inverse, then the renames undone).
  std::string to_source_key(const std::string& module_key) const;

  // True when the source key matches an ignore pattern; when the module key matches a transpose pattern.
  bool ignores(const std::string& source_key) const;
  bool transposes(const std::string& module_key) const;

  // The source state under the module's names and layouts (ignored entries dropped), and a module's
  // state under the source's names and layouts. The tensors are views or copies: the inputs are unchanged.
  NamedTensors to_module(const NamedTensors& source) const;
  NamedTensors to_source(const NamedTensors& module_state) const;

  bool empty() const { return renames_.empty() && !to_module_ && ignores_.empty() && transposes_.empty(); }

 private:
  struct Rename {
    std::vector<std::string> from, to;
  };
  std::vector<Rename> renames_;
  KeyFunction to_module_, to_source_;
  std::vector<std::string> ignores_, transposes_;
};

// The names torch.nn gives transformer modules where tapegrad's differ: a layer's feed-forward network
// is tapegrad's "ff.fc1"/"ff.fc2" and torch's "linear1"/"linear2", a decoder layer's cross-attention is
// "cross_attn" and torch's "multihead_attn". Everything else (MultiHeadAttention's in_proj_weight,
// in_proj_bias and out_proj, Linear, Embedding, LayerNorm, the recurrent modules' weight_ih_l0 ..., the
// stacks' "layers.N" and "norm", nn::Transformer's "encoder" and "decoder") already has torch's name and
// layout. The renames match whole components anywhere in a key, so a model whose own children are named
// "linear1" needs a map of its own.
//   model->load_state_dict(torch_state, nn::LoadOptions().key_map(nn::pytorch_key_map()));
//   save_safetensors(path, nn::pytorch_key_map().to_source(model->state_dict()));
KeyMap pytorch_key_map();

// True when `key` matches the glob `pattern`: '*' matches any run of characters, everything else itself.
bool glob_match(const std::string& pattern, const std::string& key);

}  // namespace tapegrad::nn
