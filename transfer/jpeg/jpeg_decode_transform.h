// JpegDecodeTransform: the device stage's GPU JPEG decode. It takes the
// compressed batch the image datasets deliver under ImageDelivery::kJpeg
// (its schema in transfer/jpeg/compressed_batch.h: "jpeg" + "jpeg_length",
// "crop", "flip", "source_size") and writes "image", bf16 [3, size, size]
// normalised CHW, per sample: NvJpegDecoder decodes the batch into a
// scratch buffer, CropResizeNormalize crops, flips, resizes and normalises
// it into the output. Fields it does not consume ("label") are delivered
// as copied.
//
// Example:
//   JpegDecodeTransformOptions options;
//   options.size = 224;
//   options.max_batch_size = 256;
//   PINWHEEL_ASSIGN_OR_RETURN(std::shared_ptr<JpegDecodeTransform> decode,
//                             JpegDecodeTransform::Create(options));
//   LOG(INFO) << decode->report();  // backend, memory
//   LoaderBuilder(dataset).batch_size(256).device_transform(decode)...
// (loader/image/image_pipeline.h builds the pair for a decode option.)
//
// Built only with nvJPEG (PINWHEEL_HAVE_NVJPEG); runs on the cuda backend
// only (Run() on a host stream is FailedPrecondition).
//
// Note [decode on the transfer stream]
// The decoder and the crop are bound, at Create(), to a stream of the
// transform's own. Run() queues the decode on it at once: nvJPEG reads the
// compressed bytes from the pinned slot (host_input), not the device copy,
// and writes the transform's scratch, which the stream's own order
// protects. Then the stream waits for the transfer stream (an event
// recorded after the copy), since the crop writes the batch's output
// buffer, queues the crop, and the transfer stream waits for it (another
// event), so the stage's ready event, and the slot's fence, come after
// them: ordered as if queued on the transfer stream. The host waits only
// where a buffer is reused: the decoder for its previous batch, after the
// next batch's host checks (NvJpegDecoder's Note [overlapping batches]),
// and the crop for its previous batch (its pinned descriptors). Measured
// on the H100 (W4, 4 workers): 5,089-5,771 img/s when the checks came
// after that wait, parsed whole streams and the decode waited for the copy
// (2026-11-23 code); 15,657-15,733 img/s with this order and header-only
// parses (2026-11-24). Because the slot is read, the transform says
// ReadsHostInput() and the stage keeps the slot fenced until the decode
// has run. It reads every field it consumes there, so it says
// ReadsOnlyOnHost() of them and the stage copies only the fields it
// delivers ("label"): not the padded "jpeg" rows (Note [fields read only
// on the host] in transfer/device_stage/copy_writer.cc).
//
// Note [decode memory]
// Allocated once, at Create(): the scratch for a batch's decoded images
// (scratch_bytes; the images are packed by their size from "source_size",
// each at a 256-byte boundary), CropResizeNormalize's descriptors, and
// nvJPEG's own buffers. nvJPEG's hardware backend allocates its batched
// buffers outside the allocator hooks (see NvJpegDecoder's Note [memory]),
// so Create() measures instead: cudaMemGetInfo's free bytes before the
// transform allocates anything and after warm-up batches (one per
// decoder state, NvJpegDecoder::kStates) of max_batch_size copies of
// options.warmup_jpeg have been decoded and synchronised. That difference is
// device_bytes(); it is checked against device_bytes_limit (ResourceExhausted
// naming both). cudaMemGetInfo is device-wide: another process allocating in
// that window counts too. Without a warm-up JPEG the figure is what was
// allocated up front only, and nvJPEG may still grow on the first batches
// (report() says so).
//
// Note [a sample that does not decode]
// A sample that does not decode (corrupt, truncated, unsupported, its
// "source_size" outside the limits) is named by its place in the batch,
// its dataset index and its file or tar member (the "source_name" field,
// read from the pinned slot), with the decoder's cause, nvJPEG's error name
// included ("sample 3 of the batch (dataset index 17, /data/a/x.jpg):
// nvjpegJpegStreamParse: NVJPEG_STATUS_BAD_JPEG"). Without
// DeviceTransformBatch::skipped (ErrorPolicy::kStop) the first such sample
// fails the call. With it (kSkipSample) every such sample is listed there
// and the others are decoded, cropped and written packed at the front of
// "image", the rows after them zeroed; the stage drops the listed samples
// from the batch. Either way the other samples' bytes are read and decoded
// as in a clean batch, and nothing of a failed sample reaches the decoder's
// next batch (NvJpegDecoder re-initialises its batched state per batch).
// Padding samples (DeviceTransformBatch::padded) are not decoded; their
// rows are zeroed. The limit of the check: nvJPEG's hardware backend
// decodes some broken scans without complaint (see NvJpegDecoder's Note
// [one bad image fails alone]); a truncated file is caught by the framing
// check before it.
//
// Thread-safety: the DeviceTransform methods are const and thread-safe;
// loaders sharing one transform take turns in Run() (it holds a mutex for
// the batch: the decoder's buffers are one batch's at a time). report() and
// device_bytes() from any thread.
#ifndef PINWHEEL_TRANSFER_JPEG_JPEG_DECODE_TRANSFORM_H_
#define PINWHEEL_TRANSFER_JPEG_JPEG_DECODE_TRANSFORM_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

#include "transfer/device_transform.h"
#include "transfer/jpeg/jpeg_decode_choice.h"

