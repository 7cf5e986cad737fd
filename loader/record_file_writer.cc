// RecordFileWriter: writes a record file beside its path and publishes it
// whole (see Note [replace, never truncate]).
#include <cerrno>
#include <cstdio>
#include <fcntl.h>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

#include "loader/atomic_file.h"
#include "loader/internal/mapped_file.h"
#include "loader/internal/record_format.h"
#include "loader/record_file.h"
#include "pinning/base/coding.h"
#include "pinning/base/status_macros.h"

namespace pinwheel {
namespace {

using internal::record_format::kCountOffset;
using internal::record_format::kMaxFields;
using internal::record_format::kMaxNameBytes;
using internal::record_format::kMaxRank;

// Returns the error of a failed fwrite of record `record` (reads errno).
absl::Status WriteError(const std::string& path, uint64_t record) {
  const int error = errno;
  return absl::ErrnoToStatus(
      error, absl::StrCat("cannot write record ", record, " to ", path));
}

// OK when `path` is absent (or a dangling symbolic link) or, following
// symbolic links as the readers do, a regular file: what rename() may
// replace. Otherwise InvalidArgument naming `path` and its type (a FIFO, a
// device node, a directory, ...): a record file never replaces one.
absl::Status CheckReplaceable(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int error = errno;
    if (error == ENOENT) return absl::OkStatus();
    return absl::ErrnoToStatus(error, absl::StrCat("cannot stat ", path));
  }
  if (S_ISREG(st.st_mode)) return absl::OkStatus();
  struct stat link {};
  const bool is_link =
      ::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode);
  return absl::InvalidArgumentError(absl::StrCat(
      path, ": is ", is_link ? "a symbolic link to " : "",
      internal::FileTypeName(st.st_mode),
      ", not a regular file; a record file writer replaces only a regular "
      "file"));
}

}  // namespace

absl::StatusOr<RecordFileWriter> RecordFileWriter::Create(
    const std::string& path, SampleLayout layout) {
  if (layout.num_fields() == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": the layout has no fields"));
  }
  if (layout.num_fields() > static_cast<int>(kMaxFields)) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": the layout has ", layout.num_fields(),
        " fields, more than a record file holds (", kMaxFields, ")"));
  }
  for (const FieldSpec& field : layout.fields()) {
    if (field.variable_length) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": field '", field.name,
          "' is variable-length; record files hold fixed-size records"));
    }
    if (field.name.size() > kMaxNameBytes || field.shape.size() > kMaxRank) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ": field '", field.name, "' has a name longer than ",
          kMaxNameBytes, " bytes or a rank above ", kMaxRank));
    }
  }
  PINWHEEL_RETURN_IF_ERROR(CheckReplaceable(path));
  // Note [replace, never truncate]: the records go to a new file beside
  // `path`, renamed over it by Close(). A reader that maps the old file
  // keeps reading the old bytes (the rename leaves its inode alone);
  // truncating the mapped file in place would make its reads raise SIGBUS
  // (see Note [mapping hazard] in loader/internal/mapped_file.h).
  // 0666 less the umask, as fopen(path, "wb") would create it.
  PINWHEEL_ASSIGN_OR_RETURN(internal::TemporaryFile tmp,
                            internal::CreateTemporaryFileBeside(path, 0666));
  const int fd = tmp.fd;
  std::string tmp_path = std::move(tmp.path);
  std::FILE* file = ::fdopen(fd, "wb");
  if (file == nullptr) {
    const int error = errno;
    ::close(fd);
    ::unlink(tmp_path.c_str());
    return absl::ErrnoToStatus(error, absl::StrCat("cannot create ", path));
  }
  RecordFileWriter writer(path, std::move(tmp_path), std::move(layout), file);
  // Full buffering in large blocks: records are appended sequentially.
  writer.buffer_ = std::make_unique<char[]>(kWriteBufferBytes);
  std::setvbuf(file, writer.buffer_.get(), _IOFBF, kWriteBufferBytes);
  // The header with count 0: a file whose writer never closed is rejected.
  const std::vector<std::byte> header =
      SerializeRecordFileHeader(writer.layout_, 0);
  if (std::fwrite(header.data(), 1, header.size(), file) != header.size()) {
    const int error = errno;
    writer.Abandon();
    return absl::ErrnoToStatus(
        error, absl::StrCat("cannot write the header of ", path));
  }
  return writer;
}

RecordFileWriter::RecordFileWriter(std::string path, std::string tmp_path,
                                   SampleLayout layout, std::FILE* file)
    : path_(std::move(path)),
      tmp_path_(std::move(tmp_path)),
      layout_(std::move(layout)),
      file_(file) {}

