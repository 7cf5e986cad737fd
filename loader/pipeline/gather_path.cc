#include "loader/pipeline/gather_path.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"

#include "loader/pipeline/gather_memory.h"
#include "loader/pipeline/memory_admission.h"
#include "pinning/base/status_macros.h"
#include "transfer/internal/gather.h"
#include "transfer/internal/transform_work.h"

#ifdef PINWHEEL_HAVE_CUDA
#include "pinning/base/cuda_device_guard.h"
#endif

namespace pinwheel::internal {
namespace {

constexpr size_t AlignUp(size_t n, size_t alignment) {
  return (n + alignment - 1) / alignment * alignment;
}

absl::Status NotUsable(absl::string_view why) {
  return absl::FailedPreconditionError(why);
}

// Note [large rows by the copy engines]
// A kernel reading registered host memory moves rows over PCIe with SM
// load instructions: right for small rows and for token windows (widened
// on the way), but a large row (W1: 150 KB images) then costs SM time a
// compute step beside it feels (+18 % on a GEMM step, H100, 2026-11-24)
// and reaches only 0.88 of the raw copy. Fields of rows of at least
// kCopyEngineRowBytes whose keys are the indices themselves (the host
// knows them: BatchInfo::sample_indices) are instead queued as one
// cudaMemcpyBatchAsync of row copies from the registered memory (a run of
// consecutive rows, a sequential order, is one copy): the copy engines
// move them at the pinned copy's rate and leave the SMs to the compute.
// Smaller fields (labels) stay in the kernel.
constexpr uint64_t kCopyEngineRowBytes = 32 << 10;

// Returns whether bytes [offset + key * stride, + bytes) lie in `size`
// bytes, without overflowing.
bool InRegion(int64_t key, uint64_t offset, uint64_t stride, uint64_t bytes,
              uint64_t size) {
  if (key < 0 || offset > size || bytes > size - offset) return false;
  const uint64_t room = size - offset - bytes;
  return stride == 0 || static_cast<uint64_t>(key) <= room / stride;
}

// The keys of a dataset's samples, as a Dataset the producer reads: sample
// i is one i64, the dataset's key of i, checked to lie in its region (a
// bad key is an error naming the index, never a read outside the memory).
// Thread-safe (immutable).
class GatherKeys final : public Dataset {
 public:
  GatherKeys(std::shared_ptr<const Dataset> dataset, GatherSource source,
             SampleLayout layout)
      : dataset_(std::move(dataset)),
        source_(std::move(source)),
        layout_(std::move(layout)) {}

  int64_t size() const override { return dataset_->size(); }
  const SampleLayout& layout() const override { return layout_; }
  absl::Status Read(int64_t index, SampleView& out) const override {
    const int64_t key = source_.key ? source_.key(index) : index;
    if (source_.kind == GatherSource::Kind::kWidenWindow) {
      const uint64_t token_bytes = static_cast<uint64_t>(source_.token_bytes);
      if (!InRegion(key, 0, token_bytes,
                    static_cast<uint64_t>(source_.seq_len + 1) * token_bytes,
                    source_.regions[0].size())) {
        return OutOfRegion(index, key, 0);
      }
    } else {
      for (size_t f = 0; f < source_.fields.size(); ++f) {
        const GatherSource::Field& field = source_.fields[f];
        if (!InRegion(key, field.offset, field.stride, field.bytes,
                      source_.regions[field.region].size())) {
          return OutOfRegion(index, key, static_cast<int>(f));
        }
      }
    }
    out.field_as<int64_t>(0)[0] = key;
    return absl::OkStatus();
  }

 private:
  absl::Status OutOfRegion(int64_t index, int64_t key, int field) const {
    return absl::OutOfRangeError(
        absl::StrCat("gather: the key ", key, " of dataset index ", index,
                     " puts field ", field, " outside the dataset's memory"));
  }

