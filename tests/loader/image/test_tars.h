// Tar archives made in the test: ustar headers written by hand.
#ifndef PINWHEEL_TESTS_LOADER_IMAGE_TEST_TARS_H_
#define PINWHEEL_TESTS_LOADER_IMAGE_TEST_TARS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace pinwheel::testing {

// Builds a tar archive member by member.
class TarBuilder {
 public:
  // Appends a member `name` (<= 100 bytes) of `type` holding `data`.
  TarBuilder& Add(const std::string& name, const std::vector<std::byte>& data,
                  char type = '0') {
    char header[512] = {};
    std::memcpy(header, name.data(), std::min<size_t>(name.size(), 100));
    std::snprintf(header + 100, 8, "%07o", 0644);
    std::snprintf(header + 108, 8, "%07o", 0);
    std::snprintf(header + 116, 8, "%07o", 0);
    std::snprintf(header + 124, 12, "%011llo",
                  static_cast<unsigned long long>(data.size()));
    std::snprintf(header + 136, 12, "%011o", 0);
    header[156] = type;
    std::memcpy(header + 257, "ustar", 6);
    std::memcpy(header + 263, "00", 2);
    std::memset(header + 148, ' ', 8);
    unsigned sum = 0;
    for (char c : header) sum += static_cast<unsigned char>(c);
    std::snprintf(header + 148, 8, "%06o", sum);
    header[155] = ' ';
    const size_t at = bytes_.size();
    bytes_.resize(at + 512);
    std::memcpy(bytes_.data() + at, header, 512);
    bytes_.insert(bytes_.end(), data.begin(), data.end());
    bytes_.resize((bytes_.size() + 511) / 512 * 512);
    return *this;
  }
  TarBuilder& Add(const std::string& name, const std::string& text,
                  char type = '0') {
    const auto* p = reinterpret_cast<const std::byte*>(text.data());
    return Add(name, std::vector<std::byte>(p, p + text.size()), type);
  }
  // Returns the archive with its two zero end blocks.
  std::vector<std::byte> Finish() const {
    std::vector<std::byte> out = bytes_;
    out.resize(out.size() + 1024);
    return out;
  }

 private:
  std::vector<std::byte> bytes_;
};

}  // namespace pinwheel::testing

#endif  // PINWHEEL_TESTS_LOADER_IMAGE_TEST_TARS_H_
