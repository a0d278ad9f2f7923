// train::Replicas over a ProcessGroup: each function is one collective of the group.
#include "tapegrad/dist/replicas.h"

namespace tapegrad::dist {

train::Replicas replicas(const ProcessGroup& group) {
  train::Replicas r;
  r.rank = group.rank();
  r.world_size = group.size();
  r.mean = [group](double value) { return group.all_reduce(value, ReduceOp::Mean); };
  r.max = [group](double value) { return group.all_reduce(value, ReduceOp::Max); };
  r.barrier = [group] { group.barrier(); };
  return r;
}

}  // namespace tapegrad::dist
