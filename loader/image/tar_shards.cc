#include "loader/image/tar_shards.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <sys/stat.h>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

#include "loader/image/compressed_image.h"
#include "loader/image/image_transforms.h"
#include "loader/image/tar_reader.h"
#include "loader/internal/mapped_file.h"
#include "loader/sample_random.h"
#include "loader/sampler.h"
#include "loader/storage/open_object_store.h"
#include "loader/storage/sequential_reader.h"
#include "pinning/base/status_macros.h"

namespace pinwheel {
namespace {

// A member's WebDataset key and extension: "a/b.c.jpg" -> ("a/b", "c.jpg").
struct KeyAndExtension {
  absl::string_view key;
  std::string extension;  // lower case
};

KeyAndExtension SplitKey(absl::string_view name) {
  const size_t slash = name.rfind('/');
  const size_t base = slash == absl::string_view::npos ? 0 : slash + 1;
  const size_t dot = name.find('.', base);
  if (dot == absl::string_view::npos) return {name, ""};
  return {name.substr(0, dot), absl::AsciiStrToLower(name.substr(dot + 1))};
}

// A shard file read with pread (Note [mapping hazard] in
// loader/internal/mapped_file.h): a shard truncated in place while it is
// read is DataLoss naming the file and the byte range, never SIGBUS.
class ShardSource : public TarSource {
 public:
  explicit ShardSource(const internal::MappedFile& file) : file_(file) {}
  uint64_t size() const override { return file_.size(); }
  absl::Status Read(uint64_t offset, absl::Span<std::byte> out) const override {
    const absl::Span<std::byte> parts[] = {out};
    return file_.ReadInto(offset, parts, "the tar bytes at offset",
                          static_cast<int64_t>(offset));
  }

 private:
  const internal::MappedFile& file_;
};

// A shard at a URL, read through an ObjectStore in large chunks with read
// ahead (loader/storage/sequential_reader.h): a few range GETs per shard,
// not one per member.
class StoreShardSource : public TarSource {
 public:
  explicit StoreShardSource(SequentialReader& reader) : reader_(reader) {}
  uint64_t size() const override {
    return static_cast<uint64_t>(reader_.size());
  }
  absl::Status Read(uint64_t offset, absl::Span<std::byte> out) const override {
    return reader_.Read(static_cast<int64_t>(offset), out);
  }

 private:
  SequentialReader& reader_;
};

class TarShardStream : public SampleStream {
 public:
  TarShardStream(std::vector<std::string> paths, std::vector<int64_t> indices,
                 std::vector<int64_t> sizes, const TarShardOptions& options,
                 int64_t epoch, std::shared_ptr<ObjectStore> store,
                 std::shared_ptr<std::atomic<int64_t>> skipped)
      : paths_(std::move(paths)),
        indices_(std::move(indices)),
        sizes_(std::move(sizes)),
        options_(options),
        epoch_(epoch),
        store_(std::move(store)),
        skipped_(std::move(skipped)) {}

  absl::StatusOr<bool> Next(SampleView& out) override {
    return NextFinishedHere(out);
  }

  // Reads the next sample's members; a decoded image is left to `finish`
  // (Note [a streamed sample finished elsewhere] in
  // loader/iterable_dataset.h), a JPEG delivered as is is written here.
  absl::StatusOr<bool> NextOrDefer(SampleView& out,
                                   SampleFinish& finish) override {
    for (;;) {
      if (position_ >= paths_.size()) return false;
      if (store_ != nullptr && reader_ == nullptr) {
        const int64_t size = sizes_[position_];
        if (offset_ > static_cast<uint64_t>(size)) {
          return absl::InvalidArgumentError(absl::StrCat(
              "tar shard ", paths_[position_], ": the restored offset ",
              offset_, " is past its end (", size, " bytes)"));
        }
        reader_ = OpenReader(position_);
      } else if (store_ == nullptr && !file_.has_value()) {
        absl::StatusOr<internal::MappedFile> file =
            internal::MappedFile::OpenUnmapped(paths_[position_]);
        if (!file.ok()) {
          return absl::Status(
              file.status().code(),
              absl::StrCat("tar shard: ", file.status().message()));
        }
        if (offset_ > file->size()) {
          return absl::InvalidArgumentError(absl::StrCat(
              "tar shard ", paths_[position_], ": the restored offset ",
              offset_, " is past its end (", file->size(), " bytes)"));
        }
        file_ = *std::move(file);
      }
      absl::StatusOr<bool> sample = NextInFile(out, finish);
      if (!sample.ok()) return sample.status();
      if (*sample) {
        if (reader_ != nullptr) PrefetchNextShard();
        return true;
      }
      file_.reset();                      // this file is done
      reader_ = std::move(next_reader_);  // null, or the next file's
      ++position_;
      offset_ = 0;
    }
  }

