// Note [one decoder]: every JPEG path (the header, a whole decode, a region
// decode) goes through libjpeg's API with one error manager, so one rule
// decides what a valid file is, whatever the entry point or the crop:
//  - libjpeg reports an error through error_exit, which must not return;
//    the only way out is longjmp, so each libjpeg call sequence runs in a
//    function holding no object with a destructor between setjmp and the
//    calls.
//  - After any failure the thread's decompressor is destroyed and made
//    anew: nothing a corrupt file left behind (a marker reader stopped in
//    the middle of a header) reaches the next file. TurboJPEG 2.1, used
//    before, returned from a failed tjDecompressHeader3 without aborting
//    its decompressor, and every later header on that thread failed (issue
//    35: one corrupt JPEG broke every image after it on its worker).
//  - libjpeg's warnings about the data (a premature end, a bad Huffman
//    code, extraneous bytes) fail the decode, so a half-grey image never
//    passes; its warnings about metadata do not (an unknown JFIF revision
//    such as 2.01, an unknown Adobe transform code, a bad ICC marker): PIL
//    and torchvision decode those files, and so does pinwheel.
//  - A file is truncated when no end-of-image marker (ff d9) follows the
//    start of its scan data: entropy-coded bytes never hold ff d9 (an ff
//    there is stuffed as ff 00), so the check is exact, and it is made
//    before any decode. A region decode stops at the bottom of its crop
//    and never reaches the cut; without this check a truncated file was
//    accepted or refused depending on the random crop. ReadJpegInfo reads
//    the header alone and does not check: the GPU path (ImageDelivery::
//    kJpeg) reads headers on the CPU and leaves the scan to the GPU
//    decoder, whose framing check refuses the same files
//    (transfer/jpeg/).
#include "loader/image/internal/jpeg_decompressor.h"

