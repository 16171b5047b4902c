// bootstrap/launcher/line_prefixer.h — forwards a rank's output stream line
// by line with a "[rank] " prefix, so lines of different ranks never mix.
#pragma once

#include <string>
#include <string_view>

namespace ibdt::bootstrap {

class LinePrefixer {
 public:
  LinePrefixer(int outFd, std::string prefix) : outFd_(outFd), prefix_(std::move(prefix)) {}
  // Writes every complete line of `data` (and earlier pending bytes).
  void feed(std::string_view data);
  // Writes a pending partial line, ending it with a newline.
  void finish();

 private:
  void emit(std::string_view line);
  int outFd_;
  std::string prefix_;
  std::string pending_;
};

}  // namespace ibdt::bootstrap
