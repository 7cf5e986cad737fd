// TarShardDataset: JPEG samples in tar shards, the WebDataset convention
// (<key>.jpg + <key>.cls members next to each other, the key being the path
// up to the first dot of the file name), read as an IterableDataset. Each
// sample is the image decoded and transformed into its place in the pinned
// slot ("image", u8 [size, size, 3]) and its class ("label", i64, the
// .cls member's decimal integer).
//
// Example:
//   PINWHEEL_ASSIGN_OR_RETURN(
//       std::shared_ptr<TarShardDataset> train,
//       TarShardDataset::Open({"shard-000.tar", "shard-001.tar"},
//                             {{.size = 224}, /*seed=*/7}));
//   PINWHEEL_ASSIGN_OR_RETURN(Loader loader,
//       LoaderBuilder(train).batch_size(256).num_workers(8).Build());
//
// Sharding: the loader splits the dataset into num_shards streams (world
// size × workers); stream s reads the shard files s, s + num_shards, ...
// of the epoch's order, in that order, each from start to end. The epoch's
// order is the list as given, or with shuffle_shards the list reordered by
// EpochShuffle(number of files, seed, epoch) (loader/sampler.h): a new
// order every epoch (as WebDataset's and torchdata's shard shuffles), a
// pure function of (seed, epoch), the same on every rank before the split,
// so each file is still read exactly once per epoch, and a stream's
// checkpoint stays two numbers. So the files should be at least as many as
// the streams (a stream without a file is empty).
//
// Randomness: a sample's crop and flip come from SampleRandom(seed, epoch,
// key) with key = (index of its shard file in the given list) << 40 | (byte
// offset of its .jpg member's header) / 512: the same sample gets the same
// augmentation whatever the number of ranks or workers, the shard order and
// after a resume.
// (A stream's SampleView::random() is keyed by nothing stream-specific, so
// the dataset keys its own.) TarShardOptions::seed plays the loader's seed.
//
// Resume: a stream's SaveState() is "<file position> <byte offset>", the
// position in its own list of files (which the same shard, num_shards and
// epoch give again) and the offset of the next sample's
// first member; RestoreState() continues from there.
//
// Bad input: a tar fault (see loader/image/tar_reader.h) stops the stream
// with DataLoss naming the shard file and the member. A bad sample (a .jpg
// without .cls or the reverse, a .cls that is not an integer, a JPEG that
// does not decode) is an error naming the shard and the member, or, with
// skip_bad_samples, left out and counted (skipped_samples()): the loader's
// ErrorPolicy::kSkipSample does not reach inside a stream.
//
// Note [repeated keys]: a sample's members are the run of members that
// share its key. A second .jpg (or .jpeg) or .cls in the same run, as when
// two samples have one key back to back or a member was written twice, is
// a bad sample (DataLoss naming the shard, the member and its offset;
// skipped and counted with skip_bad_samples), never one of the two
// silently dropped. WebDataset refuses such a shard too ("duplicate file
// name in tar file").
//
// Files that change while read: shards are read with pread(2), never
// through a memory map, so a shard truncated in place while a stream reads
// it (`tar cf` over the same path) is DataLoss naming the file and the
// byte range, not SIGBUS (Note [mapping hazard] in
// loader/internal/mapped_file.h). Replace shards by writing a new file and
// renaming it over the old.
//
// Storage: a shard is a local path or a URL (http://, https://, s3://;
// loader/storage/open_object_store.h), all of one kind; a list of many
// from one pattern with ExpandShardPattern("s3://b/shard-{000..099}.tar")
// (loader/storage/shard_pattern.h). Local paths are read with pread,
// member by member, as above. URLs are read through an ObjectStore in
// chunks of read_chunk_bytes, read_ahead_chunks of them fetched ahead
// while the current one decodes; Open() asks each shard's size once (a
// HEAD over HTTP). Order, keys, resume and errors are the same for both;
// a store's failure after its retries (StoreOptions) stops the stream
// with its error, naming the URL, the byte range and the attempts.
//
// Thread-safe: OpenShard() from any thread; each stream is used by one
// thread at a time (as the loader does).
#ifndef PINWHEEL_LOADER_IMAGE_TAR_SHARDS_H_
#define PINWHEEL_LOADER_IMAGE_TAR_SHARDS_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#include "loader/image/image_transforms.h"
#include "loader/iterable_dataset.h"
#include "loader/storage/object_store.h"
#include "loader/storage/store_options.h"
#include "transfer/sample_layout.h"

