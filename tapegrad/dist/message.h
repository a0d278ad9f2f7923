#pragma once
// The dist component's error messages, built from any streamable values:
//   throw ValueError(dist::detail::message("broadcast: root ", root, " is not a rank of ", size));

#include <sstream>
#include <string>

namespace tapegrad::dist::detail {

template <class... Args>
std::string message(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

}  // namespace tapegrad::dist::detail
