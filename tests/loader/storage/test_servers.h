// Servers the storage suites start on the loopback, each a Python process
// from tests/loader/storage/: a range-capable HTTP file server, moto's S3
// server, and the fault-injecting proxy. A server that cannot start (no
// Python, no moto) fails the test that needs it, loudly: CI installs what
// they need (third_party/install-deps.sh --tests), and a skip would hide a
// suite that no longer runs.
//
// Example:
//   auto server = ServerProcess::Start("range_http_server.py",
//                                      {"--root", dir});
//   ASSERT_TRUE(server.ok()) << server.status();
//   std::string url = (*server)->url() + "/shard-000.tar";
//
// A suite that reads one folder over both HTTP and S3 derives its fixture
// from ServedFolderTest, which starts them together (StorageServers) once
// for the suite; its SetUpTestSuite calls ClearAwsEnvironment first.
#ifndef PINWHEEL_TESTS_LOADER_STORAGE_TEST_SERVERS_H_
#define PINWHEEL_TESTS_LOADER_STORAGE_TEST_SERVERS_H_

#include <chrono>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <gtest/gtest.h>
#include <memory>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

#include "tests/loader/storage/storage_test_files.h"

extern char** environ;

namespace pinwheel::testing_support {

// The interpreter with the tests' requirements (CMake passes the venv's),
// and the folder of the scripts.
inline std::string TestPython() { return PINWHEEL_TEST_PYTHON; }
inline std::string TestScript(const std::string& name) {
  return absl::StrCat(PINWHEEL_STORAGE_TEST_DIR, "/", name);
}

// One server process; the destructor kills it (SIGKILL) and reaps it.
// Not thread-safe.
class ServerProcess {
 public:
  // Starts `TestPython() TestScript(script) args...` and waits (up to
  // `timeout`) for its first stdout line "port <n>". Fails naming the
  // command and what the process said on stderr's way (it inherits stderr).
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Start(
      const std::string& script, const std::vector<std::string>& args,
      std::chrono::seconds timeout = std::chrono::seconds(60)) {
    // Loopback requests never go through a proxy the environment names
    // (libcurl reads http_proxy / ALL_PROXY at each request).
    ::setenv("NO_PROXY", "127.0.0.1,localhost", 1);
    ::setenv("no_proxy", "127.0.0.1,localhost", 1);
    std::vector<std::string> argv = {TestPython(), TestScript(script)};
    argv.insert(argv.end(), args.begin(), args.end());
    const std::string command = absl::StrJoin(argv, " ");
    int out[2];
    if (::pipe2(out, O_CLOEXEC) != 0) return absl::InternalError("pipe2");
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    std::vector<char*> c_argv;
    for (std::string& a : argv) c_argv.push_back(a.data());
    c_argv.push_back(nullptr);
    pid_t pid = 0;
    const int spawned = posix_spawnp(&pid, c_argv[0], &actions, nullptr,
                                     c_argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(out[1]);
    if (spawned != 0) {
      ::close(out[0]);
      return absl::FailedPreconditionError(
          absl::StrCat("could not start `", command, "`: errno ", spawned,
                       " (is ", TestPython(), " installed?)"));
    }
    auto server = std::unique_ptr<ServerProcess>(new ServerProcess(pid));
    std::string line;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (line.find('\n') == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      pollfd p = {out[0], POLLIN, 0};
      if (left.count() <= 0 ||
          ::poll(&p, 1, static_cast<int>(left.count())) <= 0) {
        ::close(out[0]);
        return absl::DeadlineExceededError(
            absl::StrCat("`", command, "` did not print its port within ",
                         timeout.count(), " s"));
      }
      char buffer[256];
      const ssize_t n = ::read(out[0], buffer, sizeof buffer);
      if (n <= 0) {
        ::close(out[0]);
        return absl::FailedPreconditionError(absl::StrCat(
            "`", command,
            "` exited before printing its port (its stderr is above; "
            "third_party/install-deps.sh --tests installs moto)"));
      }
      line.append(buffer, static_cast<size_t>(n));
    }
    ::close(out[0]);  // the servers print nothing after their port
    line = line.substr(0, line.find('\n'));
    if (line.rfind("port ", 0) != 0 ||
        !absl::SimpleAtoi(line.substr(5), &server->port_)) {
      return absl::FailedPreconditionError(
          absl::StrCat("`", command, "` printed \"", line, "\", not a port"));
    }
    return server;
  }

  ~ServerProcess() {
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  int port() const { return port_; }
  std::string host_port() const { return absl::StrCat("127.0.0.1:", port_); }
  std::string url() const { return absl::StrCat("http://", host_port()); }

 private:
  explicit ServerProcess(pid_t pid) : pid_(pid) {}
  pid_t pid_;
  int port_ = 0;
};

// Unsets every AWS_* variable that the S3 store reads (endpoints, profile,
// region, credentials and their files), so that a suite sees only what it
// sets itself, never the machine's.
inline void ClearAwsEnvironment() {
  for (const char* v :
       {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
        "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE", "AWS_REGION",
        "AWS_DEFAULT_REGION", "AWS_CONFIG_FILE",
        "AWS_SHARED_CREDENTIALS_FILE"}) {
    ::unsetenv(v);
  }
}

// Starts fault_proxy.py in front of `upstream` with `args` (--seed, --p-*,
// --max-faults, ...).
inline absl::StatusOr<std::unique_ptr<ServerProcess>> StartFaultProxy(
    const ServerProcess& upstream, std::vector<std::string> args) {
  args.insert(args.begin(), {"--upstream", upstream.host_port()});
  return ServerProcess::Start("fault_proxy.py", args);
}

// One folder's files served twice: over HTTP by range_http_server.py and
// over S3 by moto. Not thread-safe.
struct StorageServers {
  // Serves `http_root` over HTTP, and uploads `s3_upload` (its files, keys
  // `s3_prefix` + their path under it) to bucket `bucket` of a new moto
  // server. Fails naming the server that did not start.
  static absl::StatusOr<std::unique_ptr<StorageServers>> Start(
      const std::string& http_root, const std::string& bucket,
      const std::string& s3_upload, const std::string& s3_prefix = "") {
    auto servers = std::make_unique<StorageServers>();
    auto http =
        ServerProcess::Start("range_http_server.py", {"--root", http_root});
    if (!http.ok()) return http.status();
    servers->http = *std::move(http);
    auto s3 = ServerProcess::Start(
        "moto_server.py",
        {"--bucket", bucket, "--upload", s3_upload, "--prefix", s3_prefix});
    if (!s3.ok()) return s3.status();
    servers->s3 = *std::move(s3);
    return servers;
  }

  std::unique_ptr<ServerProcess> http;  // the range HTTP server
  std::unique_ptr<ServerProcess> s3;    // moto's S3 server
};

// The fixture of a suite whose cases share one folder served over HTTP and
// S3: the suite's SetUpTestSuite makes the folder (MakeFolder), writes its
// files and starts the servers (Serve); each case fails at once when they
// did not start; TearDownTestSuite stops them and removes the folder.
// `Suite` is the deriving fixture, so that each suite has its own.
// Not thread-safe (GoogleTest runs a suite's setup and cases on one thread).
template <typename Suite>
class ServedFolderTest : public ::testing::Test {
 protected:
  // Makes the suite's folder, a fresh TempDir(`name`), and returns its path.
  static const std::filesystem::path& MakeFolder(const std::string& name) {
    folder_ = new TempDir(name);
    return folder_->path();
  }
  // StorageServers::Start with these arguments, kept for the suite.
  static absl::Status Serve(const std::string& http_root,
                            const std::string& bucket,
                            const std::string& s3_upload,
                            const std::string& s3_prefix = "") {
    auto servers =
        StorageServers::Start(http_root, bucket, s3_upload, s3_prefix);
    if (!servers.ok()) return servers.status();
    servers_ = servers->release();
    return absl::OkStatus();
  }
  static void TearDownTestSuite() {
    delete servers_;
    servers_ = nullptr;
    delete folder_;
    folder_ = nullptr;
  }
  void SetUp() override {
    ASSERT_NE(servers_, nullptr) << "the HTTP and S3 servers did not start";
  }

  // REQUIRES (all three): MakeFolder(), and Serve() for the servers, ran.
  static const std::filesystem::path& folder() { return folder_->path(); }
  static const ServerProcess& http() { return *servers_->http; }
  static const ServerProcess& moto() { return *servers_->s3; }

 private:
  static inline TempDir* folder_ = nullptr;
  static inline StorageServers* servers_ = nullptr;
};

}  // namespace pinwheel::testing_support

#endif  // PINWHEEL_TESTS_LOADER_STORAGE_TEST_SERVERS_H_