  absl::StatusOr<std::string> SaveState() const override {
    return absl::StrCat(position_, " ", offset_);
  }

  absl::Status RestoreState(absl::string_view state) override {
    const std::vector<absl::string_view> parts =
        absl::StrSplit(state, ' ', absl::SkipEmpty());
    uint64_t position = 0;
    uint64_t offset = 0;
    if (parts.size() != 2 || !absl::SimpleAtoi(parts[0], &position) ||
        !absl::SimpleAtoi(parts[1], &offset) || position > paths_.size() ||
        offset % kTarBlockBytes != 0 ||
        (position == paths_.size() && offset != 0)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tar shard stream: the state \"", state,
          "\" is not \"<file position> <offset>\" with a position in 0..",
          paths_.size(), " and an offset a multiple of ", kTarBlockBytes));
    }
    file_.reset();
    reader_.reset();
    next_reader_.reset();
    position_ = static_cast<size_t>(position);
    offset_ = offset;
    return absl::OkStatus();
  }

 private:
  std::unique_ptr<SequentialReader> OpenReader(size_t position) const {
    return std::make_unique<SequentialReader>(
        store_, paths_[position], sizes_[position],
        SequentialReadOptions{.chunk_bytes = options_.read_chunk_bytes,
                              .read_ahead_chunks = options_.read_ahead_chunks});
  }

  // Note [the next shard's first chunk]
  // A stream's reader reads ahead within its shard only, so each new shard
  // began with a wait for its first chunk. The stream knows its next file:
  // once the current reader has started every chunk to its end, the next
  // file's reader starts its first chunks. Memory: at most the current
  // reader's chunks and 1 + read_ahead_chunks more. On 2 x H200 (W4 over
  // HTTP from the loopback, 12 MiB shards, 2026-11-27) it changed nothing
  // beyond the noise (0.81 -> 0.83 of the local disk): one I/O thread was
  // the bound there (StoreOptions::io_threads). It counts where a request
  // waits long (a distant endpoint, the 20 ms rows of w4_storage.sh).
  void PrefetchNextShard() {
    if (next_reader_ != nullptr || position_ + 1 >= paths_.size() ||
        !reader_->IssuedToEnd()) {
      return;
    }
    next_reader_ = OpenReader(position_ + 1);
    next_reader_->Prefetch(0);
  }

  // Reads the next sample of the open file into `out`: true, or false at
  // its end, or an error.
  absl::StatusOr<bool> NextInFile(SampleView& out, SampleFinish& finish) {
    if (store_ != nullptr) {
      return NextInSource(StoreShardSource(*reader_), out, finish);
    }
    return NextInSource(ShardSource(*file_), out, finish);
  }

