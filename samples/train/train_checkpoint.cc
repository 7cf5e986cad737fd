#include "samples/train/train_checkpoint.h"

#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <unistd.h>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"

#include "loader/loader_checkpoint.h"
#include "pinning/base/coding.h"
#include "pinning/base/crc32c.h"
#include "pinning/base/status_macros.h"

namespace pinwheel::train {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the checkpoint format is little-endian; add byte swaps here");

constexpr char kMagic[8] = {'P', 'W', 'T', 'R', 'C', 'K', 'P', 'T'};
constexpr size_t kHeaderBytes = 24;

// Words a read past the end of the body (the reader stops at the checksum).
absl::Status Truncated(const Shortfall& s) {
  return absl::DataLossError(
      absl::StrFormat("%s at byte %d needs %d bytes; the body ends at byte %d",
                      s.field, s.offset, s.needed, s.size));
}

// The Status of `call` on `path` that failed with `error`, worded
// "<call>(<path>): <errno's message>".
absl::Status ErrnoStatus(int error, const char* call, const std::string& path) {
  return absl::ErrnoToStatus(error, absl::StrFormat("%s(%s)", call, path));
}

}  // namespace

std::string TrainCheckpoint::ToBytes() const {
  std::string body;
  PutLittleEndian<int64_t>(body, shape.inputs);
  PutLittleEndian<int64_t>(body, shape.hidden);
  PutLittleEndian<int64_t>(body, shape.classes);
  PutLittleEndian<uint64_t>(body, seed);
  PutLittleEndian<int64_t>(body, batch_size);
  PutLittleEndian<int32_t>(body, world_size);
  PutLittleEndian<uint32_t>(body, 0);
  PutLittleEndian<float>(body, sgd.learning_rate);
  PutLittleEndian<float>(body, sgd.momentum);
  PutLittleEndian<int64_t>(body, epoch);
  PutLittleEndian<int64_t>(body, step);
  PutLittleEndian<int64_t>(body, batches_in_epoch);
  const std::string loader_bytes = loader.ToBytes();
  PutLittleEndian<uint32_t>(body, static_cast<uint32_t>(loader_bytes.size()));
  body += loader_bytes;
  PutLittleEndian<uint64_t>(body, model.parameters.size());
  body.append(reinterpret_cast<const char*>(model.parameters.data()),
              model.parameters.size() * sizeof(float));
  body.append(reinterpret_cast<const char*>(model.velocity.data()),
              model.velocity.size() * sizeof(float));

  std::string out(kMagic, sizeof kMagic);
  PutLittleEndian<uint32_t>(out, kVersion);
  PutLittleEndian<uint32_t>(out, 0);
  PutLittleEndian<uint64_t>(out, body.size());
  out += body;
  PutLittleEndian<uint32_t>(out, Crc32c(out));
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
  const uint32_t version = DecodeLittleEndian<uint32_t>(bytes.data() + 8);
  const uint64_t body_bytes = DecodeLittleEndian<uint64_t>(bytes.data() + 16);
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
  const uint32_t stored_crc =
      DecodeLittleEndian<uint32_t>(bytes.data() + crc_at);
  const uint32_t crc = Crc32c(bytes.substr(0, crc_at));
  if (crc != stored_crc) {
    return absl::DataLossError(absl::StrFormat(
        "corrupted: CRC-32C of bytes 0..%d is %08x; the file says %08x",
        crc_at - 1, crc, stored_crc));
  }
  TrainCheckpoint c;
  LittleEndianReader r(bytes.substr(0, crc_at), Truncated, kHeaderBytes);
  int32_t world_size = 0;
  uint32_t zero = 0, loader_bytes = 0;
  uint64_t count = 0;
  PINWHEEL_RETURN_IF_ERROR(r.Read("inputs", c.shape.inputs));
  PINWHEEL_RETURN_IF_ERROR(r.Read("hidden", c.shape.hidden));
  PINWHEEL_RETURN_IF_ERROR(r.Read("classes", c.shape.classes));
  PINWHEEL_RETURN_IF_ERROR(r.Read("seed", c.seed));
  PINWHEEL_RETURN_IF_ERROR(r.Read("batch_size", c.batch_size));
  PINWHEEL_RETURN_IF_ERROR(r.Read("world_size", world_size));
  PINWHEEL_RETURN_IF_ERROR(r.Read("padding", zero));
  PINWHEEL_RETURN_IF_ERROR(r.Read("learning_rate", c.sgd.learning_rate));
  PINWHEEL_RETURN_IF_ERROR(r.Read("momentum", c.sgd.momentum));
  PINWHEEL_RETURN_IF_ERROR(r.Read("epoch", c.epoch));
  PINWHEEL_RETURN_IF_ERROR(r.Read("step", c.step));
  PINWHEEL_RETURN_IF_ERROR(r.Read("batches_in_epoch", c.batches_in_epoch));
  PINWHEEL_RETURN_IF_ERROR(r.Read("loader bytes", loader_bytes));
  absl::string_view loader;
  PINWHEEL_RETURN_IF_ERROR(
      r.ReadBytes("loader checkpoint", loader_bytes, loader));
  absl::StatusOr<LoaderCheckpoint> parsed = LoaderCheckpoint::FromBytes(loader);
  if (!parsed.ok()) {
    return absl::Status(parsed.status().code(),
                        absl::StrCat("the loader checkpoint inside: ",
                                     parsed.status().message()));
  }
  c.loader = *std::move(parsed);
  PINWHEEL_RETURN_IF_ERROR(r.Read("parameter count", count));
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
        r.ReadBytes(v == &c.model.parameters ? "parameters" : "momentum",
                    count * sizeof(float), floats));
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
    return ErrnoStatus(errno, "open", path);
  }
  std::string bytes;
  char buffer[1 << 16];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int error = errno;
      ::close(fd);
      return ErrnoStatus(error, "read", path);
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

absl::StatusOr<TrainCheckpoint> ReadCheckpointToResume(const std::string& dir,
                                                       const MlpShape& shape,
                                                       uint64_t seed,
                                                       const SgdOptions& sgd) {
  PINWHEEL_ASSIGN_OR_RETURN(TrainCheckpoint c, ReadTrainCheckpoint(dir));
  const std::string path = absl::StrCat(dir, "/", kCheckpointFile);
  if (c.shape.inputs != shape.inputs || c.shape.hidden != shape.hidden ||
      c.shape.classes != shape.classes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--resume: %s holds an MLP %d -> %d -> %d; this run builds %d -> %d "
        "-> %d (same --data and --hidden as the run that wrote it)",
        path, c.shape.inputs, c.shape.hidden, c.shape.classes, shape.inputs,
        shape.hidden, shape.classes));
  }
  if (c.seed != seed || c.sgd.learning_rate != sgd.learning_rate ||
      c.sgd.momentum != sgd.momentum) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--resume: %s was written with --seed=%d --lr=%g (momentum %g); this "
        "run has --seed=%d --lr=%g (momentum %g); an exact resume needs the "
        "same",
        path, c.seed, c.sgd.learning_rate, c.sgd.momentum, seed,
        sgd.learning_rate, sgd.momentum));
  }
  if (c.loader.epoch != c.epoch - 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--resume: %s: trainer epoch %d but loader epoch %d (want %d)", path,
        c.epoch, c.loader.epoch, c.epoch - 1));
  }
  return c;
}

}  // namespace pinwheel::train
