// GatherSource: how a dataset's samples sit in host memory, for the
// loader's gather path (LoaderOptions::gather). A dataset whose samples are
// fixed-size rows at offsets computable from the index describes them here
// instead of being Read() one sample at a time: the loader registers the
// memory once (cudaHostRegister, mapped, on the cuda backend) and, per
// batch, computes the keys on the device (Note [the order on the device] in
// loader/gather/gather_plan.h) or uploads one 8-byte key per sample; a
// gather on the transfer stream (a kernel reading the host memory over
// PCIe, or the copy engines for large rows; memcpy on the host backend)
// writes the device buffer. Sample bytes never pass through a worker or a
// pinned slot.
//
// Field f of the sample with key k is the `bytes` bytes at
//   regions[field.region].data() + field.offset + k * field.stride
// and the key of index i is key(i) (the index itself when `key` is null).
// With kind kWidenWindow (token windows widened to int64) the dataset has
// two fields, input and target, i64[seq_len]: tokens [k, k + seq_len) and
// [k + 1, k + seq_len] of regions[0], token_bytes each.
//
// Example (a dataset of rows of 64 bytes in one array):
//   absl::StatusOr<GatherSource> Gather(uint64_t) const override {
//     GatherSource source;
//     source.regions = {rows_};
//     source.fields = {{.region = 0, .offset = 0, .stride = 64, .bytes = 64}};
//     return source;
//   }
#ifndef PINWHEEL_LOADER_GATHER_SOURCE_H_
#define PINWHEEL_LOADER_GATHER_SOURCE_H_

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "absl/types/span.h"

namespace pinwheel {

// A value; thread-compatible. `key` must be thread-safe (it is called from
// the loader's producer thread while the dataset is read elsewhere).
struct GatherSource {
  enum class Kind {
    // Each field is copied as it lies (rows, records, raw token windows).
    kCopy,
    // One region of tokens; each sample is the window starting at its key,
    // widened to int64 input and (shifted by one) target.
    kWidenWindow,
  };
  // Where field f of a sample lies (see the file comment).
  struct Field {
    int region = 0;
    uint64_t offset = 0;
    uint64_t stride = 0;
    uint64_t bytes = 0;
  };

  Kind kind = Kind::kCopy;
  // The host memory the samples are gathered from; the loader registers
  // each region once (shared with other loaders over the same region).
  std::vector<absl::Span<const std::byte>> regions;
  // Keeps `regions` alive for as long as the loader holds this source; null
  // when they belong to the dataset itself (which the loader keeps alive).
  std::shared_ptr<const void> owner;
  // Whether each region starts a page and the rest of its last page is the
  // region's too (memory allocated page-aligned in whole pages, as a file
  // read into memory is): the loader then registers the regions where they
  // are. Otherwise a small region is first copied onto pages of its own,
  // since registration pins (and makes the CUDA driver treat as pinned)
  // whole pages, neighbours included.
  bool owns_pages = false;
  // kCopy: one entry per layout field, in layout order.
  std::vector<Field> fields;
  // kWidenWindow: the tokens' width (1, 2, 4 or 8 bytes) and signedness,
  // and the window's seq_len (it reads seq_len + 1 tokens).
  int token_bytes = 0;
  bool signed_tokens = false;
  int64_t seq_len = 0;
  // The key of dataset index i (a pure function of i); null: i itself.
  std::function<int64_t(int64_t index)> key;
  // Set when `key` is the token windows' start, the pure function
  // order::WindowStart(seed, i, starts) (loader/epoch_order.h): the
  // loader can then compute keys, and the order they are read in, on the
  // device (Note [the order on the device] in
  // loader/gather/gather_plan.h). The loader checks that `key` agrees.
  struct WindowKeys {
    uint64_t seed = 0;
    uint64_t starts = 0;  // >= 1
  };
  std::optional<WindowKeys> window_keys;
};

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_GATHER_SOURCE_H_