  absl::StatusOr<bool> NextInSource(const TarSource& tar, SampleView& out,
                                    SampleFinish& finish) {
    const std::string& path = paths_[position_];
    for (;;) {
      absl::StatusOr<std::optional<TarMember>> first =
          ReadTarMember(tar, offset_, path);
      if (!first.ok()) return first.status();
      if (!first->has_value()) return false;
      if (!(*first)->is_regular_file()) {  // a directory, a link: not data
        offset_ = (*first)->next_offset;
        continue;
      }
      // The sample: the members that share the first one's key.
      const std::string key(SplitKey((*first)->name).key);
      std::optional<TarMember> image;
      std::optional<TarMember> label;
      std::optional<TarMember> repeated;  // a second .jpg or .cls of the key
      std::optional<TarMember> member = **std::move(first);
      while (member.has_value()) {
        if (member->is_regular_file()) {
          const KeyAndExtension k = SplitKey(member->name);
          if (k.key != key) break;
          std::optional<TarMember>* slot = nullptr;
          if (k.extension == "jpg" || k.extension == "jpeg") {
            slot = &image;
          } else if (k.extension == "cls") {
            slot = &label;
          }
          if (slot != nullptr) {
            if (slot->has_value() && !repeated.has_value()) repeated = member;
            *slot = member;
          }
        }
        offset_ = member->next_offset;
        absl::StatusOr<std::optional<TarMember>> next =
            ReadTarMember(tar, offset_, path);
        if (!next.ok()) return next.status();
        member = *std::move(next);
      }
      absl::Status status =
          repeated.has_value()
              ? absl::DataLossError(absl::StrCat(
                    "tar shard ", path, ": member \"", repeated->name,
                    "\" at offset ", repeated->header_offset,
                    " repeats the key \"", key,
                    "\" of the sample before it (two samples with one key, "
                    "or a member written twice); see Note [repeated keys] in "
                    "tar_shards.h"))
              : Decode(tar, path, key, image, label, out, finish);
      if (status.ok()) return true;
      if (!options_.skip_bad_samples) return status;
      skipped_->fetch_add(1, std::memory_order_relaxed);
    }
  }

  absl::Status Decode(const TarSource& tar, const std::string& path,
                      const std::string& key,
                      const std::optional<TarMember>& image,
                      const std::optional<TarMember>& label, SampleView& out,
                      SampleFinish& finish) {
    if (!image.has_value()) {
      return absl::DataLossError(
          absl::StrCat("tar shard ", path, ": sample \"", key,
                       "\" has no .jpg member (", key, ".cls at offset ",
                       label.has_value() ? label->header_offset : 0, ")"));
    }
    if (!label.has_value()) {
      return absl::DataLossError(absl::StrCat(
          "tar shard ", path, ": member \"", image->name, "\" at offset ",
          image->header_offset, " has no class member \"", key, ".cls\""));
    }
    char digits[64];
    const size_t digits_size =
        static_cast<size_t>(std::min<uint64_t>(label->size, sizeof(digits)));
    if (absl::Status s = tar.Read(
            label->data_offset,
            absl::MakeSpan(reinterpret_cast<std::byte*>(digits), digits_size));
        !s.ok()) {
      return s;
    }
    const absl::string_view text(digits, digits_size);
    int64_t class_index = 0;
    if (label->size > sizeof(digits) ||
        !absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &class_index) ||
        class_index < 0) {
      return absl::DataLossError(
          absl::StrCat("tar shard ", path, ": member \"", label->name,
                       "\" at offset ", label->header_offset,
                       " is not a class index (a decimal integer >= 0)"));
    }
    if (image->size > static_cast<uint64_t>(options_.max_image_bytes)) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "tar shard ", path, ": member \"", image->name, "\" has ",
          image->size,
          " bytes, over max_image_bytes = ", options_.max_image_bytes));
    }
    // Note [tar sample key]: see the file comment in tar_shards.h.
    const uint64_t sample_key =
        (static_cast<uint64_t>(indices_[position_]) << 40) |
        (image->header_offset / kTarBlockBytes);
    SampleRandom random(options_.seed, epoch_, sample_key);
    std::string name = absl::StrCat(path, ":", image->name);
    if (options_.transform.delivery == ImageDelivery::kJpeg) {
      // The member's bytes, in a buffer the stream keeps (no allocation
      // once it has held the largest image), copied into the slot here.
      jpeg_.resize(static_cast<size_t>(image->size));
      if (absl::Status s = tar.Read(image->data_offset, absl::MakeSpan(jpeg_));
          !s.ok()) {
        return s;
      }
      return WriteCompressedImage(jpeg_, name, options_.transform, random,
                                  class_index, out);
    }
    // Decoded: the bytes go with the finish, which any worker may run.
    std::vector<std::byte> jpeg(static_cast<size_t>(image->size));
    if (absl::Status s = tar.Read(image->data_offset, absl::MakeSpan(jpeg));
        !s.ok()) {
      return s;
    }
    finish = [jpeg = std::move(jpeg), name = std::move(name),
              transform = options_.transform, random, class_index,
              skip = options_.skip_bad_samples, skipped = skipped_](
                 SampleView& view) mutable -> absl::StatusOr<FinishResult> {
      absl::Status decoded = DecodeTransformedImage(
          jpeg, name, transform, random, view.field_as<uint8_t>(0));
      if (!decoded.ok()) {
        if (!skip) return decoded;
        skipped->fetch_add(1, std::memory_order_relaxed);
        return FinishResult::kSkipped;
      }
      view.field_as<int64_t>(1)[0] = class_index;
      return FinishResult::kWritten;
    };
    return absl::OkStatus();
  }

  const std::vector<std::string> paths_;  // this stream's files, in order
  const std::vector<int64_t> indices_;    // their places in the whole list
  const std::vector<int64_t> sizes_;      // their sizes (store_ only)
  const TarShardOptions options_;
  const int64_t epoch_;
  const std::shared_ptr<ObjectStore> store_;  // null: local files, pread
  const std::shared_ptr<std::atomic<int64_t>> skipped_;
  size_t position_ = 0;  // in paths_
  uint64_t offset_ = 0;  // of the next sample's first header in that file
  std::optional<internal::MappedFile> file_;  // unmapped: read with pread
  std::unique_ptr<SequentialReader> reader_;  // the shard through store_
  // The next shard's, started early (Note [the next shard's first chunk]).
  std::unique_ptr<SequentialReader> next_reader_;
  std::vector<std::byte> jpeg_;  // kJpeg: the image member's bytes
};

