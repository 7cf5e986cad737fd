// InMemoryDataset: a dataset over contiguous host arrays, one per field,
// each holding all samples back to back ([size, shape...]).
//
// Example:
//   std::vector<uint8_t> images(n * 3 * 224 * 224);
//   std::vector<int64_t> labels(n);
//   PINWHEEL_ASSIGN_OR_RETURN(std::shared_ptr<InMemoryDataset> ds,
//       InMemoryDataset::Create(layout, n,
//           {absl::MakeConstSpan(reinterpret_cast<const
//           std::byte*>(images.data()), images.size()),
//            absl::MakeConstSpan(reinterpret_cast<const
//            std::byte*>(labels.data()), labels.size() * 8)}));
#ifndef PINWHEEL_LOADER_IN_MEMORY_DATASET_H_
#define PINWHEEL_LOADER_IN_MEMORY_DATASET_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

#include "loader/dataset.h"
#include "transfer/sample_layout.h"

namespace pinwheel {

// Thread-safe (immutable).
class InMemoryDataset final : public Dataset {
 public:
  // Borrows `fields` (one span per layout field, each exactly size × field
  // bytes); they must outlive the dataset. InvalidArgument naming the field
  // and both sizes when a span's size is wrong, or for variable-length
  // layouts (not supported here).
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<InMemoryDataset>> Create(
      SampleLayout layout, int64_t size,
      std::vector<absl::Span<const std::byte>> fields);

  // As Create(), but the dataset owns a copy of the arrays.
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<InMemoryDataset>>
  CreateOwning(SampleLayout layout, int64_t size,
               std::vector<std::vector<std::byte>> fields);

  int64_t size() const override { return size_; }
  const SampleLayout& layout() const override { return layout_; }
  absl::Status Read(int64_t index, SampleView& out) const override;
  // The fields' arrays as they are (no copy; see Dataset::Gather).
  absl::StatusOr<GatherSource> Gather(uint64_t max_copy_bytes) const override;

 private:
  InMemoryDataset(SampleLayout layout, int64_t size,
                  std::vector<absl::Span<const std::byte>> fields,
                  std::vector<std::vector<std::byte>> owned);
  SampleLayout layout_;
  int64_t size_;
  std::vector<std::vector<std::byte>> owned_;
  std::vector<absl::Span<const std::byte>> fields_;
  std::vector<size_t> field_bytes_;  // per field, one sample's bytes
};

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_IN_MEMORY_DATASET_H_
