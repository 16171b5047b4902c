// ibdt-run's output forwarding: whole lines with a prefix, whatever the
// chunking of the input.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <unistd.h>

#include <string>

#include "bootstrap/launcher/line_prefixer.h"

namespace ibdt::bootstrap {
namespace {

// Collects what a LinePrefixer writes, through a pipe.
class Sink {
 public:
  Sink() {
    EXPECT_EQ(::pipe2(fds_, O_NONBLOCK), 0);
    ::fcntl(fds_[1], F_SETPIPE_SZ, 1 << 20);
  }
  ~Sink() {
    ::close(fds_[0]);
    ::close(fds_[1]);
  }
  int fd() const { return fds_[1]; }
  std::string drain() {
    std::string out;
    char chunk[4096];
    for (ssize_t got; (got = ::read(fds_[0], chunk, sizeof(chunk))) > 0;) out.append(chunk, static_cast<size_t>(got));
    return out;
  }

 private:
  int fds_[2] = {-1, -1};
};

TEST(LinePrefixer, PrefixesWholeLinesAcrossChunks) {
  Sink sink;
  LinePrefixer prefixer(sink.fd(), "[3] ");
  prefixer.feed("hel");
  EXPECT_EQ(sink.drain(), "");  // no partial line goes out
  prefixer.feed("lo\nwor");
  EXPECT_EQ(sink.drain(), "[3] hello\n");
  prefixer.feed("ld\n\nlast");
  EXPECT_EQ(sink.drain(), "[3] world\n[3] \n");
  prefixer.finish();  // a last line without newline still comes out, ended
  EXPECT_EQ(sink.drain(), "[3] last\n");
  prefixer.finish();
  EXPECT_EQ(sink.drain(), "");
}

TEST(LinePrefixer, AnEndlessLineIsForwardedInPieces) {
  Sink sink;
  LinePrefixer prefixer(sink.fd(), "[0] ");
  std::string huge(200 * 1024, 'x');
  prefixer.feed(huge);
  std::string out = sink.drain();
  EXPECT_FALSE(out.empty());  // not held back forever
  prefixer.feed("\n");
  prefixer.finish();
  out += sink.drain();
  size_t xs = 0;
  for (char c : out) xs += c == 'x' ? 1 : 0;
  EXPECT_EQ(xs, huge.size());  // nothing lost
  EXPECT_EQ(out.rfind("[0] ", 0), 0u);
}

}  // namespace
}  // namespace ibdt::bootstrap
