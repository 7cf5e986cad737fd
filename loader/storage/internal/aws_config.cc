#include "loader/storage/internal/aws_config.h"

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace pinwheel::internal {
namespace {

using Ini = std::map<std::string, std::map<std::string, std::string>>;

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? std::string() : std::string(value);
}

std::string HomeFile(const char* variable, const char* relative) {
  std::string path = Env(variable);
  if (!path.empty()) return path;
  const std::string home = Env("HOME");
  return home.empty() ? std::string() : absl::StrCat(home, "/", relative);
}

// The file's sections, or none when it cannot be read.
Ini ReadIni(const std::string& path) {
  if (path.empty()) return {};
  std::ifstream in(path);
  if (!in) return {};
  std::stringstream text;
  text << in.rdbuf();
  return ParseIni(text.str());
}

std::string Profile(const std::string& profile) {
  if (!profile.empty()) return profile;
  std::string env = Env("AWS_PROFILE");
  return env.empty() ? "default" : env;
}

// The profile's keys in the config file ("[profile NAME]" or "[NAME]" for
// the default).
const std::map<std::string, std::string>* ConfigSection(
    const Ini& config, const std::string& name) {
  auto it = config.find(absl::StrCat("profile ", name));
  if (it == config.end()) it = config.find(name);
  return it == config.end() ? nullptr : &it->second;
}

}  // namespace

Ini ParseIni(absl::string_view text) {
  Ini sections;
  std::string section;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line.front() == '[' && line.back() == ']') {
      section = std::string(
          absl::StripAsciiWhitespace(line.substr(1, line.size() - 2)));
      continue;
    }
    const size_t equals = line.find('=');
    if (equals == absl::string_view::npos) continue;
    sections[section][std::string(
        absl::StripAsciiWhitespace(line.substr(0, equals)))] =
        std::string(absl::StripAsciiWhitespace(line.substr(equals + 1)));
  }
  return sections;
}

absl::StatusOr<AwsCredentials> LoadAwsCredentials(const std::string& profile) {
  AwsCredentials out;
  out.access_key_id = Env("AWS_ACCESS_KEY_ID");
  if (!out.access_key_id.empty()) {
    out.secret_access_key = Env("AWS_SECRET_ACCESS_KEY");
    out.session_token = Env("AWS_SESSION_TOKEN");
    out.source = "the environment (AWS_ACCESS_KEY_ID)";
    if (out.secret_access_key.empty()) {
      return absl::InvalidArgumentError(
          "S3: AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not");
    }
    return out;
  }
  const std::string name = Profile(profile);
  const std::string credentials_path =
      HomeFile("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials");
  const std::string config_path = HomeFile("AWS_CONFIG_FILE", ".aws/config");
  const Ini credentials = ReadIni(credentials_path);
  std::map<std::string, std::string> keys;
  bool found = false;
  std::string from;
  if (auto it = credentials.find(name); it != credentials.end()) {
    keys = it->second;
    found = true;
    from = credentials_path;
  } else {
    const Ini config = ReadIni(config_path);
    const auto* section = ConfigSection(config, name);
    if (section != nullptr && section->count("aws_access_key_id") != 0) {
      keys = *section;
      found = true;
      from = config_path;
    }
  }
  if (!found) {
    out.source = absl::StrCat("none (no AWS_ACCESS_KEY_ID, no profile \"", name,
                              "\" in ", credentials_path, " or ", config_path,
                              "): anonymous requests");
    return out;
  }
  auto get = [&keys](const char* key) {
    auto it = keys.find(key);
    return it == keys.end() ? std::string() : it->second;
  };
  out.access_key_id = get("aws_access_key_id");
  out.secret_access_key = get("aws_secret_access_key");
  out.session_token = get("aws_session_token");
  out.source = absl::StrCat("profile \"", name, "\" of ", from);
  if (out.access_key_id.empty() || out.secret_access_key.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("S3: profile \"", name, "\" of ", from,
                     " lacks aws_access_key_id or aws_secret_access_key"));
  }
  return out;
}

std::string LoadAwsRegion(const std::string& profile) {
  for (const char* variable : {"AWS_REGION", "AWS_DEFAULT_REGION"}) {
    std::string region = Env(variable);
    if (!region.empty()) return region;
  }
  const Ini config = ReadIni(HomeFile("AWS_CONFIG_FILE", ".aws/config"));
  if (const auto* keys = ConfigSection(config, Profile(profile));
      keys != nullptr) {
    if (auto it = keys->find("region");
        it != keys->end() && !it->second.empty()) {
      return it->second;
    }
  }
  return "us-east-1";
}

}  // namespace pinwheel::internal
