// Tests of the little-endian codec: the byte order of every width, floats as
// their bits, and the bounded reader: reads in order, never past the end,
// and a shortfall handed to the caller's wording function as it was.
#include "pinning/base/coding.h"

#include <cstddef>
#include <cstdint>
#include <gtest/gtest.h>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace pinwheel {
namespace {

// The last shortfall the reader reported, with its field copied.
struct Reported {
  std::string field;
  size_t offset = 0;
  size_t needed = 0;
  size_t size = 0;
  size_t left = 0;
  bool value = true;
};
std::optional<Reported> last_shortfall;

absl::Status Record(const Shortfall& s) {
  last_shortfall = Reported{.field = std::string(s.field),
                            .offset = s.offset,
                            .needed = s.needed,
                            .size = s.size,
                            .left = s.left(),
                            .value = s.value};
  return absl::DataLossError("short");
}

template <typename T>
std::string Encoded(T value) {
  std::string out;
  PutLittleEndian<T>(out, value);
  return out;
}

TEST(LittleEndian, PutWritesTheLeastSignificantByteFirst) {
  EXPECT_EQ(Encoded<uint8_t>(0xab), std::string("\xab", 1));
  EXPECT_EQ(Encoded<uint16_t>(0x0201), std::string("\x01\x02", 2));
  EXPECT_EQ(Encoded<uint32_t>(0x04030201), std::string("\x01\x02\x03\x04", 4));
  EXPECT_EQ(Encoded<uint64_t>(0x0807060504030201),
            std::string("\x01\x02\x03\x04\x05\x06\x07\x08", 8));
  EXPECT_EQ(Encoded<int64_t>(-2),
            std::string("\xfe\xff\xff\xff\xff\xff\xff\xff", 8));
  EXPECT_EQ(Encoded<int32_t>(-1), std::string("\xff\xff\xff\xff", 4));
}

TEST(LittleEndian, PutAppendsToWhatIsThere) {
  std::string out = "ab";
  PutLittleEndian<uint16_t>(out, 0x0403);
  PutLittleEndian<uint8_t>(out, 5);
  EXPECT_EQ(out, std::string("ab\x03\x04\x05", 5));
}

TEST(LittleEndian, AByteVectorGetsTheSameBytesAsAString) {
  std::vector<std::byte> vector = {std::byte{0x7f}};
  std::string string = "\x7f";
  PutLittleEndian<uint32_t>(vector, 0xdeadbeef);
  PutLittleEndian<uint32_t>(string, 0xdeadbeef);
  PutLittleEndian<int16_t>(vector, -3);
  PutLittleEndian<int16_t>(string, -3);
  ASSERT_EQ(vector.size(), string.size());
  EXPECT_EQ(absl::string_view(reinterpret_cast<const char*>(vector.data()),
                              vector.size()),
            string);
}

TEST(LittleEndian, FloatsTravelAsTheirIeeeBits) {
  EXPECT_EQ(Encoded<float>(1.0f), std::string("\x00\x00\x80\x3f", 4));
  EXPECT_EQ(Encoded<double>(-2.0),
            std::string("\x00\x00\x00\x00\x00\x00\x00\xc0", 8));
  const std::string bits = Encoded<float>(0.1f);
  EXPECT_EQ(DecodeLittleEndian<float>(bits.data()), 0.1f);
}

template <typename T>
void ExpectRoundTrip(T value) {
  char bytes[sizeof(T)];
  EncodeLittleEndian<T>(value, bytes);
  EXPECT_EQ(DecodeLittleEndian<T>(bytes), value);
}

TEST(LittleEndian, DecodeUndoesEncodeAtEveryWidthsExtremes) {
  ExpectRoundTrip<int8_t>(std::numeric_limits<int8_t>::min());
  ExpectRoundTrip<int8_t>(std::numeric_limits<int8_t>::max());
  ExpectRoundTrip<uint8_t>(std::numeric_limits<uint8_t>::max());
  ExpectRoundTrip<int16_t>(std::numeric_limits<int16_t>::min());
  ExpectRoundTrip<uint16_t>(std::numeric_limits<uint16_t>::max());
  ExpectRoundTrip<int32_t>(std::numeric_limits<int32_t>::min());
  ExpectRoundTrip<uint32_t>(std::numeric_limits<uint32_t>::max());
  ExpectRoundTrip<int64_t>(std::numeric_limits<int64_t>::min());
  ExpectRoundTrip<int64_t>(std::numeric_limits<int64_t>::max());
  ExpectRoundTrip<uint64_t>(std::numeric_limits<uint64_t>::max());
  ExpectRoundTrip<float>(std::numeric_limits<float>::lowest());
  ExpectRoundTrip<double>(std::numeric_limits<double>::max());
}

TEST(LittleEndianReader, ReadsValuesInOrderAndCountsTheOffset) {
  std::string bytes;
  PutLittleEndian<uint8_t>(bytes, 7);
  PutLittleEndian<int64_t>(bytes, -5);
  PutLittleEndian<float>(bytes, 2.5f);
  bytes += "tail";
  LittleEndianReader reader(bytes, Record);
  uint8_t a = 0;
  int64_t b = 0;
  float c = 0;
  absl::string_view tail;
  ASSERT_TRUE(reader.Read("a", a).ok());
  EXPECT_EQ(reader.offset(), 1u);
  ASSERT_TRUE(reader.Read("b", b).ok());
  ASSERT_TRUE(reader.Read("c", c).ok());
  EXPECT_EQ(reader.offset(), 13u);
  EXPECT_EQ(reader.left(), 4u);
  ASSERT_TRUE(reader.ReadBytes("tail", 4, tail).ok());
  EXPECT_EQ(a, 7);
  EXPECT_EQ(b, -5);
  EXPECT_EQ(c, 2.5f);
  EXPECT_EQ(tail, "tail");
  EXPECT_EQ(reader.left(), 0u);
}

TEST(LittleEndianReader, AValuePastTheEndReadsNothingAndReportsTheShortfall) {
  const std::string bytes = "\x01\x02\x03\x04\x05\x06";
  LittleEndianReader reader(bytes, Record);
  uint16_t first = 0;
  ASSERT_TRUE(reader.Read("first", first).ok());
  last_shortfall.reset();
  uint64_t second = 42;
  const absl::Status status = reader.Read("second", second);
  EXPECT_EQ(status, absl::DataLossError("short"))
      << "the wording function's Status, as it made it";
  EXPECT_EQ(second, 42u) << "a failed read leaves the value alone";
  EXPECT_EQ(reader.offset(), 2u) << "a failed read does not move";
  ASSERT_TRUE(last_shortfall.has_value());
  EXPECT_EQ(last_shortfall->field, "second");
  EXPECT_EQ(last_shortfall->offset, 2u);
  EXPECT_EQ(last_shortfall->needed, 8u);
  EXPECT_EQ(last_shortfall->size, 6u);
  EXPECT_EQ(last_shortfall->left, 4u);
  EXPECT_TRUE(last_shortfall->value);
}

TEST(LittleEndianReader, ARunOfBytesPastTheEndIsReportedAsARun) {
  const std::string bytes = "abcdef";
  LittleEndianReader reader(bytes, Record);
  absl::string_view out = "untouched";
  last_shortfall.reset();
  EXPECT_FALSE(reader.ReadBytes("run", 7, out).ok());
  EXPECT_EQ(out, "untouched");
  ASSERT_TRUE(last_shortfall.has_value());
  EXPECT_EQ(last_shortfall->field, "run");
  EXPECT_EQ(last_shortfall->needed, 7u);
  EXPECT_FALSE(last_shortfall->value);

  last_shortfall.reset();
  EXPECT_FALSE(reader.Skip("skip", 9).ok());
  ASSERT_TRUE(last_shortfall.has_value());
  EXPECT_EQ(last_shortfall->field, "skip");
  EXPECT_EQ(last_shortfall->needed, 9u);
  EXPECT_FALSE(last_shortfall->value);
  EXPECT_EQ(reader.offset(), 0u);

  ASSERT_TRUE(reader.Skip("skip", 6).ok());
  EXPECT_EQ(reader.left(), 0u);
}

TEST(LittleEndianReader, AnAbsurdLengthIsAShortfallNotAnOverflow) {
  const std::string bytes = "abc";
  LittleEndianReader reader(bytes, Record, 1);
  absl::string_view out;
  last_shortfall.reset();
  EXPECT_FALSE(
      reader.ReadBytes("huge", std::numeric_limits<size_t>::max(), out).ok());
  ASSERT_TRUE(last_shortfall.has_value());
  EXPECT_EQ(last_shortfall->left, 2u);
  EXPECT_EQ(reader.offset(), 1u);
}

TEST(LittleEndianReader, CountsOffsetsFromTheStartOfTheBytesWhenStartedLater) {
  // A header of 4 bytes the caller has read itself, then a body.
  std::string bytes = "HEAD";
  PutLittleEndian<uint32_t>(bytes, 0x01020304);
  LittleEndianReader reader(bytes, Record, 4);
  EXPECT_EQ(reader.offset(), 4u);
  EXPECT_EQ(reader.left(), 4u);
  uint32_t value = 0;
  ASSERT_TRUE(reader.Read("value", value).ok());
  EXPECT_EQ(value, 0x01020304u);
  last_shortfall.reset();
  EXPECT_FALSE(reader.Read("next", value).ok());
  ASSERT_TRUE(last_shortfall.has_value());
  EXPECT_EQ(last_shortfall->offset, 8u);
  EXPECT_EQ(last_shortfall->size, 8u);
}

TEST(LittleEndianReader, ReadsAByteSpanAsItReadsAString) {
  std::vector<std::byte> bytes;
  PutLittleEndian<uint16_t>(bytes, 0xbeef);
  PutLittleEndian<int8_t>(bytes, -1);
  LittleEndianReader reader(absl::Span<const std::byte>(bytes), Record);
  uint16_t a = 0;
  int8_t b = 0;
  ASSERT_TRUE(reader.Read("a", a).ok());
  ASSERT_TRUE(reader.Read("b", b).ok());
  EXPECT_EQ(a, 0xbeef);
  EXPECT_EQ(b, -1);
  EXPECT_EQ(reader.left(), 0u);
}

}  // namespace
}  // namespace pinwheel