RecordFileWriter::RecordFileWriter(RecordFileWriter&& other) noexcept
    : path_(std::move(other.path_)),
      tmp_path_(std::move(other.tmp_path_)),
      layout_(std::move(other.layout_)),
      file_(std::exchange(other.file_, nullptr)),
      count_(std::exchange(other.count_, 0)),
      buffer_(std::move(other.buffer_)) {}

RecordFileWriter& RecordFileWriter::operator=(
    RecordFileWriter&& other) noexcept {
  if (this != &other) {
    Abandon();  // only an explicit Close() publishes
    path_ = std::move(other.path_);
    tmp_path_ = std::move(other.tmp_path_);
    layout_ = std::move(other.layout_);
    file_ = std::exchange(other.file_, nullptr);
    count_ = std::exchange(other.count_, 0);
    buffer_ = std::move(other.buffer_);
  }
  return *this;
}

RecordFileWriter::~RecordFileWriter() { Abandon(); }

absl::Status RecordFileWriter::Append(
    const std::vector<absl::Span<const std::byte>>& fields) {
  if (file_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(path_, ": Append() on a closed record file writer"));
  }
  if (fields.size() != layout_.fields().size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path_, ": Append() got ", fields.size(), " fields, the layout has ",
        layout_.num_fields(), " (", layout_.ToString(), ")"));
  }
  for (size_t f = 0; f < fields.size(); ++f) {
    const FieldSpec& spec = layout_.fields()[f];
    if (fields[f].size() != spec.bytes()) {
      return absl::InvalidArgumentError(absl::StrCat(
          path_, ": field ", f, " ('", spec.name, "') of record ", count_,
          " has ", fields[f].size(), " bytes, the layout wants ", spec.bytes(),
          " (", spec.ToString(), ")"));
    }
  }
  for (size_t f = 0; f < fields.size(); ++f) {
    if (std::fwrite(fields[f].data(), 1, fields[f].size(), file_) !=
        fields[f].size()) {
      return WriteError(path_, count_);
    }
  }
  ++count_;
  return absl::OkStatus();
}

absl::Status RecordFileWriter::AppendRaw(absl::Span<const std::byte> record) {
  if (file_ == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(path_, ": AppendRaw() on a closed record file writer"));
  }
  if (record.size() != layout_.sample_bytes()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path_, ": record ", count_, " has ", record.size(),
                     " bytes, the layout wants ", layout_.sample_bytes(), " (",
                     layout_.ToString(), ")"));
  }
  if (std::fwrite(record.data(), 1, record.size(), file_) != record.size()) {
    return WriteError(path_, count_);
  }
  ++count_;
  return absl::OkStatus();
}

void RecordFileWriter::Abandon() {
  if (file_ == nullptr) return;
  std::fclose(std::exchange(file_, nullptr));
  ::unlink(tmp_path_.c_str());
  buffer_.reset();
}

absl::Status RecordFileWriter::Close() {
  if (file_ == nullptr) return absl::OkStatus();
  std::FILE* file = std::exchange(file_, nullptr);
  absl::Status status;
  // Only the count changes: rewrite its 8 bytes in place.
  std::vector<std::byte> count;
  PutLittleEndian<uint64_t>(count, count_);
  if (std::fflush(file) != 0) {
    const int error = errno;
    status = absl::ErrnoToStatus(
        error, absl::StrCat("cannot write the records of ", path_));
  } else if (std::fseek(file, static_cast<long>(kCountOffset), SEEK_SET) != 0 ||
             std::fwrite(count.data(), 1, count.size(), file) != count.size() ||
             std::fflush(file) != 0) {
    const int error = errno;
    status = absl::ErrnoToStatus(
        error, absl::StrCat("cannot write the record count into the header "
                            "of ",
                            path_));
  } else if (::fsync(::fileno(file)) != 0) {
    const int error = errno;
    status = absl::ErrnoToStatus(
        error, absl::StrCat("cannot fsync the records of ", path_));
  }
  if (std::fclose(file) != 0 && status.ok()) {
    const int error = errno;
    status = absl::ErrnoToStatus(error, absl::StrCat("cannot close ", path_));
  }
  buffer_.reset();
  if (!status.ok()) {
    ::unlink(tmp_path_.c_str());  // `path` keeps whatever it held before
    return status;
  }
  // Checked again: something else may have been put at `path` since
  // Create().
  if (absl::Status replaceable = CheckReplaceable(path_); !replaceable.ok()) {
    ::unlink(tmp_path_.c_str());
    return replaceable;
  }
  // One atomic rename over `path`, made durable (loader/atomic_file.h).
  return PublishFile(tmp_path_, path_);
}

// --- RecordFileDataset ------------------------------------------------------

}  // namespace pinwheel
