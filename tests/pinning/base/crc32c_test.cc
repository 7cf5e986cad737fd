// Tests of Crc32c against the published CRC-32C values: the standard check
// value and the iSCSI test vectors of RFC 3720 (section B.4).
#include "pinning/base/crc32c.h"

#include <gtest/gtest.h>
#include <string>

#include "absl/strings/string_view.h"

namespace pinwheel {
namespace {

TEST(Crc32c, MatchesTheStandardCheckValue) {
  EXPECT_EQ(Crc32c("123456789"), 0xe3069283u);
  EXPECT_EQ(Crc32c(""), 0u);
  EXPECT_EQ(Crc32c("6789", Crc32c("12345")), 0xe3069283u);
}

TEST(Crc32c, MatchesTheIscsiTestVectors) {
  EXPECT_EQ(Crc32c(std::string(32, '\0')), 0x8a9136aau) << "32 zero bytes";
  EXPECT_EQ(Crc32c(std::string(32, '\xff')), 0x62a8ab43u) << "32 0xff bytes";
  std::string ascending(32, '\0');
  std::string descending(32, '\0');
  for (int i = 0; i < 32; ++i) {
    ascending[i] = static_cast<char>(i);
    descending[i] = static_cast<char>(31 - i);
  }
  EXPECT_EQ(Crc32c(ascending), 0x46dd794eu) << "bytes 0, 1, ..., 31";
  EXPECT_EQ(Crc32c(descending), 0x113fdb5cu) << "bytes 31, 30, ..., 0";
}

TEST(Crc32c, GivesTheSameValueInPiecesAsInOne) {
  const std::string bytes = "pinwheel checkpoints are checksummed whole";
  const absl::string_view view(bytes);
  for (size_t cut = 0; cut <= bytes.size(); ++cut) {
    EXPECT_EQ(Crc32c(view.substr(cut), Crc32c(view.substr(0, cut))),
              Crc32c(bytes))
        << "cut at " << cut;
  }
}

}  // namespace
}  // namespace pinwheel
