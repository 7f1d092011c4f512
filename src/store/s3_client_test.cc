// The parts of the S3 client that compute rather than talk: canonical query strings and presigned URLs,
// checked against the example of AWS's own documentation ("Authenticating Requests: Using Query Parameters").
#include "store/s3_client.h"

#include <gtest/gtest.h>

namespace cairn::store {
namespace {

TEST(S3QueryStringTest, SortsAndEncodesAsSigV4Wants) {
  EXPECT_EQ(S3QueryString({{"uploads", ""}}), "uploads=");
  EXPECT_EQ(S3QueryString({{"uploadId", "a/b+c=d"}, {"partNumber", "7"}}),
            "partNumber=7&uploadId=a%2Fb%2Bc%3Dd");
  EXPECT_EQ(S3QueryString({{"prefix", "x/y z~"}, {"list-type", "2"}, {"continuation-token", "t"}}),
            "continuation-token=t&list-type=2&prefix=x%2Fy%20z~");
}

S3Options AwsExample() {
  S3Options o;
  o.endpoint = "https://s3.amazonaws.com";
  o.region = "us-east-1";
  o.bucket = "examplebucket";
  o.access_key = "AKIAIOSFODNN7EXAMPLE";
  o.secret_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
  return o;
}

TEST(PresignGetTest, MatchesTheAwsDocumentationExample) {
  auto client = S3Client::Create(AwsExample());
  ASSERT_TRUE(client.ok()) << client.error().message;
  // 2013-05-24T00:00:00Z, valid for 86400 s.
  const std::string url = PresignGet(**client, "test.txt", 1369353600, 86400);
  EXPECT_EQ(url,
            "https://examplebucket.s3.amazonaws.com/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256"
            "&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request"
            "&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host"
            "&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404");
  // The same signing key serves a later call of the same day; another day derives its own.
  EXPECT_EQ(PresignGet(**client, "test.txt", 1369353600, 86400), url);
  EXPECT_NE(PresignGet(**client, "test.txt", 1369353600 + 86400, 86400), url);
}

TEST(PresignGetTest, TagsAreSignedAndTellRangesApart) {
  auto client = S3Client::Create(AwsExample());
  ASSERT_TRUE(client.ok());
  const std::string a = PresignGet(**client, "k", 1369353600, 60, "0-99");
  const std::string b = PresignGet(**client, "k", 1369353600, 60, "100-199");
  EXPECT_NE(a.find("&x-cairn-tag=0-99&X-Amz-Signature="), std::string::npos) << a;
  EXPECT_NE(a.substr(a.find("X-Amz-Signature=")), b.substr(b.find("X-Amz-Signature=")));
}

TEST(S3ClientTest, PathStyleAndVirtualHostedUrls) {
  auto o = AwsExample();
  auto hosted = S3Client::Create(o);
  ASSERT_TRUE(hosted.ok());
  EXPECT_EQ((*hosted)->Url("a/b", "x=1"), "https://examplebucket.s3.amazonaws.com/a/b?x=1");
  o.endpoint = "http://127.0.0.1:8333/";
  o.path_style = true;
  auto path = S3Client::Create(o);
  ASSERT_TRUE(path.ok());
  EXPECT_EQ((*path)->Url("a/b"), "http://127.0.0.1:8333/examplebucket/a/b");
  EXPECT_EQ((*path)->Describe(), "s3://examplebucket at http://127.0.0.1:8333");
}

TEST(S3ClientTest, RefusesOptionsItCannotUse) {
  auto o = AwsExample();
  o.bucket = "";
  EXPECT_FALSE(S3Client::Create(o).ok());
  o = AwsExample();
  o.bucket = "bad bucket";
  EXPECT_FALSE(S3Client::Create(o).ok());
  o = AwsExample();
  o.endpoint = "ftp://x";
  EXPECT_FALSE(S3Client::Create(o).ok());
  o = AwsExample();
  o.secret_key.clear();
  auto e = S3Client::Create(o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message.find("AWS_SECRET_ACCESS_KEY"), std::string::npos);
}

}  // namespace
}  // namespace cairn::store