namespace pinwheel {

struct TarShardOptions {
  // The decode and transform (size, train or eval, crop ranges, limits).
  ImageTransformOptions transform;
  // The seed of the samples' augmentation (see the file comment).
  uint64_t seed = 0;
  // Leave out and count bad samples instead of failing (see above).
  bool skip_bad_samples = false;
  // Reorder the shard files every epoch by (seed, epoch) (see Sharding
  // above); false reads them in the given order every epoch.
  bool shuffle_shards = false;
  // A .jpg member larger than this is a bad sample, bytes.
  int64_t max_image_bytes = int64_t{64} << 20;

  // Shards at URLs (see Storage above).

  // The store the shards are read through (a cache over another store, one
  // store shared by several datasets); null: one opened for the shards'
  // scheme with `storage` (local paths are then read with pread directly).
  std::shared_ptr<ObjectStore> store;
  // The options of the store opened when `store` is null.
  StoreOptions storage;
  // A stream reads its shard in range reads of this many bytes, >= 4096 ...
  int64_t read_chunk_bytes = int64_t{8} << 20;
  // ... with this many chunks read ahead of the one it decodes, >= 0.
  int read_ahead_chunks = 1;
};

// Returns the indices (into the list of `num_files` shard files) that stream
// `shard` of `num_shards` reads in `epoch`, in its order (see Sharding
// above): what OpenShard() reads, and what a read plan
// (loader/storage/cache/read_plan.h) prefetches.
// REQUIRES: 0 <= shard < num_shards.
std::vector<int64_t> TarShardStreamFiles(int64_t num_files,
                                         const TarShardOptions& options,
                                         int shard, int num_shards,
                                         int64_t epoch);

class TarShardDataset : public IterableDataset {
 public:
  // Checks that each of `shards` is a regular file, or for URLs that the
  // store knows its size (NotFound / InvalidArgument / the store's error
  // naming it) and the options (InvalidArgument naming the field); reads
  // no shard's contents.
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<TarShardDataset>> Open(
      std::vector<std::string> shards, const TarShardOptions& options = {});

  const SampleLayout& layout() const override { return layout_; }
  absl::StatusOr<std::unique_ptr<SampleStream>> OpenShard(
      int shard, int num_shards, int64_t epoch) const override;
  // True when images are decoded here (not delivered as JPEG): each
  // sample's decode is left to any worker (SampleStream::NextOrDefer), so a
  // batch being read holds its samples' JPEG bytes until they are decoded
  // (at most batch_size × max_image_bytes; about 26 MB for 256 ImageNet
  // images).
  bool defers_sample_work() const override {
    return options_.transform.delivery != ImageDelivery::kJpeg;
  }

  const std::vector<std::string>& shards() const { return shards_; }
  const TarShardOptions& options() const { return options_; }
  // Bad samples left out so far (skip_bad_samples), all streams together.
  int64_t skipped_samples() const {
    return skipped_->load(std::memory_order_relaxed);
  }

 private:
  TarShardDataset(std::vector<std::string> shards, std::vector<int64_t> sizes,
                  std::shared_ptr<ObjectStore> store, TarShardOptions options,
                  SampleLayout layout)
      : shards_(std::move(shards)),
        sizes_(std::move(sizes)),
        store_(std::move(store)),
        options_(options),
        layout_(std::move(layout)),
        skipped_(std::make_shared<std::atomic<int64_t>>(0)) {}

  std::vector<std::string> shards_;
  std::vector<int64_t> sizes_;  // of the shards, when read through store_
  // Null: local files read with pread (TarShardStream's file source).
  std::shared_ptr<ObjectStore> store_;
  TarShardOptions options_;
  SampleLayout layout_;
  // Shared with the streams, which may outlive a moved-from dataset.
  std::shared_ptr<std::atomic<int64_t>> skipped_;
};

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_IMAGE_TAR_SHARDS_H_