  const std::shared_ptr<const Dataset> dataset_;
  const GatherSource source_;
  const SampleLayout layout_;
};

// The gather as the device stage: consumes the uploaded keys and writes the
// dataset's fields. Holds the registrations (and through the source, a file
// copy; through `copies`, the copies of small regions), so the memory stays
// registered while the stage can still run it (the stage synchronises its
// stream before it lets the transform go).
// Thread-safe (immutable).
class GatherTransform final : public DeviceTransform, public OrderedGather {
 public:
  // `device_bases[r]`, `host_bases[r]`: where the device and the host read
  // region r of `source` (in
  // `copies` for a copied region).
  GatherTransform(
      std::shared_ptr<const Dataset> dataset, GatherSource source,
      std::shared_ptr<const void> copies,
      std::vector<std::shared_ptr<const HostRegistration>> registrations,
      const std::vector<const std::byte*>& device_bases,
      const std::vector<const std::byte*>& host_bases)
      : dataset_(std::move(dataset)),
        source_(std::move(source)),
        copies_(std::move(copies)),
        registrations_(std::move(registrations)) {
    auto device_base = [&](int region) { return device_bases[region]; };
    if (source_.kind == GatherSource::Kind::kWidenWindow) {
      windows_.tokens = device_base(0);
      windows_.token_bytes = source_.token_bytes;
      windows_.is_signed = source_.signed_tokens;
      windows_.seq_len = source_.seq_len;
    } else {
      for (size_t f = 0; f < source_.fields.size(); ++f) {
        const GatherSource::Field& field = source_.fields[f];
        fields_.push_back({.source = device_base(field.region) + field.offset,
                           .stride = field.stride,
                           .bytes = field.bytes});
        host_fields_.push_back(host_bases[field.region] + field.offset);
        // See Note [large rows by the copy engines].
        const bool engines = !source_.key && field.bytes >= kCopyEngineRowBytes;
        (engines ? engine_fields_ : kernel_fields_)
            .push_back(static_cast<int>(f));
      }
    }
  }

  std::string name() const override { return "gather"; }
  absl::StatusOr<SampleLayout> OutputLayout(
      const BatchLayout& input) const override {
    if (input.sample().FieldIndex(kGatherKeyField) != 0) {
      return absl::InvalidArgumentError("the batches hold no gather keys");
    }
    return dataset_->layout();
  }
  bool Consumes(absl::string_view name) const override {
    return name == kGatherKeyField;
  }
  absl::Status Run(const DeviceTransformBatch& batch,
                   const Stream& stream) const override {
    const auto* keys = reinterpret_cast<const int64_t*>(batch.input[0].data);
    return Gather(batch, stream, keys, GatherOrder{});
  }
  absl::Status Run(GatherOrder order, const DeviceTransformBatch& batch,
                   const Stream& stream) const override {
    if (source_.window_keys.has_value()) {
      order.window_seed = source_.window_keys->seed;
      order.window_starts = source_.window_keys->starts;
    }
    return Gather(batch, stream, nullptr, order);
  }

