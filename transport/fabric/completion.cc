// Names of completion statuses and their translation into Status values.
#include "ibdt/fabric.h"

namespace ibdt::fabric {
namespace {

std::string_view opcodeName(Opcode opcode) {
  switch (opcode) {
    case Opcode::kSend: return "send";
    case Opcode::kSendWithImm: return "send-with-imm";
    case Opcode::kWrite: return "rdma-write";
    case Opcode::kWriteWithImm: return "rdma-write-with-imm";
    case Opcode::kRead: return "rdma-read";
    case Opcode::kRecv: return "recv";
    case Opcode::kRecvWriteWithImm: return "recv-rdma-with-imm";
  }
  return "unknown-opcode";
}

Code codeOf(CompletionStatus status) {
  switch (status) {
    case CompletionStatus::kSuccess: return Code::kOk;
    case CompletionStatus::kLocalLength: return Code::kTruncated;
    case CompletionStatus::kLocalProtection: return Code::kInvalidArgument;
    case CompletionStatus::kRemoteAccess: return Code::kRemoteAccess;
    case CompletionStatus::kRemoteInvalidRequest: return Code::kTruncated;
    case CompletionStatus::kRetryExceeded: return Code::kPeerFailed;
    case CompletionStatus::kFlushed: return Code::kFlushed;
    case CompletionStatus::kLocalOperation:
    case CompletionStatus::kRemoteOperation:
    case CompletionStatus::kFatal: return Code::kSystem;
  }
  return Code::kInternal;
}

}  // namespace

std::string_view completionStatusName(CompletionStatus status) {
  switch (status) {
    case CompletionStatus::kSuccess: return "success";
    case CompletionStatus::kLocalLength: return "local-length-error";
    case CompletionStatus::kLocalProtection: return "local-protection-error";
    case CompletionStatus::kLocalOperation: return "local-operation-error";
    case CompletionStatus::kRemoteAccess: return "remote-access-error";
    case CompletionStatus::kRemoteInvalidRequest: return "remote-invalid-request";
    case CompletionStatus::kRemoteOperation: return "remote-operation-error";
    case CompletionStatus::kRetryExceeded: return "retry-exceeded";
    case CompletionStatus::kFlushed: return "flushed";
    case CompletionStatus::kFatal: return "fatal";
  }
  return "unknown-status";
}

Status completionError(const Completion& completion, std::string_view peer) {
  if (completion.status == CompletionStatus::kSuccess) return Status::ok();
  std::string message = strCat(opcodeName(completion.opcode), " (wr_id ", completion.id, ") to ", peer,
                               " failed: ", completionStatusName(completion.status));
  if (completion.vendorError != 0) message += strCat(" (vendor error ", completion.vendorError, ")");
  return Status(codeOf(completion.status), std::move(message));
}

}  // namespace ibdt::fabric