// The store the shards are read through: options.store, else null for
// local paths (read with pread, as before URLs), else one opened for their
// scheme. InvalidArgument when the list mixes schemes.
absl::StatusOr<std::shared_ptr<ObjectStore>> StoreFor(
    const std::vector<std::string>& shards, const TarShardOptions& options) {
  if (options.store != nullptr) return options.store;
  PINWHEEL_ASSIGN_OR_RETURN(UrlScheme first, SchemeOf(shards.front()));
  for (const std::string& shard : shards) {
    PINWHEEL_ASSIGN_OR_RETURN(UrlScheme scheme, SchemeOf(shard));
    if (scheme != first) {
      return absl::InvalidArgumentError(
          absl::StrCat("TarShardDataset: shard ", shard,
                       " is not of the same kind as ", shards.front(),
                       " (local paths, http(s):// or s3://: one kind per "
                       "dataset, or pass TarShardOptions::store)"));
    }
  }
  if (first == UrlScheme::kLocal) return nullptr;
  absl::StatusOr<std::shared_ptr<ObjectStore>> store =
      OpenObjectStore(shards.front(), options.storage);
  if (!store.ok()) {
    return absl::Status(
        store.status().code(),
        absl::StrCat("TarShardDataset: ", store.status().message()));
  }
  return store;
}

// Every shard's size, asked of `store` by a few threads at once (a HEAD
// each over HTTP): the first failure names its shard.
absl::StatusOr<std::vector<int64_t>> ShardSizes(
    ObjectStore& store, const std::vector<std::string>& shards) {
  std::vector<int64_t> sizes(shards.size(), -1);
  std::vector<absl::Status> failures(shards.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < shards.size(); i = next++) {
      absl::StatusOr<int64_t> size = store.Size(shards[i]);
      if (size.ok()) {
        sizes[i] = *size;
      } else {
        failures[i] = size.status();
      }
    }
  };
  std::vector<std::thread> threads;
  const size_t helpers = std::min<size_t>(15, shards.size() / 8);
  for (size_t t = 0; t < helpers; ++t) threads.emplace_back(work);
  work();
  for (std::thread& t : threads) t.join();
  for (size_t i = 0; i < shards.size(); ++i) {
    if (!failures[i].ok()) {
      return absl::Status(failures[i].code(),
                          absl::StrCat("TarShardDataset: shard ", shards[i],
                                       ": ", failures[i].message()));
    }
  }
  return sizes;
}

}  // namespace