#include <csetjmp>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
// clang-format off
#include <jpeglib.h>
#include <jerror.h>
// clang-format on

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace pinwheel::internal {
namespace {

// At most this many scans of a progressive JPEG (TurboJPEG's
// TJFLAG_LIMITSCANS limit): a hostile one with thousands takes seconds.
constexpr int kMaxScans = 500;

struct ErrorManager {
  jpeg_error_mgr pub;  // first: libjpeg sees a jpeg_error_mgr*
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

[[noreturn]] void ExitWithMessage(j_common_ptr cinfo) {
  auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, err->message);
  std::longjmp(err->jump, 1);
}

// The warnings about metadata, which leave the pixels intact (see
// Note [one decoder]).
bool IsMetadataWarning(int code) {
  return code == JWRN_JFIF_MAJOR || code == JWRN_ADOBE_XFORM ||
         code == JWRN_BOGUS_ICC;
}

void OnMessage(j_common_ptr cinfo, int level) {
  // level < 0: a warning; >= 0: trace messages, ignored.
  if (level < 0 && !IsMetadataWarning(cinfo->err->msg_code)) {
    ExitWithMessage(cinfo);
  }
}

void OnProgress(j_common_ptr cinfo) {
  auto* d = reinterpret_cast<j_decompress_ptr>(cinfo);
  if (d->input_scan_number > kMaxScans) {
    auto* err = reinterpret_cast<ErrorManager*>(cinfo->err);
    std::snprintf(err->message, sizeof(err->message),
                  "a progressive JPEG with more than %d scans", kMaxScans);
    std::longjmp(err->jump, 1);
  }
}

// One thread's libjpeg decompressor, made on first use, made anew after a
// failure, destroyed when the thread exits.
class ThreadDecompressor {
 public:
  ThreadDecompressor() { Create(); }
  ThreadDecompressor(const ThreadDecompressor&) = delete;
  ThreadDecompressor& operator=(const ThreadDecompressor&) = delete;
  ~ThreadDecompressor() { Destroy(); }

  // Returns the decompressor, or null when libjpeg could not make one (out
  // of memory).
  j_decompress_ptr get() {
    if (!created_) Create();
    return created_ ? &cinfo_ : nullptr;
  }
  ErrorManager& err() { return err_; }

  // Throws the state away after a failure (see Note [one decoder]).
  void Renew() {
    Destroy();
    Create();
  }

 private:
  void Create() {
    cinfo_ = {};
    cinfo_.err = jpeg_std_error(&err_.pub);
    err_.pub.error_exit = ExitWithMessage;
    err_.pub.emit_message = OnMessage;
    err_.message[0] = '\0';
    // jpeg_create_decompress reports only out-of-memory through error_exit.
    if (setjmp(err_.jump) == 0) {
      jpeg_create_decompress(&cinfo_);
      created_ = true;
    }
    progress_.progress_monitor = OnProgress;
    cinfo_.progress = &progress_;
  }
  void Destroy() {
    if (created_) jpeg_destroy_decompress(&cinfo_);
    created_ = false;
  }

  jpeg_decompress_struct cinfo_{};
  ErrorManager err_{};
  jpeg_progress_mgr progress_{};
  bool created_ = false;
};

ThreadDecompressor& ThisThreadDecompressor() {
  thread_local ThreadDecompressor d;
  return d;
}

absl::Status OutOfMemory(absl::string_view name) {
  return absl::ResourceExhaustedError(
      absl::StrCat("JPEG ", name,
                   ": libjpeg could not make a decompressor (out of memory)"));
}

// What the header holds, as read inside the setjmp scope.
struct RawHeader {
  int width = 0;
  int height = 0;
  J_COLOR_SPACE colorspace = JCS_UNKNOWN;
  int components = 0;
  int h[4] = {};  // sampling factors of the first four components
  int v[4] = {};
  size_t scan_start = 0;  // the byte after the first SOS header
};

// Reads the header (see Note [one decoder]): true, or false with the
// message in the error manager.
bool ReadRawHeader(j_decompress_ptr cinfo, ErrorManager& err,
                   const unsigned char* data, size_t size, RawHeader* out) {
  if (setjmp(err.jump) != 0) return false;
  jpeg_mem_src(cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(cinfo, TRUE);
  out->width = static_cast<int>(cinfo->image_width);
  out->height = static_cast<int>(cinfo->image_height);
  out->colorspace = cinfo->jpeg_color_space;
  out->components = cinfo->num_components;
  for (int c = 0; c < cinfo->num_components && c < 4; ++c) {
    out->h[c] = cinfo->comp_info[c].h_samp_factor;
    out->v[c] = cinfo->comp_info[c].v_samp_factor;
  }
  out->scan_start = size - cinfo->src->bytes_in_buffer;
  jpeg_abort_decompress(cinfo);
  return true;
}

JpegColorspace ToColorspace(J_COLOR_SPACE colorspace) {
  switch (colorspace) {
    case JCS_RGB:
      return JpegColorspace::kRgb;
    case JCS_GRAYSCALE:
      return JpegColorspace::kGray;
    case JCS_CMYK:
      return JpegColorspace::kCmyk;
    case JCS_YCCK:
      return JpegColorspace::kYcck;
    default:
      return JpegColorspace::kYCbCr;
  }
}

// The chroma subsampling as TurboJPEG names it: the first component's
// sampling factors, the others 1x1 (a fourth CMYK/YCCK one as the first).
JpegSubsampling ToSubsampling(const RawHeader& header) {
  if (header.components == 1) return JpegSubsampling::kGray;
  if (header.components != 3 && header.components != 4) {
    return JpegSubsampling::kUnknown;
  }
  for (int c = 1; c < 3; ++c) {
    if (header.h[c] != 1 || header.v[c] != 1) return JpegSubsampling::kUnknown;
  }
  if (header.components == 4 &&
      (header.h[3] != header.h[0] || header.v[3] != header.v[0])) {
    return JpegSubsampling::kUnknown;
  }
  const int h = header.h[0];
  const int v = header.v[0];
  if (h == 1 && v == 1) return JpegSubsampling::k444;
  if (h == 2 && v == 1) return JpegSubsampling::k422;
  if (h == 2 && v == 2) return JpegSubsampling::k420;
  if (h == 1 && v == 2) return JpegSubsampling::k440;
  if (h == 4 && v == 1) return JpegSubsampling::k411;
  return JpegSubsampling::kUnknown;
}

// Whether an end-of-image marker follows byte `from` (see Note [one
// decoder]); searched from the end, where it normally is.
bool HasEndOfImageAfter(absl::Span<const std::byte> bytes, size_t from) {
  for (size_t i = bytes.size(); i > from + 1; --i) {
    if (bytes[i - 2] == std::byte{0xff} && bytes[i - 1] == std::byte{0xd9}) {
      return true;
    }
  }
  return false;
}

// How DecodeRows ended.
enum class Decoded { kOk, kCorrupt, kBadRequest };

// The decode proper (see Note [one decoder]): kOk, or the failure with its
// message in the error manager. Writes rows of the (widened) box to `out`
// (capacity `out_bytes`) and the box decoded to *decoded.
Decoded DecodeRows(j_decompress_ptr cinfo, ErrorManager& err,
                   const unsigned char* data, size_t size, JpegScale scale,
                   const PixelBox& box, JpegPixels pixels, unsigned char* out,
                   size_t out_bytes, PixelBox* decoded) {
  if (setjmp(err.jump) != 0) return Decoded::kCorrupt;
  jpeg_mem_src(cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(cinfo, TRUE);
  cinfo->scale_num = static_cast<unsigned>(scale.num);
  cinfo->scale_denom = static_cast<unsigned>(scale.denom);
  cinfo->out_color_space = pixels == JpegPixels::kCmyk ? JCS_CMYK : JCS_EXT_RGB;
  cinfo->dct_method = JDCT_ISLOW;
  jpeg_start_decompress(cinfo);
  if (static_cast<int64_t>(box.x) + box.width >
          static_cast<int64_t>(cinfo->output_width) ||
      static_cast<int64_t>(box.y) + box.height >
          static_cast<int64_t>(cinfo->output_height)) {
    std::snprintf(err.message, sizeof(err.message),
                  "the box %dx%d at (%d, %d) is not inside the %ux%u decode",
                  box.width, box.height, box.x, box.y, cinfo->output_width,
                  cinfo->output_height);
    return Decoded::kBadRequest;
  }
  JDIMENSION x = static_cast<JDIMENSION>(box.x);
  JDIMENSION width = static_cast<JDIMENSION>(box.width);
  if (width != cinfo->output_width) jpeg_crop_scanline(cinfo, &x, &width);
  const size_t row_bytes = static_cast<size_t>(width) *
                           static_cast<size_t>(cinfo->output_components);
  if (row_bytes * static_cast<size_t>(box.height) > out_bytes) {
    std::snprintf(err.message, sizeof(err.message),
                  "the widened box needs %zu bytes, the buffer holds %zu",
                  row_bytes * static_cast<size_t>(box.height), out_bytes);
    return Decoded::kBadRequest;
  }
  if (box.y > 0) jpeg_skip_scanlines(cinfo, static_cast<JDIMENSION>(box.y));
  for (int r = 0; r < box.height;) {
    JSAMPROW row = out + static_cast<size_t>(r) * row_bytes;
    r += static_cast<int>(jpeg_read_scanlines(cinfo, &row, 1));
  }
  jpeg_abort_decompress(cinfo);  // the rows below are not needed
  *decoded = PixelBox{.x = static_cast<int>(x),
                      .y = box.y,
                      .width = static_cast<int>(width),
                      .height = box.height};
  return Decoded::kOk;
}

}  // namespace

absl::StatusOr<JpegInfo> ReadJpegHeader(absl::Span<const std::byte> bytes,
                                        absl::string_view name,
                                        const JpegLimits& limits,
                                        bool check_end) {
  ThreadDecompressor& d = ThisThreadDecompressor();
  j_decompress_ptr cinfo = d.get();
  if (cinfo == nullptr) return OutOfMemory(name);
  RawHeader header;
  if (!ReadRawHeader(cinfo, d.err(),
                     reinterpret_cast<const unsigned char*>(bytes.data()),
                     bytes.size(), &header)) {
    absl::Status error = absl::DataLossError(
        absl::StrCat("JPEG ", name, ": corrupt or truncated header (",
                     bytes.size(), " bytes): ", d.err().message));
    d.Renew();
    return error;
  }
  const int width = header.width;
  const int height = header.height;
  if (width <= 0 || height <= 0) {
    return absl::DataLossError(absl::StrCat("JPEG ", name, ": the header says ",
                                            width, "x", height, " pixels"));
  }
  if (width > limits.max_dimension || height > limits.max_dimension) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "JPEG ", name, ": ", width, "x", height,
        " pixels is over the limit of ", limits.max_dimension,
        " pixels a side (JpegLimits::max_dimension); refused before decoding"));
  }
  const int64_t decoded = int64_t{width} * height * 3;
  if (decoded > limits.max_decoded_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "JPEG ", name, ": ", width, "x", height, " pixels decode to ", decoded,
        " bytes, over the limit of ", limits.max_decoded_bytes,
        " (JpegLimits::max_decoded_bytes); refused before decoding"));
  }
  if (check_end && !HasEndOfImageAfter(bytes, header.scan_start)) {
    return absl::DataLossError(absl::StrCat(
        "JPEG ", name, " (", width, "x", height, ", ", bytes.size(),
        " bytes): truncated: no end-of-image marker (ff d9) after the scan "
        "data that starts at byte ",
        header.scan_start));
  }
  return JpegInfo{.width = width,
                  .height = height,
                  .colorspace = ToColorspace(header.colorspace),
                  .subsampling = ToSubsampling(header)};
}

