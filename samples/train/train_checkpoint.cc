#include "samples/train/train_checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "loader/loader_checkpoint.h"
#include "pinning/base/status_macros.h"

namespace pinwheel::train {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the checkpoint format is little-endian; add byte swaps here");

constexpr char kMagic[8] = {'P', 'W', 'T', 'R', 'C', 'K', 'P', 'T'};
constexpr size_t kHeaderBytes = 24;

template <typename T>
void Put(std::string& out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  out.append(bytes, sizeof(T));
}

// Reads fields in order from the body; every read is bounds-checked.
class Reader {
 public:
  Reader(absl::string_view bytes, size_t offset)
      : bytes_(bytes), offset_(offset) {}

  template <typename T>
  absl::Status Get(T& value, const char* field) {
    if (bytes_.size() - offset_ < sizeof(T)) return Short(field, sizeof(T));
    std::memcpy(&value, bytes_.data() + offset_, sizeof(T));
    offset_ += sizeof(T);
    return absl::OkStatus();
  }
  absl::Status GetBytes(size_t n, absl::string_view& out, const char* field) {
    if (bytes_.size() - offset_ < n) return Short(field, n);
    out = bytes_.substr(offset_, n);
    offset_ += n;
    return absl::OkStatus();
  }
  size_t offset() const { return offset_; }

 private:
  absl::Status Short(const char* field, size_t n) const {
    return absl::DataLossError(absl::StrFormat(
        "%s at byte %d needs %d bytes; the body ends at byte %d", field,
        offset_, n, bytes_.size()));
  }
  absl::string_view bytes_;
  size_t offset_;
};

std::string Errno(const char* call, const std::string& path) {
  return absl::StrFormat("%s(%s): %s", call, path, std::strerror(errno));
}

}  // namespace

std::string TrainCheckpoint::ToBytes() const {
  std::string body;
  Put<int64_t>(body, shape.inputs);
  Put<int64_t>(body, shape.hidden);
  Put<int64_t>(body, shape.classes);
  Put<uint64_t>(body, seed);
  Put<int64_t>(body, batch_size);
  Put<int32_t>(body, world_size);
  Put<uint32_t>(body, 0);
  Put<float>(body, sgd.learning_rate);
  Put<float>(body, sgd.momentum);
  Put<int64_t>(body, epoch);
  Put<int64_t>(body, step);
  Put<int64_t>(body, batches_in_epoch);
  const std::string loader_bytes = loader.ToBytes();
  Put<uint32_t>(body, static_cast<uint32_t>(loader_bytes.size()));
  body += loader_bytes;
  Put<uint64_t>(body, model.parameters.size());
  body.append(reinterpret_cast<const char*>(model.parameters.data()),
              model.parameters.size() * sizeof(float));
  body.append(reinterpret_cast<const char*>(model.velocity.data()),
              model.velocity.size() * sizeof(float));

  std::string out(kMagic, sizeof kMagic);
  Put<uint32_t>(out, kVersion);
  Put<uint32_t>(out, 0);
  Put<uint64_t>(out, body.size());
  out += body;
  Put<uint32_t>(out, Crc32c(out));
  return out;
}

