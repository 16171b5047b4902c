#include "ibdt/status.h"

namespace ibdt {

std::string_view codeName(Code code) {
  switch (code) {
    case Code::kOk: return "ok";
    case Code::kAgain: return "again";
    case Code::kInProgress: return "in-progress";
    case Code::kInvalidArgument: return "invalid-argument";
    case Code::kOverflow: return "overflow";
    case Code::kTruncated: return "truncated";
    case Code::kOutOfRange: return "out-of-range";
    case Code::kNotFound: return "not-found";
    case Code::kTimeout: return "timeout";
    case Code::kRemoteAccess: return "remote-access";
    case Code::kPeerFailed: return "peer-failed";
    case Code::kFlushed: return "flushed";
    case Code::kUnsupported: return "unsupported";
    case Code::kResource: return "resource";
    case Code::kSystem: return "system";
    case Code::kProtocol: return "protocol";
    case Code::kCancelled: return "cancelled";
    case Code::kState: return "state";
    case Code::kInternal: return "internal";
  }
  return "unknown";
}

Status::Status(Code code, std::string message) : code_(code) {
  if (!message.empty()) message_ = std::make_unique<std::string>(std::move(message));
}

Status::Status(const Status& other) : code_(other.code_) {
  if (other.message_) message_ = std::make_unique<std::string>(*other.message_);
}

Status& Status::operator=(const Status& other) {
  if (this != &other) {
    code_ = other.code_;
    message_ = other.message_ ? std::make_unique<std::string>(*other.message_) : nullptr;
  }
  return *this;
}

std::string Status::toString() const {
  std::string out(codeName(code_));
  if (message_) {
    out += ": ";
    out += *message_;
  }
  return out;
}

Status& Status::withContext(std::string_view context) {
  if (isOk()) return *this;
  std::string joined(context);
  if (message_) {
    joined += ": ";
    joined += *message_;
  }
  message_ = std::make_unique<std::string>(std::move(joined));
  return *this;
}

}  // namespace ibdt
