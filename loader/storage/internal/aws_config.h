// AWS settings from the standard places, for S3Store: credentials from
// AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN, else the
// profile (AWS_PROFILE, else "default") of ~/.aws/credentials
// (AWS_SHARED_CREDENTIALS_FILE) and ~/.aws/config (AWS_CONFIG_FILE, where
// the section is "[profile NAME]", or "[default]"); the region from
// AWS_REGION, AWS_DEFAULT_REGION, else the profile's "region". Thread-safe
// (reads the environment and files only).
#ifndef PINWHEEL_LOADER_STORAGE_INTERNAL_AWS_CONFIG_H_
#define PINWHEEL_LOADER_STORAGE_INTERNAL_AWS_CONFIG_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace pinwheel::internal {

struct AwsCredentials {
  std::string access_key_id;  // empty: none found (anonymous requests)
  std::string secret_access_key;
  std::string session_token;  // empty unless temporary credentials
  std::string source;         // where they came from, for messages
};

// Returns the sections of an INI text: section -> key -> value (keys and
// section names trimmed, comments '#' and ';' dropped).
std::map<std::string, std::map<std::string, std::string>> ParseIni(
    absl::string_view text);

// Returns the credentials for `profile` (empty: AWS_PROFILE, else
// "default"). InvalidArgument naming the variable or file when a key id
// comes without its secret.
[[nodiscard]] absl::StatusOr<AwsCredentials> LoadAwsCredentials(
    const std::string& profile);

// Returns the region: AWS_REGION, AWS_DEFAULT_REGION, the profile's
// "region" in the config file, else "us-east-1".
std::string LoadAwsRegion(const std::string& profile);

}  // namespace pinwheel::internal

#endif  // PINWHEEL_LOADER_STORAGE_INTERNAL_AWS_CONFIG_H_
