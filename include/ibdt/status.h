// ibdt/status.h — error values used across the whole library.
//
// No exception crosses the library boundary. Setup paths return Result<T>;
// hot paths return Status. A Status that is ok() costs one byte and no
// allocation; an error carries a code and a message that names what failed
// and why (the call, errno or completion status, the peer).
//
// Back-pressure is kept apart from failure: Code::kAgain ("queue full, try
// again") and Code::kInProgress are not errors, and isError() is false for
// them.
#pragma once

#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace ibdt {

enum class Code : uint8_t {
  kOk = 0,
  kAgain,            // back-pressure: resources busy, retry later (not an error)
  kInProgress,       // operation started, completes later (not an error)
  kInvalidArgument,  // bad input from the caller (type, count, rank, flag)
  kOverflow,         // a size, count or displacement does not fit in 64 bits
  kTruncated,        // receive buffer smaller than the message
  kOutOfRange,       // offset or range outside the described data
  kNotFound,         // unknown key, rank, device or provider
  kTimeout,          // a deadline passed
  kRemoteAccess,     // peer refused a one-sided access (rkey, bounds, flags)
  kPeerFailed,       // a peer died or its connection broke
  kFlushed,          // work request flushed because its endpoint is in error
  kUnsupported,      // capability missing in this build or provider
  kResource,         // out of memory or another local resource
  kSystem,           // a system call failed (message carries errno text)
  kProtocol,         // malformed or hostile data from a peer
  kCancelled,        // cancelled by the user
  kState,            // object in the wrong state for the call
  kInternal,         // a bug in ibdt
};

// Stable lower-case name of a code, e.g. "invalid-argument".
std::string_view codeName(Code code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Code code, std::string message);
  Status(const Status& other);
  Status& operator=(const Status& other);
  Status(Status&&) noexcept = default;
  Status& operator=(Status&&) noexcept = default;

  static Status ok() { return {}; }

  bool isOk() const { return code_ == Code::kOk; }
  // True for every code except kOk, kAgain and kInProgress.
  bool isError() const { return code_ != Code::kOk && code_ != Code::kAgain && code_ != Code::kInProgress; }
  Code code() const { return code_; }
  std::string_view message() const { return message_ ? std::string_view(*message_) : std::string_view(); }
  // "invalid-argument: vector: negative count -3".
  std::string toString() const;

  // Prefixes context to the message: "while X: <old message>".
  Status& withContext(std::string_view context);

 private:
  Code code_ = Code::kOk;
  std::unique_ptr<std::string> message_;
};

// Builds a message from streamable pieces: strCat("rank ", r, " missing").
template <typename... Args>
std::string strCat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

template <typename... Args>
Status makeError(Code code, const Args&... args) {
  return Status(code, strCat(args...));
}

// Result<T>: a value or an error Status (never kOk).
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : state_(std::in_place_index<0>, std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : state_(std::in_place_index<1>, std::move(status)) {  // NOLINT
    if (std::get<1>(state_).isOk()) {
      std::get<1>(state_) = Status(Code::kInternal, "Result constructed from an ok Status");
    }
  }

  bool isOk() const { return state_.index() == 0; }
  const Status& status() const {
    static const Status kOkStatus;
    return isOk() ? kOkStatus : std::get<1>(state_);
  }
  Status takeStatus() && { return isOk() ? Status() : std::move(std::get<1>(state_)); }

  T& value() & { return std::get<0>(state_); }
  const T& value() const& { return std::get<0>(state_); }
  T&& value() && { return std::get<0>(std::move(state_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> state_;
};

}  // namespace ibdt

#define IBDT_CONCAT_INNER_(a, b) a##b
#define IBDT_CONCAT_(a, b) IBDT_CONCAT_INNER_(a, b)

// Returns the Status of `expr` from the enclosing function unless it is ok.
#define IBDT_RETURN_IF_ERROR(expr)                \
  do {                                            \
    ::ibdt::Status ibdt_status_ = (expr);         \
    if (!ibdt_status_.isOk()) return ibdt_status_; \
  } while (0)

// `IBDT_ASSIGN_OR_RETURN(auto x, makeX());` — binds the value or returns the error.
#define IBDT_ASSIGN_OR_RETURN(lhs, expr) \
  IBDT_ASSIGN_OR_RETURN_IMPL_(IBDT_CONCAT_(ibdt_result_, __LINE__), lhs, expr)
#define IBDT_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr)          \
  auto tmp = (expr);                                         \
  if (!tmp.isOk()) return std::move(tmp).takeStatus();       \
  lhs = std::move(tmp).value()
