// DecodeJpegRegion (loader/image/jpeg.h): a partial decode through the
// libjpeg API. Note [libjpeg errors]: libjpeg reports errors by calling
// error_exit, which must not return; the only way out is longjmp. So the
// decode runs in one function holding no object with a destructor between
// setjmp and the libjpeg calls, and every libjpeg warning ("Premature end
// of JPEG file", a corrupt entropy segment) is raised as an error too, as
// DecodeJpeg's TJFLAG_STOPONWARNING does.
#include <csetjmp>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <jpeglib.h>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

#include "loader/image/jpeg.h"

namespace pinwheel {
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

void OnMessage(j_common_ptr cinfo, int level) {
  if (level < 0) ExitWithMessage(cinfo);  // a warning: corrupt data
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

// One thread's libjpeg decompressor, made on first use and destroyed when
// the thread exits.
struct ThreadDecompressor {
  ThreadDecompressor() {
    cinfo.err = jpeg_std_error(&err.pub);
    err.pub.error_exit = ExitWithMessage;
    err.pub.emit_message = OnMessage;
    err.message[0] = '\0';
    // jpeg_create_decompress reports only out-of-memory through error_exit.
    if (setjmp(err.jump) == 0) {
      jpeg_create_decompress(&cinfo);
      created = true;
    }
    progress.progress_monitor = OnProgress;
    cinfo.progress = &progress;
  }
  ThreadDecompressor(const ThreadDecompressor&) = delete;
  ThreadDecompressor& operator=(const ThreadDecompressor&) = delete;
  ~ThreadDecompressor() {
    if (created) jpeg_destroy_decompress(&cinfo);
  }
  jpeg_decompress_struct cinfo{};
  ErrorManager err{};
  jpeg_progress_mgr progress{};
  bool created = false;
  std::vector<uint8_t> whole;  // the CMYK fallback's full decode
};

// The decode proper (see Note [libjpeg errors]): returns true, or false
// with the message in d.err.message. Writes rows of the crop to `out`
// (capacity `out_bytes`) and the box decoded to *decoded.
bool DecodeRows(ThreadDecompressor& d, const unsigned char* data, size_t size,
                JpegScale scale, const PixelBox& box, unsigned char* out,
                size_t out_bytes, PixelBox* decoded) {
  j_decompress_ptr cinfo = &d.cinfo;
  if (setjmp(d.err.jump) != 0) {
    jpeg_abort_decompress(cinfo);
    return false;
  }
  jpeg_mem_src(cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(cinfo, TRUE);
  cinfo->scale_num = static_cast<unsigned>(scale.num);
  cinfo->scale_denom = static_cast<unsigned>(scale.denom);
  cinfo->out_color_space = JCS_EXT_RGB;
  cinfo->dct_method = JDCT_ISLOW;
  jpeg_start_decompress(cinfo);
  if (static_cast<int64_t>(box.x) + box.width >
          static_cast<int64_t>(cinfo->output_width) ||
      static_cast<int64_t>(box.y) + box.height >
          static_cast<int64_t>(cinfo->output_height)) {
    std::snprintf(d.err.message, sizeof(d.err.message),
                  "the box %dx%d at (%d, %d) is not inside the %ux%u decode",
                  box.width, box.height, box.x, box.y, cinfo->output_width,
                  cinfo->output_height);
    jpeg_abort_decompress(cinfo);
    return false;
  }
  JDIMENSION x = static_cast<JDIMENSION>(box.x);
  JDIMENSION width = static_cast<JDIMENSION>(box.width);
  if (width != cinfo->output_width) jpeg_crop_scanline(cinfo, &x, &width);
  const size_t row_bytes = static_cast<size_t>(width) * 3;
  if (row_bytes * static_cast<size_t>(box.height) > out_bytes) {
    std::snprintf(d.err.message, sizeof(d.err.message),
                  "the widened box needs %zu bytes, the buffer holds %zu",
                  row_bytes * static_cast<size_t>(box.height), out_bytes);
    jpeg_abort_decompress(cinfo);
    return false;
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
  return true;
}

ThreadDecompressor& ThisThreadDecompressor() {
  thread_local ThreadDecompressor d;
  return d;
}

}  // namespace

int64_t JpegRegionBytes(const PixelBox& box) {
  return (int64_t{box.width} + 64) * box.height * 3;
}

absl::StatusOr<PixelBox> DecodeJpegRegion(absl::Span<const std::byte> bytes,
                                          absl::string_view name,
                                          JpegScale scale, const PixelBox& box,
                                          absl::Span<uint8_t> out,
                                          const JpegLimits& limits) {
  absl::StatusOr<JpegInfo> info = ReadJpegInfo(bytes, name, limits);
  if (!info.ok()) return info.status();
  const int width = ScaledJpegSize(info->width, scale);
  const int height = ScaledJpegSize(info->height, scale);
  if (box.x < 0 || box.y < 0 || box.width < 1 || box.height < 1 ||
      int64_t{box.x} + box.width > width ||
      int64_t{box.y} + box.height > height) {
    return absl::InvalidArgumentError(absl::StrCat(
        "JPEG ", name, ": the box ", box.width, "x", box.height, " at (", box.x,
        ", ", box.y, ") is not inside the ", width, "x", height,
        " decode at scale ", scale.num, "/", scale.denom));
  }
  if (static_cast<int64_t>(out.size()) < JpegRegionBytes(box)) {
    return absl::InvalidArgumentError(
        absl::StrCat("JPEG ", name, ": the output buffer holds ", out.size(),
                     " bytes; the box needs up to ", JpegRegionBytes(box)));
  }
  ThreadDecompressor& d = ThisThreadDecompressor();
  if (info->colorspace == JpegColorspace::kCmyk ||
      info->colorspace == JpegColorspace::kYcck || !d.created) {
    // libjpeg does not convert CMYK to RGB: decode whole, copy the box.
    d.whole.resize(static_cast<size_t>(DecodedJpegBytes(*info, scale)));
    if (absl::Status s =
            DecodeJpeg(bytes, name, scale, absl::MakeSpan(d.whole), limits);
        !s.ok()) {
      return s;
    }
    const size_t row = static_cast<size_t>(box.width) * 3;
    for (int r = 0; r < box.height; ++r) {
      std::memcpy(
          out.data() + r * row,
          d.whole.data() + (static_cast<size_t>(box.y + r) * width + box.x) * 3,
          row);
    }
    return box;
  }
  PixelBox decoded;
  if (!DecodeRows(d, reinterpret_cast<const unsigned char*>(bytes.data()),
                  bytes.size(), scale, box, out.data(), out.size(), &decoded)) {
    return absl::DataLossError(
        absl::StrCat("JPEG ", name, " (", info->width, "x", info->height, " ",
                     JpegColorspaceName(info->colorspace), ", ", bytes.size(),
                     " bytes): corrupt or truncated: ", d.err.message));
  }
  return decoded;
}

}  // namespace pinwheel
