// Helpers of the cache suites: objects of whole blocks in a
// FakeObjectStore, plans of blocks, reads checked against the pattern.
#ifndef PINWHEEL_TESTS_LOADER_STORAGE_CACHE_CACHE_TEST_SUPPORT_H_
#define PINWHEEL_TESTS_LOADER_STORAGE_CACHE_CACHE_TEST_SUPPORT_H_

#include <filesystem>
#include <memory>
#include <string>
#include <unistd.h>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

#include "loader/storage/cache/read_plan.h"
#include "tests/loader/storage/cache/fake_object_store.h"

namespace pinwheel::testing {

inline constexpr int64_t kBlock = 4096;

inline std::string Url(int i) { return absl::StrCat("mem://bucket/obj-", i); }

// A plan of whole blocks: (object, block) in order, one stream.
inline ReadPlan BlockPlan(int objects,
                          const std::vector<std::pair<int, int>>& seq,
                          int64_t epoch = 0, int32_t stream = 0) {
  ReadPlan plan;
  for (int i = 0; i < objects; ++i) plan.urls.push_back(Url(i));
  for (const auto& [object, block] : seq) {
    plan.reads.push_back({object, stream, epoch, block * kBlock, kBlock});
  }
  return plan;
}

inline absl::Status ReadBlock(ObjectStore& store, int object, int block,
                              std::vector<std::byte>& out) {
  out.resize(kBlock);
  return store.Read({{.url = Url(object),
                      .offset = block * kBlock,
                      .destination = absl::MakeSpan(out)}});
}

inline bool Matches(const std::vector<std::byte>& bytes, const std::string& url,
                    int64_t offset) {
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (bytes[i] != ExpectedByte(url, offset + static_cast<int64_t>(i))) {
      return false;
    }
  }
  return true;
}

inline std::shared_ptr<FakeObjectStore> Objects(int objects, int blocks_each) {
  auto store = std::make_shared<FakeObjectStore>();
  for (int i = 0; i < objects; ++i) store->Put(Url(i), blocks_each * kBlock);
  return store;
}

inline std::string TempDir(const std::string& name) {
  const std::string dir =
      absl::StrCat(::testing::TempDir(), "/cache_test_", name, "_", ::getpid());
  std::filesystem::remove_all(dir);
  return dir;
}

}  // namespace pinwheel::testing

#endif  // PINWHEEL_TESTS_LOADER_STORAGE_CACHE_CACHE_TEST_SUPPORT_H_