absl::StatusOr<std::shared_ptr<TarShardDataset>> TarShardDataset::Open(
    std::vector<std::string> shards, const TarShardOptions& options) {
  if (shards.empty()) {
    return absl::InvalidArgumentError("TarShardDataset: no shard files given");
  }
  if (absl::Status s = ValidateImageTransformOptions(options.transform);
      !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("TarShardDataset: ", s.message()));
  }
  if (options.max_image_bytes < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "TarShardDataset: max_image_bytes = ", options.max_image_bytes,
        " must be >= 1"));
  }
  if (absl::Status s = ValidateSequentialReadOptions(
          {options.read_chunk_bytes, options.read_ahead_chunks});
      !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("TarShardDataset: ", s.message()));
  }
  PINWHEEL_ASSIGN_OR_RETURN(std::shared_ptr<ObjectStore> store,
                            StoreFor(shards, options));
  std::vector<int64_t> sizes;
  if (store != nullptr) {
    PINWHEEL_ASSIGN_OR_RETURN(sizes, ShardSizes(*store, shards));
  } else {
    for (const std::string& shard : shards) {
      struct stat st;
      if (stat(shard.c_str(), &st) != 0) {
        const int error = errno;
        return absl::ErrnoToStatus(
            error, absl::StrCat("TarShardDataset: shard ", shard));
      }
      if (!S_ISREG(st.st_mode)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "TarShardDataset: shard ", shard, " is not a regular file"));
      }
    }
  }
  absl::StatusOr<SampleLayout> layout =
      options.transform.delivery == ImageDelivery::kJpeg
          ? CompressedImageLayout(options.transform.max_jpeg_bytes)
          : SampleLayout::Create(
                {{.name = "image",
                  .dtype = DType::kUInt8,
                  .shape = {options.transform.size, options.transform.size, 3}},
                 {.name = "label", .dtype = DType::kInt64, .shape = {}}});
  if (!layout.ok()) return layout.status();
  return std::shared_ptr<TarShardDataset>(
      new TarShardDataset(std::move(shards), std::move(sizes), std::move(store),
                          options, *std::move(layout)));
}

std::vector<int64_t> TarShardStreamFiles(int64_t num_files,
                                         const TarShardOptions& options,
                                         int shard, int num_shards,
                                         int64_t epoch) {
  // The epoch's order of the files, the same on every rank, split over the
  // streams afterwards: each file is read once per epoch.
  const EpochShuffle order(options.shuffle_shards ? num_files : 0, options.seed,
                           epoch);
  std::vector<int64_t> indices;
  for (int64_t i = shard; i < num_files; i += num_shards) {
    indices.push_back(options.shuffle_shards ? order.At(i) : i);
  }
  return indices;
}

absl::StatusOr<std::unique_ptr<SampleStream>> TarShardDataset::OpenShard(
    int shard, int num_shards, int64_t epoch) const {
  if (num_shards < 1 || shard < 0 || shard >= num_shards) {
    return absl::InvalidArgumentError(absl::StrCat("TarShardDataset: shard ",
                                                   shard, " of ", num_shards,
                                                   " is out of range"));
  }
  std::vector<int64_t> indices = TarShardStreamFiles(
      static_cast<int64_t>(shards_.size()), options_, shard, num_shards, epoch);
  std::vector<std::string> paths;
  std::vector<int64_t> sizes;
  for (const int64_t file : indices) {
    paths.push_back(shards_[static_cast<size_t>(file)]);
    if (store_ != nullptr) sizes.push_back(sizes_[static_cast<size_t>(file)]);
  }
  return std::make_unique<TarShardStream>(std::move(paths), std::move(indices),
                                          std::move(sizes), options_, epoch,
                                          store_, skipped_);
}

}  // namespace pinwheel
