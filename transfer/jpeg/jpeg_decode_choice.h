// The GPU JPEG decode's choices that the image pipeline passes through
// (loader/image/image_pipeline.h) to JpegDecodeTransform
// (transfer/jpeg/jpeg_decode_transform.h, built only with nvJPEG): which
// decoder runs, and the priority of its stream. Apart from the transform so
// that builds without nvJPEG declare the same options.
//
// Example:
//   ImagePipelineOptions pipeline;
//   pipeline.gpu_priority = JpegDecodePriority::kLow;
#ifndef PINWHEEL_TRANSFER_JPEG_JPEG_DECODE_CHOICE_H_
#define PINWHEEL_TRANSFER_JPEG_JPEG_DECODE_CHOICE_H_

namespace pinwheel {

// Which of nvJPEG's decoders the transform runs (Note [backend] in
// transfer/jpeg/nvjpeg_decoder.h).
enum class JpegDecodeBackend {
  kAuto,       // the hardware engines when the GPU has them, else GPU hybrid
  kHardware,   // the GPU's JPEG engines (A100, H100, H200); no SMs
  kGpuHybrid,  // Huffman and IDCT on the GPU's SMs
  kDefault,    // Huffman on the calling (transfer) thread, IDCT on the SMs
};

// The CUDA priority of the transform's stream (Note [the decode's
// priority] in transfer/jpeg/jpeg_decode_transform.cc).
enum class JpegDecodePriority {
  kLow,   // the least the device has: a compute kernel's blocks go first
  kHigh,  // the greatest: the decode's blocks go first
};

}  // namespace pinwheel

#endif  // PINWHEEL_TRANSFER_JPEG_JPEG_DECODE_CHOICE_H_
