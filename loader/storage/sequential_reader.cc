#include "loader/storage/sequential_reader.h"

#include <algorithm>
#include <cstring>
#include <future>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace pinwheel {

absl::Status ValidateSequentialReadOptions(
    const SequentialReadOptions& options) {
  if (options.chunk_bytes < 4096) {
    return absl::InvalidArgumentError(absl::StrCat(
        "read chunk_bytes = ", options.chunk_bytes, " must be >= 4096"));
  }
  if (options.read_ahead_chunks < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "read_ahead_chunks = ", options.read_ahead_chunks, " must be >= 0"));
  }
  return absl::OkStatus();
}

SequentialReader::SequentialReader(std::shared_ptr<ObjectStore> store,
                                   std::string url, int64_t size,
                                   const SequentialReadOptions& options)
    : store_(std::move(store)),
      url_(std::move(url)),
      size_(size),
      options_(options) {}

SequentialReader::~SequentialReader() { DropAll(); }

void SequentialReader::Issue(int64_t offset) {
  Chunk& chunk = chunks_.emplace_back();
  chunk.offset = offset;
  if (!spares_.empty()) {
    chunk.bytes = std::move(spares_.back());
    spares_.pop_back();
  }
  chunk.bytes.resize(
      static_cast<size_t>(std::min(options_.chunk_bytes, size_ - offset)));
  // The task holds what it touches: the store (shared), the URL (a copy)
  // and the buffer, which this reader keeps until the future is waited on.
  chunk.done = std::async(
      std::launch::async,
      [store = store_, url = url_, offset, span = absl::MakeSpan(chunk.bytes)] {
        const RangeRead read = {url, offset, span};
        return store->Read({&read, 1});
      });
}

void SequentialReader::DropAll() {
  for (Chunk& chunk : chunks_) {
    if (!chunk.waited) chunk.done.wait();
    spares_.push_back(std::move(chunk.bytes));
  }
  chunks_.clear();
}

int64_t SequentialReader::End(const Chunk& chunk) {
  return chunk.offset + static_cast<int64_t>(chunk.bytes.size());
}

SequentialReader::Chunk* SequentialReader::Holding(int64_t offset) {
  for (Chunk& chunk : chunks_) {
    if (chunk.offset <= offset && offset < End(chunk)) return &chunk;
  }
  return nullptr;
}

void SequentialReader::ReadAhead(int64_t offset) {
  int ahead = 0;  // chunks at or after `offset`
  for (const Chunk& chunk : chunks_) ahead += End(chunk) > offset ? 1 : 0;
  while (!chunks_.empty() && ahead < 1 + options_.read_ahead_chunks) {
    const int64_t next = End(chunks_.back());
    if (next >= size_) return;
    Issue(next);
    ++ahead;
  }
}

void SequentialReader::Prefetch(int64_t offset) {
  if (!chunks_.empty() || offset >= size_) return;
  Issue(offset);
  ReadAhead(offset);
}

bool SequentialReader::IssuedToEnd() const {
  return size_ == 0 || (!chunks_.empty() && End(chunks_.back()) >= size_);
}

absl::Status SequentialReader::Read(int64_t offset, absl::Span<std::byte> out) {
  const auto length = static_cast<int64_t>(out.size());
  if (offset < 0 || offset > size_ || length > size_ - offset) {
    return absl::OutOfRangeError(absl::StrCat(
        url_, ": bytes [", offset, ", ", offset + length,
        ") reach past the object's end (it has ", size_, " bytes)"));
  }
  while (!out.empty()) {
    if (Holding(offset) == nullptr) {
      // Straight on from the last chunk, or a jump (back past the chunk
      // kept, or ahead past the window): then start again here.
      if (chunks_.empty() || offset != End(chunks_.back())) DropAll();
      Issue(offset);
    }
    // Note [looking back]: one chunk wholly behind `offset` stays.
    while (chunks_.size() >= 2 && End(chunks_[1]) <= offset) {
      Chunk& front = chunks_.front();
      if (!front.waited) front.done.wait();
      spares_.push_back(std::move(front.bytes));
      chunks_.pop_front();
    }
    ReadAhead(offset);
    Chunk& chunk = *Holding(offset);
    if (!chunk.waited) {
      chunk.status = chunk.done.get();
      chunk.waited = true;
    }
    if (!chunk.status.ok()) {
      absl::Status failed = chunk.status;
      DropAll();  // the next Read() tries again
      return failed;
    }
    const auto at = static_cast<size_t>(offset - chunk.offset);
    const size_t n = std::min(out.size(), chunk.bytes.size() - at);
    std::memcpy(out.data(), chunk.bytes.data() + at, n);
    out.remove_prefix(n);
    offset += static_cast<int64_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace pinwheel
