#include "loader/gather/gather_plan.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cstdint>
#include <utility>

#include "absl/strings/str_cat.h"

#include "loader/epoch_order.h"
#include "loader/gather/gather_memory.h"
#include "loader/gather/gather_writer.h"
#include "loader/pipeline/map_style_source.h"
#include "loader/pipeline/memory_admission.h"
#include "pinning/base/call_user.h"
#include "pinning/base/status_macros.h"

namespace pinwheel::internal {
namespace {

constexpr size_t AlignUp(size_t n, size_t alignment) {
  return (n + alignment - 1) / alignment * alignment;
}

absl::Status NotUsable(absl::string_view why) {
  return absl::FailedPreconditionError(why);
}

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
    int64_t key = index;
    if (source_.key) {
      PINWHEEL_RETURN_IF_ERROR(CallUser("GatherSource::key", [&] {
        key = source_.key(index);
        return absl::OkStatus();
      }));
    }
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
absl::StatusOr<bool> KeysComputable(const GatherSource& source, int64_t size) {
  if (size <= 0) return false;
  int64_t largest = size - 1;  // the largest key
  if (source.window_keys.has_value()) {
    const GatherSource::WindowKeys& keys = *source.window_keys;
    if (keys.starts == 0 || keys.starts > uint64_t{INT64_MAX}) return false;
    // The loader's function must be the dataset's: checked on a spread of
    // indices (a dataset that set window_keys for another function would
    // otherwise read other windows on the device than on the host).
    if (!source.key) return false;
    for (int64_t i = 0; i < size; i += std::max<int64_t>(1, size / 97)) {
      int64_t key = 0;
      PINWHEEL_RETURN_IF_ERROR(CallUser("GatherSource::key", [&] {
        key = source.key(i);
        return absl::OkStatus();
      }));
      if (key != order::WindowStart(keys.seed, i, keys.starts)) return false;
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

// A gather checked, registered and ready to assemble (PlanGather()).
struct Prepared {
  BatchLayout keys_layout;              // a slot of keys
  BatchLayout output;                   // the dataset's batches
  std::shared_ptr<const Dataset> keys;  // GatherKeys
  std::shared_ptr<const Dataset> dataset;
  GatherSource source;
  GatherBases bases;
  uint64_t registered_bytes = 0;
  bool ordered = false;  // Note [the order on the device]
};

// Returns the gather's writer and keys, or why the gather path cannot be
// used (PlanGather()'s refusals, before its batch source is made).
absl::StatusOr<Prepared> Prepare(const LoaderOptions& options,
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
    std::string name = "?";
    CallUser("DeviceTransform::name", [&] {
      name = options.device_transform->name();
      return absl::OkStatus();
    }).IgnoreError();  // the message only
    return NotUsable(absl::StrCat("a device_transform ('", name,
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
  absl::StatusOr<GatherSource> source =
      CallUser("Dataset::Gather", [&] { return dataset->Gather(headroom); });
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
  PINWHEEL_ASSIGN_OR_RETURN(const bool ordered,
                            options.sampler == nullptr
                                ? KeysComputable(*source, dataset->size())
                                : absl::StatusOr<bool>(false));
  Prepared prepared{
      .keys_layout = keys_batch,
      .output = batch,
      .keys = std::make_shared<GatherKeys>(dataset, *source, keys_layout),
      .dataset = std::move(dataset),
      .source = *std::move(source),
      .bases = {.device = std::move(device_bases),
                .host = std::move(host_bases),
                .copies = std::move(memory.copies),
                .registrations = std::move(registrations)},
      .registered_bytes = plan.registered_bytes,
      .ordered = ordered};
  return prepared;
}

// Returns the path of a prepared gather, or its batch source's error.
absl::StatusOr<LoaderPath> Assemble(const LoaderOptions& options,
                                    Prepared prepared,
                                    const LoaderCheckpoint* resume) {
  LoaderPath path;
  PINWHEEL_ASSIGN_OR_RETURN(
      std::unique_ptr<MapStyleSource> source,
      MapStyleSource::Create(std::move(prepared.keys), options, resume));
  path.fill_layout = prepared.keys_layout;
  path.writer = std::make_shared<GatherWriter>(
      std::move(prepared.keys_layout), std::move(prepared.output),
      std::move(prepared.dataset), std::move(prepared.source),
      std::move(prepared.bases), prepared.ordered ? source.get() : nullptr);
  path.source = std::move(source);
  // One thread computes keys: Note [one thread gathers]; none with the
  // order on the device: Next() submits the batches.
  path.workers = prepared.ordered ? 0 : std::min(options.num_workers, 1);
  path.gather = {.used = true,
                 .registered_bytes = prepared.registered_bytes,
                 .order_on_device = prepared.ordered};
  return path;
}

}  // namespace

absl::StatusOr<LoaderPath> PlanGather(const LoaderOptions& options,
                                      const Device& device,
                                      std::shared_ptr<const Dataset> dataset,
                                      const MemoryLimits& limits,
                                      HostRegistry& registry,
                                      const LoaderCheckpoint* resume) {
  PINWHEEL_ASSIGN_OR_RETURN(
      Prepared prepared,
      Prepare(options, device, std::move(dataset), limits, registry));
  return Assemble(options, std::move(prepared), resume);
}

absl::StatusOr<LoaderPath> PlanLoaderPath(
    const LoaderOptions& options, const Device& device,
    const BatchLayout& layout, std::shared_ptr<const Dataset> dataset,
    std::shared_ptr<const IterableDataset> iterable,
    const LoaderCheckpoint* resume) {
  // The gather path, when it can be used: the producer reads keys (or
  // nothing), the stage gathers.
  absl::StatusOr<Prepared> gather = Prepare(
      options, device, dataset, ReadMemoryLimits(), HostRegistry::Global());
  if (gather.ok()) return Assemble(options, *std::move(gather), resume);
  if (options.gather == GatherMode::kOn) {
    return absl::FailedPreconditionError(absl::StrCat(
        "LoaderBuilder: gather = GatherMode::kOn, but the gather path "
        "cannot be used: ",
        gather.status().message()));
  }
  PINWHEEL_ASSIGN_OR_RETURN(LoaderPath path,
                            MakeWorkerPath(options, layout, std::move(dataset),
                                           std::move(iterable), resume));
  path.gather.fallback = std::string(gather.status().message());
  return path;
}

}  // namespace pinwheel::internal