absl::Status CheckJpegBox(absl::string_view name, const JpegInfo& info,
                          JpegScale scale, const PixelBox& box) {
  const int width = ScaledJpegSize(info.width, scale);
  const int height = ScaledJpegSize(info.height, scale);
  if (box.x < 0 || box.y < 0 || box.width < 1 || box.height < 1 ||
      int64_t{box.x} + box.width > width ||
      int64_t{box.y} + box.height > height) {
    return absl::InvalidArgumentError(absl::StrCat(
        "JPEG ", name, ": the box ", box.width, "x", box.height, " at (", box.x,
        ", ", box.y, ") is not inside the ", width, "x", height,
        " decode at scale ", scale.num, "/", scale.denom));
  }
  return absl::OkStatus();
}

absl::StatusOr<PixelBox> DecodeJpegRows(absl::Span<const std::byte> bytes,
                                        absl::string_view name,
                                        const JpegInfo& info, JpegScale scale,
                                        const PixelBox& box, JpegPixels pixels,
                                        absl::Span<uint8_t> out) {
  if (absl::Status s = CheckJpegBox(name, info, scale, box); !s.ok()) {
    return s;
  }
  ThreadDecompressor& d = ThisThreadDecompressor();
  j_decompress_ptr cinfo = d.get();
  if (cinfo == nullptr) return OutOfMemory(name);
  PixelBox decoded;
  const Decoded result = DecodeRows(
      cinfo, d.err(), reinterpret_cast<const unsigned char*>(bytes.data()),
      bytes.size(), scale, box, pixels, out.data(), out.size(), &decoded);
  if (result == Decoded::kOk) return decoded;
  const std::string what = absl::StrCat(
      "JPEG ", name, " (", info.width, "x", info.height, " ",
      JpegColorspaceName(info.colorspace), ", ", bytes.size(), " bytes): ");
  absl::Status error =
      result == Decoded::kBadRequest
          ? absl::InvalidArgumentError(absl::StrCat(what, d.err().message))
          : absl::DataLossError(
                absl::StrCat(what, "corrupt or truncated: ", d.err().message));
  d.Renew();
  return error;
}

}  // namespace pinwheel::internal
