#include "transport/fabric/verbs/verbs_status.h"

#include <cstring>

namespace ibdt::fabric::verbs {

CompletionStatus translateWcStatus(ibv_wc_status status) {
  switch (status) {
    case IBV_WC_SUCCESS: return CompletionStatus::kSuccess;
    case IBV_WC_LOC_LEN_ERR: return CompletionStatus::kLocalLength;
    case IBV_WC_LOC_PROT_ERR:
    case IBV_WC_MW_BIND_ERR: return CompletionStatus::kLocalProtection;
    case IBV_WC_LOC_QP_OP_ERR:
    case IBV_WC_LOC_EEC_OP_ERR:
    case IBV_WC_LOC_ACCESS_ERR: return CompletionStatus::kLocalOperation;
    case IBV_WC_REM_ACCESS_ERR: return CompletionStatus::kRemoteAccess;
    case IBV_WC_REM_INV_REQ_ERR:
    case IBV_WC_BAD_RESP_ERR: return CompletionStatus::kRemoteInvalidRequest;
    case IBV_WC_REM_OP_ERR:
    case IBV_WC_REM_ABORT_ERR: return CompletionStatus::kRemoteOperation;
    case IBV_WC_RETRY_EXC_ERR:
    case IBV_WC_RNR_RETRY_EXC_ERR: return CompletionStatus::kRetryExceeded;
    case IBV_WC_WR_FLUSH_ERR: return CompletionStatus::kFlushed;
    default: return CompletionStatus::kFatal;
  }
}

Status verbsCallError(std::string_view call, int error, std::string_view device) {
  Code code = Code::kSystem;
  if (error == ENOMEM) code = Code::kResource;
  if (error == EINVAL) code = Code::kInvalidArgument;
  return makeError(code, device, ": ", call, " failed: ", std::strerror(error), " (errno ", error, ")");
}

}  // namespace ibdt::fabric::verbs
