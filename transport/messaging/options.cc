// Scheme names and Options from the IBDT_MSG_* environment variables.
#include <array>

#include "base/config.h"
#include "ibdt/messaging.h"
#include "transport/messaging/wire.h"

namespace ibdt::messaging {
namespace {

constexpr std::array<std::string_view, kSchemeCount> kSchemeNames = {
    "auto", "eager", "contig", "generic", "bc-spup", "rwg-up", "p-rrs", "multi-w", "pipelined"};

// "auto" (-1: decided by ibdt) or a non-negative number of bytes.
Result<double> getThreshold(std::string_view knob) {
  IBDT_ASSIGN_OR_RETURN(std::string text, config::getString(knob));
  if (text == "auto") return -1.0;
  auto size = config::parseSize(text);
  if (!size.isOk()) {
    return makeError(Code::kInvalidArgument, knob, "=", text, ": expected auto or a byte count (e.g. 2K)");
  }
  return static_cast<double>(*size);
}

}  // namespace

std::string_view schemeName(Scheme scheme) {
  auto index = static_cast<size_t>(scheme);
  return index < kSchemeNames.size() ? kSchemeNames[index] : "unknown";
}

Result<Scheme> parseScheme(std::string_view name) {
  for (size_t i = 0; i < kSchemeNames.size(); ++i) {
    if (name == kSchemeNames[i]) return static_cast<Scheme>(i);
  }
  return makeError(Code::kInvalidArgument, "unknown scheme '", name,
                   "': expected auto, eager, contig, generic, bc-spup, rwg-up, p-rrs, multi-w or pipelined");
}

Status checkEagerLimit(int64_t eagerLimit) {
  if (eagerLimit >= wire::kMinEagerLimit) return Status::ok();
  return makeError(Code::kInvalidArgument, "IBDT_MSG_EAGER_LIMIT=", eagerLimit, " is below the minimum of ",
                   wire::kMinEagerLimit, " bytes (an eager buffer must hold a rendezvous reply)");
}

Result<Options> optionsFromEnvironment() {
  Options options;
  IBDT_ASSIGN_OR_RETURN(uint64_t eager, config::getSize("IBDT_MSG_EAGER_LIMIT"));
  IBDT_ASSIGN_OR_RETURN(int64_t credits, config::getInt("IBDT_MSG_CREDITS", 2, 4096));
  IBDT_ASSIGN_OR_RETURN(int64_t ring, config::getInt("IBDT_MSG_RING_SEGMENTS", 2, 1024));
  options.ringSegments = static_cast<uint32_t>(ring);
  IBDT_ASSIGN_OR_RETURN(double segment, getThreshold("IBDT_MSG_SEGMENT_SIZE"));
  IBDT_ASSIGN_OR_RETURN(std::string scheme, config::getString("IBDT_MSG_SCHEME"));
  IBDT_ASSIGN_OR_RETURN(options.forcedScheme, parseScheme(scheme));
  if (options.forcedScheme == Scheme::kEager || options.forcedScheme == Scheme::kPipelined) {
    return makeError(Code::kInvalidArgument, "IBDT_MSG_SCHEME=", scheme,
                     ": the eager paths are chosen by size (IBDT_MSG_EAGER_LIMIT, IBDT_MSG_PIPELINE_LIMIT); "
                     "force a rendezvous scheme");
  }
  IBDT_ASSIGN_OR_RETURN(uint64_t pipeline, config::getSize("IBDT_MSG_PIPELINE_LIMIT"));
  if (pipeline > (uint64_t{1} << 30)) return makeError(Code::kInvalidArgument, "IBDT_MSG_PIPELINE_LIMIT above 1G");
  options.pipelineLimit = static_cast<int64_t>(pipeline);
  options.pipelineLimitForced = config::isSet("IBDT_MSG_PIPELINE_LIMIT");
  IBDT_ASSIGN_OR_RETURN(options.tuneFile, config::getString("IBDT_TUNE_FILE"));
  if (options.tuneFile.empty()) {
    return makeError(Code::kInvalidArgument, "IBDT_TUNE_FILE is empty: expected auto, off or a file path");
  }
  IBDT_ASSIGN_OR_RETURN(uint64_t exchange, config::getSize("IBDT_MSG_EXCHANGE_ZERO_COPY"));
  if (exchange > (uint64_t{1} << 40)) return makeError(Code::kInvalidArgument, "IBDT_MSG_EXCHANGE_ZERO_COPY above 1T");
  options.exchangeZeroCopyMin = static_cast<int64_t>(exchange);
  options.exchangeZeroCopyForced = config::isSet("IBDT_MSG_EXCHANGE_ZERO_COPY");
  IBDT_ASSIGN_OR_RETURN(double singleCopy, getThreshold("IBDT_MSG_SINGLE_COPY_READ"));
  options.singleCopyReadMin = static_cast<int64_t>(singleCopy);
  IBDT_ASSIGN_OR_RETURN(options.packBelowBlock, getThreshold("IBDT_MSG_PACK_BELOW"));
  IBDT_ASSIGN_OR_RETURN(options.unpackBelowBlock, getThreshold("IBDT_MSG_UNPACK_BELOW"));
  IBDT_ASSIGN_OR_RETURN(options.listPost, config::getBool("IBDT_MSG_LIST_POST"));
  IBDT_ASSIGN_OR_RETURN(std::string spins, config::getString("IBDT_MSG_SPIN"));
  if (spins != "auto") {
    IBDT_ASSIGN_OR_RETURN(options.spins, config::getInt("IBDT_MSG_SPIN", 0, int64_t{1} << 30));
  }
  // IBDT_MSG_CONNECT is read once, where kAuto is resolved (ContextImpl::init),
  // so Options built in code honour it the same way.
  IBDT_ASSIGN_OR_RETURN(options.connectTimeoutMs, config::getInt("IBDT_MSG_CONNECT_TIMEOUT_MS", 1, 3'600'000));
  if (eager > (uint64_t{1} << 20)) return makeError(Code::kInvalidArgument, "IBDT_MSG_EAGER_LIMIT above 1M");
  IBDT_RETURN_IF_ERROR(checkEagerLimit(static_cast<int64_t>(eager)));
  if (segment >= 0 && (segment < 64 || segment > double(uint64_t{1} << 30))) {
    return makeError(Code::kInvalidArgument, "IBDT_MSG_SEGMENT_SIZE must be auto or between 64 and 1G bytes");
  }
  options.eagerLimit = static_cast<int64_t>(eager);
  IBDT_ASSIGN_OR_RETURN(uint64_t unexpectedMax, config::getSize("IBDT_MSG_UNEXPECTED_MAX_BYTES"));
  if (unexpectedMax > (uint64_t{1} << 40)) {
    return makeError(Code::kInvalidArgument, "IBDT_MSG_UNEXPECTED_MAX_BYTES above 1T");
  }
  options.unexpectedMaxBytes = static_cast<int64_t>(unexpectedMax);
  options.eagerCredits = static_cast<uint32_t>(credits);
  options.segmentSize = segment < 0 ? 0 : static_cast<int64_t>(segment);
  return options;
}

}  // namespace ibdt::messaging