namespace pinwheel {

struct JpegDecodeTransformOptions {
  // The CUDA device (ordinal) of the loader's stage.
  int device = 0;
  // The most samples per batch (the loader's batch_size); 1 to 65535.
  int max_batch_size = 256;
  // The output's side, pixels: "image" is bf16 [3, size, size].
  int size = 224;
  // Per channel, of pixel / 255: out = (pixel / 255 - mean) / std.
  std::array<float, 3> mean = {0.485f, 0.456f, 0.406f};
  std::array<float, 3> std = {0.229f, 0.224f, 0.225f};
  // The largest source image, pixels per side; a larger one fails.
  int max_image_width = 8192;
  int max_image_height = 8192;
  // Bytes of decoded RGB one batch may need, all images together; 0 means
  // max_batch_size * 3 MiB (a 1-megapixel average). A batch that needs
  // more fails its Run() with ResourceExhausted naming it.
  size_t scratch_bytes = 0;
  // A JPEG typical of the data (e.g. the data set's first file): decoded
  // max_batch_size times at Create() so that nvJPEG's buffers are grown
  // and measured up front. Empty: no warm-up (see Note [decode memory]).
  std::vector<uint8_t> warmup_jpeg;
  // The most device bytes the transform may hold, as measured at
  // Create(); 0 means no limit.
  size_t device_bytes_limit = 0;

  // Parameters that affect speed, and the training step beside the decode.
  // The decoder; one the GPU lacks makes Create() fail with nvJPEG's error.
  JpegDecodeBackend backend = JpegDecodeBackend::kAuto;
  // The stream priority of the decode and the crop (Note [the decode's
  // priority]).
  JpegDecodePriority priority = JpegDecodePriority::kHigh;
  // Threads a batch's host checks run on side by side (NvJpegDecoder's
  // Note [parallel checks]), the transfer thread one of them; 1 to 64.
  int check_threads = 8;
  // Decode one more warm-up batch, timed, for warmup_images_per_second()
  // (what decode = "auto" weighs); needs warmup_jpeg.
  bool measure_warmup_rate = false;
};

// Sums since Create(), over the batches Run() queued.
struct JpegDecodeTiming {
  int64_t batches = 0;
  int64_t images = 0;
  // Host milliseconds in the decoder's calls: their sum is the time the
  // transfer thread spent in the decode.
  double host_check_ms = 0;   // framing checks and nvJPEG's header parse
  double host_wait_ms = 0;    // waiting for a decode state to come free
  double host_submit_ms = 0;  // nvJPEG's decode calls
  double gpu_decode_ms = 0;   // the decodes on the GPU, over gpu_batches
  int64_t gpu_batches = 0;    // batches whose decode time is in (the last
                              // two are read when their state is reused)
};

class JpegDecodeTransform : public DeviceTransform {
 public:
  // Returns the transform, its decoder started (hardware backend when the
  // GPU has one) and its memory allocated and measured. InvalidArgument
  // for bad options; the CUDA or nvJPEG error when it cannot start;
  // ResourceExhausted over device_bytes_limit.
  [[nodiscard]] static absl::StatusOr<std::shared_ptr<JpegDecodeTransform>>
  Create(const JpegDecodeTransformOptions& options);

  // Waits for its stream, then frees everything.
  ~JpegDecodeTransform() override;

  std::string name() const override { return "jpeg_decode"; }
  absl::StatusOr<SampleLayout> OutputLayout(
      const BatchLayout& input) const override;
  bool Consumes(absl::string_view name) const override;
  // Queues the batch's decode and crop (see Note [decode on the transfer
  // stream]). A sample that does not decode fails the call, or is skipped
  // (see Note [a sample that does not decode]). ResourceExhausted when the
  // batch's images need more than scratch_bytes.
  absl::Status Run(const DeviceTransformBatch& batch,
                   const Stream& stream) const override;
  bool ReadsHostInput() const override { return true; }
  // Every consumed field: Run() reads them from the pinned slot.
  bool ReadsOnlyOnHost(absl::string_view name) const override {
    return Consumes(name);
  }

  // Returns a line for logs and stats: the decoder backend (and why others
  // were not taken) and the device memory measured at Create().
  const std::string& report() const { return report_; }
  // Returns the backend's name: "hardware", "gpu_hybrid" or "default".
  const std::string& backend() const { return backend_; }
  // Returns the device bytes measured at Create() (Note [decode memory]).
  size_t device_bytes() const { return device_bytes_; }
  // Returns the images a second the decoder reached at Create() on one
  // more warm-up batch (max_batch_size copies of warmup_jpeg, decoded and
  // synchronised, timed on the host); 0 unless measure_warmup_rate was set
  // and a warm-up JPEG given. What decode = "auto" weighs
  // (loader/image/image_pipeline.h).
  double warmup_images_per_second() const { return warmup_rate_; }
  // Returns where the decode spent its time so far: host milliseconds in
  // the checks, the waits and the nvJPEG calls, and GPU milliseconds of
  // the decodes (see JpegDecodeTiming). Thread-safe.
  JpegDecodeTiming timing() const;

  struct State;  // CUDA and nvJPEG handles; in the .cc

 private:
  explicit JpegDecodeTransform(JpegDecodeTransformOptions options);

  const JpegDecodeTransformOptions options_;
  std::unique_ptr<State> state_;
  std::string report_;
  std::string backend_;
  size_t device_bytes_ = 0;
  double warmup_rate_ = 0;
  mutable absl::Mutex run_mu_;
};

}  // namespace pinwheel

#endif  // PINWHEEL_TRANSFER_JPEG_JPEG_DECODE_TRANSFORM_H_
