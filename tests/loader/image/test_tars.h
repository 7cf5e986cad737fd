// Tar archives made in the test: ustar headers written by hand.
#ifndef PINWHEEL_TESTS_LOADER_IMAGE_TEST_TARS_H_
#define PINWHEEL_TESTS_LOADER_IMAGE_TEST_TARS_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
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
    Octal(header + 100, 8, 0644);  // mode
    Octal(header + 108, 8, 0);     // uid
    Octal(header + 116, 8, 0);     // gid
    Octal(header + 124, 12, data.size());
    Octal(header + 136, 12, 0);  // mtime
    header[156] = type;
    std::memcpy(header + 257, "ustar", 6);
    std::memcpy(header + 263, "00", 2);
    std::memset(header + 148, ' ', 8);
    unsigned sum = 0;
    for (char c : header) sum += static_cast<unsigned char>(c);
    Octal(header + 148, 7, sum);  // six digits, a NUL, then the space
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
  // Writes `value` as `width - 1` octal digits and a NUL, as ustar's numeric
  // fields hold it (the high digits of a value too large are dropped; the
  // tests' members are small). Not snprintf: GCC 12 at -O3 warns that
  // "%011llo" may not fit 12 bytes (-Wformat-truncation).
  static void Octal(char* field, int width, unsigned long long value) {
    field[width - 1] = '\0';
    for (int i = width - 2; i >= 0; --i, value >>= 3) {
      field[i] = static_cast<char>('0' + (value & 7));
    }
  }

  std::vector<std::byte> bytes_;
};

}  // namespace pinwheel::testing

#endif  // PINWHEEL_TESTS_LOADER_IMAGE_TEST_TARS_H_
