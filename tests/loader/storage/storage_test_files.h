// Files of known bytes for the storage suites: byte i of file "<name>" is a
// pure function of (name, i), so any range can be checked without keeping
// the file.
#ifndef PINWHEEL_TESTS_LOADER_STORAGE_STORAGE_TEST_FILES_H_
#define PINWHEEL_TESTS_LOADER_STORAGE_STORAGE_TEST_FILES_H_

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace pinwheel::testing_support {

inline std::byte PatternByte(const std::string& name, int64_t i) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : name) h = (h ^ c) * 1099511628211ull;
  uint64_t x = h + static_cast<uint64_t>(i) * 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 31)) * 0xbf58476d1ce4e5b9ull;
  return static_cast<std::byte>(x >> 56);
}

inline std::vector<std::byte> PatternBytes(const std::string& name,
                                           int64_t offset, int64_t length) {
  std::vector<std::byte> out(static_cast<size_t>(length));
  for (int64_t i = 0; i < length; ++i) out[i] = PatternByte(name, offset + i);
  return out;
}

// Writes `dir`/`name` with `size` pattern bytes.
inline void WritePatternFile(const std::filesystem::path& dir,
                             const std::string& name, int64_t size) {
  const std::vector<std::byte> bytes = PatternBytes(name, 0, size);
  std::ofstream(dir / name, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
}

// A fresh folder under the test temp dir, removed by the destructor.
class TempDir {
 public:
  explicit TempDir(const std::string& name)
      : path_(std::filesystem::temp_directory_path() /
              (name + "-" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace pinwheel::testing_support

#endif  // PINWHEEL_TESTS_LOADER_STORAGE_STORAGE_TEST_FILES_H_
