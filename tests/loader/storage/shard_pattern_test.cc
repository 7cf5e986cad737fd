#include "loader/storage/shard_pattern.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace pinwheel {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ShardPattern, ARangeKeepsItsZeroPadding) {
  auto names = ExpandShardPattern("s3://b/shard-{000000..000099}.tar");
  ASSERT_TRUE(names.ok()) << names.status();
  ASSERT_EQ(names->size(), 100u);
  EXPECT_EQ(names->front(), "s3://b/shard-000000.tar");
  EXPECT_EQ(names->back(), "s3://b/shard-000099.tar");
  EXPECT_THAT(*ExpandShardPattern("x{8..11}"),
              ElementsAre("x8", "x9", "x10", "x11"));
}

TEST(ShardPattern, ListsAndSeveralGroupsExpandLeftFirst) {
  EXPECT_THAT(
      *ExpandShardPattern("{train,val}-{0..1}.tar"),
      ElementsAre("train-0.tar", "train-1.tar", "val-0.tar", "val-1.tar"));
  EXPECT_THAT(*ExpandShardPattern("/data/plain.tar"),
              ElementsAre("/data/plain.tar"));
}

TEST(ShardPattern, BadPatternsAreInvalidArgumentNamingThePosition) {
  const std::pair<std::string, std::string> cases[] = {
      {"a{0..3", "position 1"},       {"a}b", "position 1"},
      {"a{{0..1}}", "nested braces"}, {"x{b..c}", "decimal integers"},
      {"x{5..1}", "runs backwards"},  {"x{}", "empty"},
  };
  for (const auto& [pattern, what] : cases) {
    auto names = ExpandShardPattern(pattern);
    EXPECT_EQ(names.status().code(), absl::StatusCode::kInvalidArgument)
        << pattern;
    EXPECT_THAT(names.status().message(), HasSubstr(pattern));
    EXPECT_THAT(names.status().message(), HasSubstr(what)) << pattern;
  }
  EXPECT_EQ(ExpandShardPattern("x{0..999}", 100).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace pinwheel
