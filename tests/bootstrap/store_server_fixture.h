// tests/bootstrap/store_server_fixture.h — an in-process ibdt-run store
// server on a private socket, and clients connected to it as ranks.
#pragma once

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "bootstrap/launcher/store_server.h"
#include "bootstrap/launcher_store.h"
#include "bootstrap/node_map.h"

namespace ibdt::bootstrap {

using namespace std::chrono_literals;

inline constexpr char kToken[] = "0123456789abcdef0123456789abcdef";

class StoreServerTest : public ::testing::Test {
 public:
  void start(int size, int nodes = 1, std::chrono::milliseconds helloTimeout = StoreServer::kHelloTimeout) {
    char pattern[] = "/tmp/ibdt-store-test-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern), nullptr);
    directory_ = pattern;
    path_ = directory_ + "/store.sock";
    server_ = std::make_unique<StoreServer>(kToken, blockNodeMap(size, nodes), helloTimeout);
    ASSERT_TRUE(server_->listen(path_).isOk());
    server_->serve();
  }
  void TearDown() override {
    server_.reset();
    ::unlink(path_.c_str());
    ::rmdir(directory_.c_str());
  }
  std::unique_ptr<Store> connect(int rank, std::string_view token = kToken) {
    auto store = LauncherStore::connect(path_, token, rank, Deadline::after(10s));
    EXPECT_TRUE(store.isOk()) << store.status().toString();
    return store.isOk() ? std::move(*store) : nullptr;
  }
  std::vector<std::unique_ptr<Store>> connectAll(int size) {
    std::vector<std::unique_ptr<Store>> stores;
    for (int rank = 0; rank < size; ++rank) stores.push_back(connect(rank));
    return stores;
  }

  std::string directory_;
  std::string path_;
  std::unique_ptr<StoreServer> server_;
};

}  // namespace ibdt::bootstrap
