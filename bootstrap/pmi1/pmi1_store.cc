// The PMI-1 backend: MPICH's Hydra launcher (mpiexec.mpich), which serves
// only PMI-1/PMI-2. Rank and size come from PMI_RANK/PMI_SIZE, node
// locality from the KVS's PMI_process_mapping. Puts are sent at commit();
// PMI-1 shows them to other ranks only after a barrier (fence).
#include <cstdlib>
#include <mutex>
#include <thread>

#include "base/backoff.h"
#include "bootstrap/backends.h"
#include "bootstrap/node_map.h"
#include "bootstrap/pmi1/pmi1_client.h"
#include "bootstrap/pmi1/pmi1_codec.h"

namespace ibdt::bootstrap {
namespace {

// Deadline for a single exchange with the local Hydra proxy.
constexpr auto kRequestTimeout = std::chrono::seconds(60);

class Pmi1Store final : public Store {
 public:
  Pmi1Store(const Placement& placement, std::unique_ptr<pmi1::Client> client)
      : Store(placement), client_(std::move(client)) {}

  std::string_view backend() const override { return "pmi1"; }

 private:
  std::string keyOf(int rank, std::string_view key) const {
    return pmi1::kvsKey(rank, key, client_->maxKeyLength());
  }

  Status doPut(std::string_view key, std::span<const uint8_t> value) override {
    std::lock_guard lock(stagedMutex_);
    staged_.insert_or_assign(std::string(key), Bytes(value.begin(), value.end()));
    return Status::ok();
  }

  Status doCommit() override {
    std::map<std::string, Bytes, std::less<>> batch;
    {
      std::lock_guard lock(stagedMutex_);
      batch.swap(staged_);
    }
    for (const auto& [key, value] : batch) {
      std::string kvs = keyOf(rank(), key);
      pmi1::EncodedValue encoded = pmi1::encodeValue(value, client_->maxValueLength());
      Deadline deadline = Deadline::after(kRequestTimeout);
      for (size_t i = 0; i < encoded.chunks.size(); ++i) {
        IBDT_RETURN_IF_ERROR(client_->put(strCat(kvs, "#", i), encoded.chunks[i], deadline));
      }
      // The head last: whoever sees it finds every chunk.
      IBDT_RETURN_IF_ERROR(client_->put(kvs, encoded.head, deadline));
    }
    return Status::ok();
  }

  Status doFence(Deadline deadline) override {
    Status status = client_->barrier(deadline);
    if (status.code() == Code::kTimeout) {
      return makeError(Code::kTimeout, "fence: not every rank arrived before the deadline (PMI-1 does not say which)");
    }
    return status;
  }

  Result<Bytes> doGet(int rank, std::string_view key, Deadline deadline) override {
    std::string kvs = keyOf(rank, key);
    // PMI-1 cannot wait for a key: poll until the deadline.
    Backoff backoff;
    Result<std::string> head = makeError(Code::kInternal, "unreachable");
    for (;;) {
      head = client_->get(kvs, Deadline::after(kRequestTimeout));
      if (head.isOk() || head.status().code() != Code::kNotFound) break;
      if (deadline.expired()) {
        return makeError(Code::kTimeout, "store get: rank ", rank, " did not put '", key,
                         "' before the deadline (PMI-1 shows values only after a fence)");
      }
      backoff.pause();
    }
    if (!head.isOk()) return head.status();
    IBDT_ASSIGN_OR_RETURN(pmi1::Head decoded, pmi1::decodeHead(*head));
    if (decoded.isInline) return std::move(decoded.inlineBytes);
    std::string text;
    for (size_t i = 0; i < decoded.chunks; ++i) {
      auto chunk = client_->get(strCat(kvs, "#", i), Deadline::after(kRequestTimeout));
      if (!chunk.isOk()) {
        return Status(chunk.status()).withContext(strCat("store get: chunk ", i, " of rank ", rank, "'s '", key, "'"));
      }
      text += *chunk;
    }
    IBDT_ASSIGN_OR_RETURN(Bytes bytes, pmi1::decodeBase64(text));
    if (bytes.size() != decoded.bytes) {
      return makeError(Code::kProtocol, "store get: rank ", rank, "'s '", key, "' decoded to ", bytes.size(),
                       " bytes, expected ", decoded.bytes);
    }
    return bytes;
  }

  std::unique_ptr<pmi1::Client> client_;
  std::mutex stagedMutex_;
  std::map<std::string, Bytes, std::less<>> staged_;
};

Result<int> envInt(const char* name, int min) {
  const char* text = std::getenv(name);
  if (text == nullptr) return makeError(Code::kNotFound, name, " is not set (not started by a PMI-1 launcher?)");
  char* end = nullptr;
  long value = std::strtol(text, &end, 10);
  if (*text == '\0' || *end != '\0' || value < min || value > INT32_MAX) {
    return makeError(Code::kInvalidArgument, name, "='", text, "' is not a valid number");
  }
  return static_cast<int>(value);
}

}  // namespace

Result<std::unique_ptr<Store>> connectPmi1(Deadline deadline) {
  if (std::getenv("PMI_FD") == nullptr) {
    return makeError(Code::kUnsupported, "PMI-1 without PMI_FD (PMI_PORT singleton init) is not supported");
  }
  IBDT_ASSIGN_OR_RETURN(int fd, envInt("PMI_FD", 0));
  IBDT_ASSIGN_OR_RETURN(int rank, envInt("PMI_RANK", 0));
  IBDT_ASSIGN_OR_RETURN(int size, envInt("PMI_SIZE", 1));
  if (rank >= size) return makeError(Code::kInvalidArgument, "PMI_RANK=", rank, " is not below PMI_SIZE=", size);
  IBDT_ASSIGN_OR_RETURN(std::unique_ptr<pmi1::Client> client, pmi1::Client::connect(fd, deadline));
  IBDT_ASSIGN_OR_RETURN(std::string mapping, client->get("PMI_process_mapping", deadline));
  IBDT_ASSIGN_OR_RETURN(std::vector<int> nodeOf, pmi1::decodeProcessMapping(mapping, size));
  Placement placement = placementFromNodeMap(nodeOf, rank);
  return std::unique_ptr<Store>(new Pmi1Store(placement, std::move(client)));
}

}  // namespace ibdt::bootstrap
