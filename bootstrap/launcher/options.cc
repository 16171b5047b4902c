#include "bootstrap/launcher/options.h"

#include <cmath>
#include <cstdlib>
#include <string_view>

#include "base/parse_integer.h"

namespace ibdt::bootstrap {

const char* const kLaunchUsage =
    "usage: ibdt-run -n N [options] [--] program [args...]\n"
    "Starts N processes of `program` on this host as one ibdt job.\n"
    "  -n, --np N        number of ranks (required)\n"
    "  --nodes K         simulate K nodes: ranks are spread over them in blocks\n"
    "                    (node ids, local ranks and local sizes follow)\n"
    "  --timeout SEC     stop the job and fail (exit 124) after SEC seconds\n"
    "  --no-prefix       do not prefix output lines with the rank\n"
    "  -h, --help        this text\n"
    "When a rank exits non-zero or dies, the others are stopped and ibdt-run\n"
    "exits with that rank's code (128+signal for a signal).\n";

namespace {

Result<int> parseCount(std::string_view option, std::string_view text, int max) {
  const std::optional<int> value = parseInteger<int>(text);
  if (!value || *value < 1 || *value > max) {
    return makeError(Code::kInvalidArgument, option, " expects an integer in [1, ", max, "], got '", text, "'");
  }
  return *value;
}

}  // namespace

Result<LaunchOptions> parseLaunchOptions(int argc, const char* const* argv) {
  LaunchOptions options;
  bool haveRanks = false;
  int i = 1;
  auto valueOf = [&](std::string_view option) -> Result<std::string_view> {
    if (i + 1 >= argc) return makeError(Code::kInvalidArgument, option, " needs a value");
    return std::string_view(argv[++i]);
  };
  for (; i < argc; ++i) {
    std::string_view word = argv[i];
    if (word == "--") {
      ++i;
      break;
    }
    if (word.empty() || word[0] != '-') break;
    if (word == "-n" || word == "--np") {
      IBDT_ASSIGN_OR_RETURN(std::string_view text, valueOf(word));
      IBDT_ASSIGN_OR_RETURN(options.ranks, parseCount(word, text, 1 << 20));
      haveRanks = true;
    } else if (word == "--nodes") {
      IBDT_ASSIGN_OR_RETURN(std::string_view text, valueOf(word));
      IBDT_ASSIGN_OR_RETURN(options.nodes, parseCount(word, text, 1 << 20));
    } else if (word == "--timeout") {
      IBDT_ASSIGN_OR_RETURN(std::string_view text, valueOf(word));
      std::string copy(text);
      char* end = nullptr;
      options.timeoutSeconds = std::strtod(copy.c_str(), &end);
      if (copy.empty() || *end != '\0' || !(options.timeoutSeconds > 0) || !std::isfinite(options.timeoutSeconds)) {
        return makeError(Code::kInvalidArgument, "--timeout expects a positive number of seconds, got '", text, "'");
      }
    } else if (word == "--no-prefix") {
      options.prefixOutput = false;
    } else if (word == "-h" || word == "--help") {
      return makeError(Code::kCancelled, "help requested");
    } else {
      return makeError(Code::kInvalidArgument, "unknown option '", word, "'");
    }
  }
  for (; i < argc; ++i) options.command.emplace_back(argv[i]);
  if (!haveRanks) return makeError(Code::kInvalidArgument, "the number of ranks (-n N) is required");
  if (options.command.empty()) return makeError(Code::kInvalidArgument, "no program to run");
  if (options.nodes > options.ranks) {
    return makeError(Code::kInvalidArgument, "--nodes ", options.nodes, " exceeds the number of ranks ", options.ranks);
  }
  return options;
}

}  // namespace ibdt::bootstrap
