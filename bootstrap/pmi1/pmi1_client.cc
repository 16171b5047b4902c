#include "bootstrap/pmi1/pmi1_client.h"

#include <unistd.h>

#include <chrono>

#include "base/parse_integer.h"
#include "bootstrap/fd_io.h"

namespace ibdt::bootstrap::pmi1 {
namespace {

constexpr std::string_view kPeer = "PMI-1 server (PMI_FD)";

size_t numberField(const std::map<std::string, std::string, std::less<>>& fields, std::string_view name,
                   size_t fallback) {
  auto found = fields.find(name);
  if (found == fields.end()) return fallback;
  return parseInteger<size_t>(found->second).value_or(fallback);
}

}  // namespace

Result<std::map<std::string, std::string, std::less<>>> parseLine(std::string_view line) {
  std::map<std::string, std::string, std::less<>> fields;
  while (!line.empty()) {
    size_t space = line.find(' ');
    std::string_view word = line.substr(0, space);
    line = space == std::string_view::npos ? std::string_view() : line.substr(space + 1);
    if (word.empty()) continue;
    size_t equals = word.find('=');
    if (equals == std::string_view::npos) {
      return makeError(Code::kProtocol, kPeer, ": malformed field '", word, "'");
    }
    fields.insert_or_assign(std::string(word.substr(0, equals)), std::string(word.substr(equals + 1)));
  }
  if (fields.count("cmd") == 0) return makeError(Code::kProtocol, kPeer, ": reply without cmd=");
  return fields;
}

Result<std::unique_ptr<Client>> Client::connect(int fd, Deadline deadline) {
  std::unique_ptr<Client> client(new Client(fd));
  IBDT_ASSIGN_OR_RETURN(Fields init, client->exchange("cmd=init pmi_version=1 pmi_subversion=1\n", "response_to_init",
                                                      deadline));
  if (numberField(init, "rc", 1) != 0) {
    return makeError(Code::kProtocol, kPeer, " refused PMI version 1.1 (rc=", init["rc"], ")");
  }
  IBDT_ASSIGN_OR_RETURN(Fields maxes, client->exchange("cmd=get_maxes\n", "maxes", deadline));
  client->keyMax_ = numberField(maxes, "keylen_max", 64);
  client->valueMax_ = numberField(maxes, "vallen_max", 1024);
  if (client->keyMax_ < 32 || client->valueMax_ < 16) {
    return makeError(Code::kProtocol, kPeer, ": key/value limits ", client->keyMax_, "/", client->valueMax_,
                     " are too small to be usable");
  }
  IBDT_ASSIGN_OR_RETURN(Fields name, client->exchange("cmd=get_my_kvsname\n", "my_kvsname", deadline));
  client->kvsName_ = name["kvsname"];
  if (client->kvsName_.empty()) return makeError(Code::kProtocol, kPeer, ": empty KVS name");
  return client;
}

Client::~Client() {
  // Hydra treats a process that exits without finalize as failed.
  if (broken_.isOk()) {
    auto ignored = exchange("cmd=finalize\n", "finalize_ack", Deadline::after(std::chrono::seconds(10)));
    (void)ignored;
  }
  ::close(fd_);
}

Result<Client::Fields> Client::exchange(const std::string& request, std::string_view expected, Deadline deadline) {
  std::lock_guard lock(mutex_);
  if (!broken_.isOk()) return broken_;
  auto reply = exchangeLocked(request, expected, deadline);
  if (!reply.isOk()) {
    // The answer may still arrive later and would be taken for the next
    // request's: the connection cannot be trusted any more.
    broken_ = Status(reply.status().code(), strCat(reply.status().message(), " (the PMI-1 connection is now unusable)"));
  }
  return reply;
}

Result<Client::Fields> Client::exchangeLocked(const std::string& request, std::string_view expected,
                                              Deadline deadline) {
  IBDT_RETURN_IF_ERROR(writeAll(fd_, request, deadline, kPeer));
  IBDT_ASSIGN_OR_RETURN(std::string line, readLine(fd_, buffer_, deadline, kPeer));
  IBDT_ASSIGN_OR_RETURN(Fields fields, parseLine(line));
  if (fields["cmd"] != expected) {
    return makeError(Code::kProtocol, kPeer, ": expected cmd=", expected, ", got '", line.substr(0, 200), "'");
  }
  return fields;
}

Status Client::put(std::string_view key, std::string_view value, Deadline deadline) {
  IBDT_ASSIGN_OR_RETURN(Fields reply, exchange(strCat("cmd=put kvsname=", kvsName_, " key=", key, " value=", value, "\n"),
                                               "put_result", deadline));
  if (numberField(reply, "rc", 1) != 0) {
    return makeError(Code::kSystem, "PMI-1 put '", key, "' failed: ", reply["msg"]);
  }
  return Status::ok();
}

Result<std::string> Client::get(std::string_view key, Deadline deadline) {
  IBDT_ASSIGN_OR_RETURN(Fields reply,
                        exchange(strCat("cmd=get kvsname=", kvsName_, " key=", key, "\n"), "get_result", deadline));
  if (numberField(reply, "rc", 1) != 0) return makeError(Code::kNotFound, "PMI-1 get '", key, "': ", reply["msg"]);
  return reply["value"];
}

Status Client::barrier(Deadline deadline) {
  IBDT_ASSIGN_OR_RETURN(Fields reply, exchange("cmd=barrier_in\n", "barrier_out", deadline));
  return Status::ok();
}

}  // namespace ibdt::bootstrap::pmi1
