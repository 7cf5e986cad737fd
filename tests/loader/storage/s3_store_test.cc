// S3 addressing, endpoints, regions and credentials (no server: the
// requests themselves are tested against moto in remote_*_test.cc).
#include "loader/storage/s3_store.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

#include "loader/storage/internal/aws_config.h"
#include "tests/loader/storage/storage_test_files.h"
#include "tests/loader/storage/test_servers.h"

namespace pinwheel {
namespace {

using ::testing::HasSubstr;
using testing_support::ClearAwsEnvironment;
using testing_support::TempDir;

class S3StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ClearAwsEnvironment();
    ::setenv("AWS_CONFIG_FILE", (dir_.path() / "config").c_str(), 1);
    ::setenv("AWS_SHARED_CREDENTIALS_FILE",
             (dir_.path() / "credentials").c_str(), 1);
  }
  void Write(const std::string& name, const std::string& text) {
    std::ofstream(dir_.path() / name) << text;
  }
  TempDir dir_{"s3_store_test"};
};

TEST_F(S3StoreTest, AwsIsVirtualHostedAndACustomEndpointPathStyle) {
  ::setenv("AWS_REGION", "eu-west-1", 1);
  auto aws = ResolveS3Endpoint({});
  ASSERT_TRUE(aws.ok());
  EXPECT_EQ(*S3HttpUrl(*aws, "s3://bucket/a/b c+.tar"),
            "https://bucket.s3.eu-west-1.amazonaws.com/a/b%20c%2B.tar");
  // A bucket with dots cannot be a TLS host name's label.
  EXPECT_EQ(*S3HttpUrl(*aws, "s3://my.bucket/k"),
            "https://s3.eu-west-1.amazonaws.com/my.bucket/k");
  ::setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9000/", 1);
  auto custom = ResolveS3Endpoint({});
  ASSERT_TRUE(custom.ok());
  EXPECT_EQ(*S3HttpUrl(*custom, "s3://bucket/k"),
            "http://127.0.0.1:9000/bucket/k");
  StoreOptions virtual_hosted{.s3_addressing =
                                  S3AddressingStyle::kVirtualHosted};
  EXPECT_EQ(*S3HttpUrl(*ResolveS3Endpoint(virtual_hosted), "s3://bucket/k"),
            "http://bucket.127.0.0.1:9000/k");
}

TEST_F(S3StoreTest, TheOptionBeatsTheS3VariableWhichBeatsTheGeneralOne) {
  ::setenv("AWS_ENDPOINT_URL", "http://general:1", 1);
  EXPECT_EQ(ResolveS3Endpoint({})->host, "general:1");
  ::setenv("AWS_ENDPOINT_URL_S3", "https://s3only:2", 1);
  EXPECT_EQ(ResolveS3Endpoint({})->host, "s3only:2");
  EXPECT_EQ(ResolveS3Endpoint({.s3_endpoint = "http://option:3"})->host,
            "option:3");
  auto bad = ResolveS3Endpoint({.s3_endpoint = "minio:9000"});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("StoreOptions::s3_endpoint"));
}

TEST_F(S3StoreTest, UrlsWithoutBucketOrKeyAreInvalidArgument) {
  auto endpoint = ResolveS3Endpoint({});
  for (const char* url :
       {"s3://", "s3://bucket", "s3://bucket/", "s3:///k", "http://x/y"}) {
    EXPECT_EQ(S3HttpUrl(*endpoint, url).status().code(),
              absl::StatusCode::kInvalidArgument)
        << url;
  }
}

TEST_F(S3StoreTest, CredentialsComeFromTheEnvironmentThenTheProfile) {
  Write("credentials",
        "[default]\naws_access_key_id = D\naws_secret_access_key = DS\n"
        "# a comment\n[ci]\naws_access_key_id=C\naws_secret_access_key=CS\n"
        "aws_session_token = T\n");
  Write("config", "[profile ci]\nregion = ap-south-1\n[default]\nregion = x\n");
  auto defaults = internal::LoadAwsCredentials("");
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->access_key_id, "D");
  ::setenv("AWS_PROFILE", "ci", 1);
  auto ci = internal::LoadAwsCredentials("");
  EXPECT_EQ(ci->access_key_id, "C");
  EXPECT_EQ(ci->session_token, "T");
  EXPECT_EQ(internal::LoadAwsRegion(""), "ap-south-1");
  ::setenv("AWS_ACCESS_KEY_ID", "E", 1);
  ::setenv("AWS_SECRET_ACCESS_KEY", "ES", 1);
  EXPECT_EQ(internal::LoadAwsCredentials("")->access_key_id, "E");
  ::unsetenv("AWS_SECRET_ACCESS_KEY");
  EXPECT_EQ(internal::LoadAwsCredentials("").status().code(),
            absl::StatusCode::kInvalidArgument);
  ::unsetenv("AWS_ACCESS_KEY_ID");
  auto none = internal::LoadAwsCredentials("nobody");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->access_key_id.empty());
  EXPECT_THAT(none->source, HasSubstr("anonymous"));
}

}  // namespace
}  // namespace pinwheel