 private:
  // Queues the gather of `batch`: the keys read from device memory `keys`,
  // or (null) computed from `order` where the gather runs.
  absl::Status Gather(const DeviceTransformBatch& batch, const Stream& stream,
                      const int64_t* keys, const GatherOrder& order) const {
    const int64_t samples = batch.samples;
    GatherWindows windows = windows_;
    if (source_.kind == GatherSource::Kind::kWidenWindow) {
      windows.input = reinterpret_cast<int64_t*>(batch.output[0].data);
      windows.target = reinterpret_cast<int64_t*>(batch.output[1].data);
    }
    // The kernels and copies, with the stream's device current (the copy
    // thread's may be another GPU's); the host loops on the host backend's
    // copy thread.
    auto launch = [&]() -> absl::Status {
#ifdef PINWHEEL_HAVE_CUDA
      void* native = stream.native_handle();
      if (source_.kind == GatherSource::Kind::kWidenWindow) {
        return Launched(
            keys != nullptr
                ? LaunchGatherWindows(keys, samples, windows, native)
                : LaunchGatherWindowsOrdered(order, samples, windows, native));
      }
      PINWHEEL_RETURN_IF_ERROR(CopyLargeRows(batch, native));
      // At most kMaxGatherFields outputs a launch; no allocation a batch.
      std::array<GatherField, kMaxGatherFields> chunk;
      for (size_t first = 0; first < kernel_fields_.size();
           first += kMaxGatherFields) {
        const int n = static_cast<int>(
            std::min<size_t>(kMaxGatherFields, kernel_fields_.size() - first));
        for (int i = 0; i < n; ++i) {
          const int f = kernel_fields_[first + static_cast<size_t>(i)];
          chunk[static_cast<size_t>(i)] = fields_[static_cast<size_t>(f)];
          chunk[static_cast<size_t>(i)].output =
              static_cast<std::byte*>(batch.output[f].data);
        }
        PINWHEEL_RETURN_IF_ERROR(Launched(
            keys != nullptr
                ? LaunchGatherRows(keys, samples, chunk.data(), n, native)
                : LaunchGatherRowsOrdered(order, samples, chunk.data(), n,
                                          native)));
      }
#endif
      return absl::OkStatus();
    };
    std::vector<GatherField> fields;  // the host backend's: every field
    if (!stream.device().is_cuda()) {
      fields = fields_;
      for (size_t f = 0; f < fields.size(); ++f) {
        fields[f].output = static_cast<std::byte*>(batch.output[f].data);
      }
    }
    return EnqueueTransformWork(
        stream, launch,
        [keys, samples, windows, order, fields = std::move(fields),
         kind = source_.kind] {
          std::vector<int64_t> computed;
          const int64_t* batch_keys = keys;
          if (batch_keys == nullptr) {
            computed.resize(static_cast<size_t>(samples));
            OrderedKeys(order, samples, computed.data());
            batch_keys = computed.data();
          }
          if (kind == GatherSource::Kind::kWidenWindow) {
            GatherWindowsOnHost(batch_keys, samples, windows);
          } else {
            GatherRowsOnHost(batch_keys, samples, fields.data(),
                             static_cast<int>(fields.size()));
          }
        });
  }

#ifdef PINWHEEL_HAVE_CUDA
  // Queues the rows of engine_fields_ as one batch of copies from the
  // registered host memory (Note [large rows by the copy engines]); a run
  // of consecutive indices is one copy.
  absl::Status CopyLargeRows(const DeviceTransformBatch& batch,
                             void* stream) const {
    if (engine_fields_.empty()) return absl::OkStatus();
    const absl::Span<const int64_t> indices = batch.sample_indices;
    std::vector<void*> dsts;
    std::vector<const void*> srcs;
    std::vector<size_t> sizes;
    const size_t most = engine_fields_.size() * indices.size();
    dsts.reserve(most);
    srcs.reserve(most);
    sizes.reserve(most);
    for (const int f : engine_fields_) {
      const GatherField& field = fields_[static_cast<size_t>(f)];
      const std::byte* host = host_fields_[static_cast<size_t>(f)];
      auto* out = static_cast<std::byte*>(batch.output[f].data);
      for (size_t s = 0; s < indices.size(); ++s) {
        const std::byte* src =
            host + static_cast<uint64_t>(indices[s]) * field.stride;
        std::byte* dst = out + s * field.bytes;
        if (!sizes.empty() &&
            static_cast<const std::byte*>(srcs.back()) + sizes.back() == src &&
            static_cast<std::byte*>(dsts.back()) + sizes.back() == dst) {
          sizes.back() += field.bytes;  // contiguous with the previous row
          continue;
        }
        dsts.push_back(dst);
        srcs.push_back(src);
        sizes.push_back(field.bytes);
      }
    }
    const int error = EnqueueRowCopies(dsts.data(), srcs.data(), sizes.data(),
                                       sizes.size(), stream);
    if (error == 0) return absl::OkStatus();
    return absl::InternalError(
        absl::StrCat("gather copies of ", sizes.size(),
                     " rows: ", GatherErrorString(error)));
  }

  static absl::Status Launched(int error) {
    if (error == 0) return absl::OkStatus();
    return absl::InternalError(
        absl::StrCat("gather kernel launch: ", GatherErrorString(error)));
  }
#endif

