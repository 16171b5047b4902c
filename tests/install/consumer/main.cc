// A program outside the ibdt tree, built against the installed headers and
// library only. It must use the public API and check what it gets back.
#include <ibdt/status.h>

#include <cstdio>

int main() {
  ibdt::Status status = ibdt::makeError(ibdt::Code::kTruncated, "receive of ", 8, " bytes into 4");
  if (status.toString() != "truncated: receive of 8 bytes into 4") {
    std::fprintf(stderr, "unexpected status text: %s\n", status.toString().c_str());
    return 1;
  }
  std::puts("consumer: ok");
  return 0;
}