absl::StatusOr<TrainCheckpoint> TrainCheckpoint::FromBytes(
    absl::string_view bytes) {
  if (bytes.size() < sizeof kMagic ||
      std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0) {
    return absl::InvalidArgumentError(
        "not a trainer checkpoint (the first 8 bytes are not \"PWTRCKPT\")");
  }
  if (bytes.size() < kHeaderBytes + 4) {
    return absl::DataLossError(absl::StrFormat(
        "truncated: %d bytes, shorter than the %d-byte header and checksum",
        bytes.size(), kHeaderBytes + 4));
  }
  uint32_t version;
  uint64_t body_bytes;
  std::memcpy(&version, bytes.data() + 8, sizeof version);
  std::memcpy(&body_bytes, bytes.data() + 16, sizeof body_bytes);
  if (version != kVersion) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "version %d; this trainer reads version %d", version, kVersion));
  }
  if (body_bytes != bytes.size() - kHeaderBytes - 4) {
    return absl::DataLossError(absl::StrFormat(
        "truncated or padded: the header announces a %d-byte body, so %d "
        "bytes in all; the file has %d",
        body_bytes, kHeaderBytes + body_bytes + 4, bytes.size()));
  }
  const size_t crc_at = kHeaderBytes + body_bytes;
  uint32_t stored_crc;
  std::memcpy(&stored_crc, bytes.data() + crc_at, sizeof stored_crc);
  const uint32_t crc = Crc32c(bytes.substr(0, crc_at));
  if (crc != stored_crc) {
    return absl::DataLossError(absl::StrFormat(
        "corrupted: CRC-32C of bytes 0..%d is %08x; the file says %08x",
        crc_at - 1, crc, stored_crc));
  }
  TrainCheckpoint c;
  Reader r(bytes.substr(0, crc_at), kHeaderBytes);
  int32_t world_size;
  uint32_t zero, loader_bytes;
  uint64_t count;
  PINWHEEL_RETURN_IF_ERROR(r.Get(c.shape.inputs, "inputs"));
  PINWHEEL_RETURN_IF_ERROR(r.Get(c.shape.hidden, "hidden"));
  PINWHEEL_RETURN_IF_ERROR(r.Get(c.shape.classes, "classes"));
  PINWHEEL_RETURN_IF_ERROR(r.Get(c.seed, "seed"));
  PINWHEEL_RETURN_IF_ERROR(r.Get(c.batch_size, "batch_size"));
  PINWHEEL_RETURN_IF_ERROR(r.Get(world_size, "world_size"));
  PINWHEEL_RETURN_IF_ERROR(r.Get(zero, "padding"));
  PINWHEEL_RETURN_IF_ERROR(r.Get(c.sgd.learning_rate, "learning_rate"));
  PINWHEEL_RETURN_IF_ERROR(r.Get(c.sgd.momentum, "momentum"));
  PINWHEEL_RETURN_IF_ERROR(r.Get(c.epoch, "epoch"));
  PINWHEEL_RETURN_IF_ERROR(r.Get(c.step, "step"));
  PINWHEEL_RETURN_IF_ERROR(r.Get(c.batches_in_epoch, "batches_in_epoch"));
  PINWHEEL_RETURN_IF_ERROR(r.Get(loader_bytes, "loader bytes"));
  absl::string_view loader;
  PINWHEEL_RETURN_IF_ERROR(
      r.GetBytes(loader_bytes, loader, "loader checkpoint"));
  absl::StatusOr<LoaderCheckpoint> parsed = LoaderCheckpoint::FromBytes(loader);
  if (!parsed.ok()) {
    return absl::Status(parsed.status().code(),
                        absl::StrCat("the loader checkpoint inside: ",
                                     parsed.status().message()));
  }
  c.loader = *std::move(parsed);
  PINWHEEL_RETURN_IF_ERROR(r.Get(count, "parameter count"));
  c.world_size = world_size;
  if (c.shape.inputs < 1 || c.shape.hidden < 1 || c.shape.classes < 2 ||
      c.batch_size < 1 || c.world_size < 1 || c.epoch < 1 || c.step < 0 ||
      c.batches_in_epoch < 0 || count != ParameterLayout(c.shape).total) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "a field is out of range: MLP %d -> %d -> %d with %d parameters, "
        "batch %d, world size %d, epoch %d, step %d, %d batches in the epoch",
        c.shape.inputs, c.shape.hidden, c.shape.classes, count, c.batch_size,
        c.world_size, c.epoch, c.step, c.batches_in_epoch));
  }
  for (std::vector<float>* v : {&c.model.parameters, &c.model.velocity}) {
    absl::string_view floats;
    PINWHEEL_RETURN_IF_ERROR(
        r.GetBytes(count * sizeof(float), floats,
                   v == &c.model.parameters ? "parameters" : "momentum"));
    v->resize(count);
    std::memcpy(v->data(), floats.data(), floats.size());
  }
  if (r.offset() != crc_at) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%d bytes after the momentum, before the checksum",
                        crc_at - r.offset()));
  }
  return c;
}

absl::StatusOr<TrainCheckpoint> ReadTrainCheckpoint(const std::string& dir) {
  const std::string path = absl::StrCat(dir, "/", kCheckpointFile);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) {
      return absl::NotFoundError(absl::StrFormat(
          "--resume: no checkpoint to resume from: %s does not exist (a run "
          "with --checkpoint_dir=%s writes one)",
          path, dir));
    }
    return absl::InternalError(Errno("open", path));
  }
  std::string bytes;
  char buffer[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string error = Errno("read", path);
      ::close(fd);
      return absl::InternalError(error);
    }
    if (n == 0) break;
    bytes.append(buffer, static_cast<size_t>(n));
  }
  ::close(fd);
  absl::StatusOr<TrainCheckpoint> c = TrainCheckpoint::FromBytes(bytes);
  if (!c.ok()) {
    return absl::Status(c.status().code(),
                        absl::StrFormat("--resume: %s (%d bytes): %s", path,
                                        bytes.size(), c.status().message()));
  }
  return c;
}

}  // namespace pinwheel::train