  const std::shared_ptr<const Dataset> dataset_;
  const GatherSource source_;
  // Unregistered before they are freed (destroyed after registrations_).
  const std::shared_ptr<const void> copies_;
  const std::vector<std::shared_ptr<const HostRegistration>> registrations_;
  std::vector<GatherField> fields_;  // kCopy; outputs filled per batch
  // kCopy: where each field's rows start in host memory, and which fields
  // the kernel gathers and which the copy engines move.
  std::vector<const std::byte*> host_fields_;
  std::vector<int> kernel_fields_;
  std::vector<int> engine_fields_;
  GatherWindows windows_;  // kWidenWindow; outputs per batch
};

// OK when `source` describes `layout` exactly.
absl::Status CheckSource(const GatherSource& source,
                         const SampleLayout& layout) {
  const int regions = static_cast<int>(source.regions.size());
  if (source.kind == GatherSource::Kind::kWidenWindow) {
    const int tb = source.token_bytes;
    if (regions != 1 || !(tb == 1 || tb == 2 || tb == 4 || tb == 8) ||
        source.seq_len < 1) {
      return NotUsable(absl::StrCat(
          "the dataset's token windows (", regions, " regions, token_bytes ",
          tb, ", seq_len ", source.seq_len,
          ") need one region, token_bytes 1, 2, 4 or 8 and seq_len >= 1"));
    }
    const std::vector<FieldSpec>& fields = layout.fields();
    const std::vector<int64_t> shape = {source.seq_len};
    if (fields.size() != 2 || fields[0].dtype != DType::kInt64 ||
        fields[1].dtype != DType::kInt64 || fields[0].shape != shape ||
        fields[1].shape != shape) {
      return NotUsable(absl::StrCat(
          "widened token windows need a layout of two i64[", source.seq_len,
          "] fields, the dataset's is ", layout.ToString()));
    }
    return absl::OkStatus();
  }
  if (source.fields.size() != layout.fields().size()) {
    return NotUsable(absl::StrCat(
        "the dataset's GatherSource describes ", source.fields.size(),
        " fields, its layout has ", layout.fields().size()));
  }
  for (size_t f = 0; f < source.fields.size(); ++f) {
    const GatherSource::Field& field = source.fields[f];
    if (field.region < 0 || field.region >= regions ||
        field.bytes != layout.fields()[f].bytes()) {
      return NotUsable(absl::StrCat(
          "the dataset's GatherSource field ", f, " (region ", field.region,
          " of ", regions, ", ", field.bytes, " bytes) does not match '",
          layout.fields()[f].ToString(), "'"));
    }
  }
  return absl::OkStatus();
}

// Returns whether every key of a dataset of `size` samples can be computed
// where the gather runs and lies in its region (Note [the order on the
// device]): keys that are the index, or the token windows' start agreeing
// with `key`.
bool KeysComputable(const GatherSource& source, int64_t size) {
  if (size <= 0) return false;
  int64_t largest = size - 1;  // the largest key
  if (source.window_keys.has_value()) {
    const GatherSource::WindowKeys& keys = *source.window_keys;
    if (keys.starts == 0 || keys.starts > uint64_t{INT64_MAX}) return false;
    // The loader's function must be the dataset's: checked on a spread of
    // indices (a dataset that set window_keys for another function would
    // otherwise read other windows on the device than on the host).
    for (int64_t i = 0; i < size; i += std::max<int64_t>(1, size / 97)) {
      if (!source.key ||
          source.key(i) != order::WindowStart(keys.seed, i, keys.starts)) {
        return false;
      }
    }
    largest = static_cast<int64_t>(keys.starts - 1);
  } else if (source.key) {
    return false;  // only the dataset knows its keys
  }
  if (source.kind == GatherSource::Kind::kWidenWindow) {
    const uint64_t token_bytes = static_cast<uint64_t>(source.token_bytes);
    return InRegion(largest, 0, token_bytes,
                    static_cast<uint64_t>(source.seq_len + 1) * token_bytes,
                    source.regions[0].size());
  }
  for (const GatherSource::Field& field : source.fields) {
    if (!InRegion(largest, field.offset, field.stride, field.bytes,
                  source.regions[static_cast<size_t>(field.region)].size())) {
      return false;
    }
  }
  return true;
}

}  // namespace

absl::StatusOr<GatherPlan> PlanGather(const LoaderOptions& options,
                                      const Device& device,
                                      std::shared_ptr<const Dataset> dataset,
                                      const MemoryLimits& limits,
                                      HostRegistry& registry) {
  if (options.gather == GatherMode::kOff) {
    return NotUsable("gather = GatherMode::kOff");
  }
  if (dataset == nullptr) {
    return NotUsable("an IterableDataset's samples come only from its streams");
  }
  if (options.device_transform != nullptr) {
    return NotUsable(absl::StrCat("a device_transform ('",
                                  options.device_transform->name(),
                                  "') is set; the gather cannot feed one"));
  }
  if (options.pad_last_batch) {
    // The worker path zeroes a padded sample and adds the validity field;
    // the gather would copy a row into it.
    return NotUsable(
        "pad_last_batch is set; the gather does not pad short batches");
  }
  if (options.on_error == ErrorPolicy::kReplace) {
    return NotUsable(
        "on_error = kReplace; the gather reads no sample that could fail");
  }
  if (!options.static_device_buffers.empty()) {
    // Its device buffers hold the keys before the batch: not the layout the
    // caller sized its buffers for (LoaderBuilder::device_buffer_bytes()).
    return NotUsable(
        "static_device_buffers are set; the gather writes keys and batch "
        "into its own buffers");
  }
  const SampleLayout& layout = dataset->layout();
  for (const FieldSpec& field : layout.fields()) {
    if (field.variable_length) {
      return NotUsable(absl::StrCat("field '", field.ToString(),
                                    "' is variable-length; the gather copies "
                                    "fixed-size rows"));
    }
  }
  PINWHEEL_ASSIGN_OR_RETURN(
      SampleLayout keys_layout,
      SampleLayout::Create({{kGatherKeyField, DType::kInt64, {}}}));
  PINWHEEL_ASSIGN_OR_RETURN(
      BatchLayout keys_batch,
      BatchLayout::Create(keys_layout, options.batch_size));
  PINWHEEL_ASSIGN_OR_RETURN(BatchLayout batch,
                            BatchLayout::Create(layout, options.batch_size));
  HostMemoryPlan plan = {
      .ring_slots = options.prefetch,
      .slot_bytes = keys_batch.slot_bytes(),
      .batch_size = options.batch_size,
      .sample_bytes = keys_layout.sample_bytes(),
      .pool_buffers = device.is_cuda() ? 0 : options.device_buffers,
      .pool_buffer_bytes =
          AlignUp(keys_batch.slot_bytes(), BatchLayout::kFieldAlignment) +
          batch.slot_bytes()};
  const uint64_t headroom = HostMemoryHeadroom(plan, limits);
  absl::StatusOr<GatherSource> source = dataset->Gather(headroom);
  if (!source.ok()) return source.status();
  PINWHEEL_RETURN_IF_ERROR(CheckSource(*source, layout));
  // See Note [small arrays are copied onto pages of their own].
  PINWHEEL_ASSIGN_OR_RETURN(GatherMemory memory,
                            PlaceRegions(*source, headroom));
  // What registration page-locks anew (a range another loader of this
  // process registered already is not counted twice).
  const bool cuda = device.is_cuda();
  const std::vector<absl::Span<const std::byte>> ranges =
      RegisteredRanges(memory.regions);
  for (absl::Span<const std::byte> range : ranges) {
    if (registry.references(range, cuda) == 0) {
      plan.registered_bytes += range.size();
    }
  }
  PINWHEEL_RETURN_IF_ERROR(AdmitHostMemory(plan, limits));
  std::vector<std::shared_ptr<const HostRegistration>> registrations;
  for (absl::Span<const std::byte> range : ranges) {
    PINWHEEL_ASSIGN_OR_RETURN(
        std::shared_ptr<const HostRegistration> registration,
        registry.Register(range, cuda ? device.ordinal() : -1));
    registrations.push_back(std::move(registration));
  }
  // Each region is read through the registration of the range holding it.
  std::vector<const std::byte*> device_bases;
  std::vector<const std::byte*> host_bases;
  for (absl::Span<const std::byte> region : memory.regions) {
    const std::byte* base = region.data();
    for (const auto& registration : registrations) {
      const absl::Span<const std::byte> range = registration->host();
      if (!region.empty() && region.data() >= range.data() &&
          region.data() < range.data() + range.size()) {
        base = registration->device_data() + (region.data() - range.data());
      }
    }
    device_bases.push_back(base);
    host_bases.push_back(region.data());
  }
  GatherPlan result;
  result.registered_bytes = plan.registered_bytes;
  const bool ordered =
      options.sampler == nullptr && KeysComputable(*source, dataset->size());
  result.keys = std::make_shared<GatherKeys>(dataset, *source, keys_layout);
  auto transform = std::make_shared<GatherTransform>(
      std::move(dataset), *std::move(source), std::move(memory.copies),
      std::move(registrations), device_bases, host_bases);
  if (ordered) result.ordered = transform;
  result.transform = std::move(transform);
  return result;
}

}  // namespace pinwheel::internal
