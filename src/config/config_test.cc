#include "config/config.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "config/secrets.h"

namespace cairn::config {
namespace {

class TempDir {
 public:
  TempDir() {
    path_ = std::filesystem::temp_directory_path() /
            ("cairn-config-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }
  std::string Write(const std::string& name, const std::string& text) const {
    std::ofstream(path_ / name) << text;
    return (path_ / name).string();
  }

 private:
  static inline int counter_ = 0;
  std::filesystem::path path_;
};

TEST(Config, Defaults) {
  auto c = LoadConfig({});
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->listen, "127.0.0.1:8080");
  EXPECT_EQ(c->host(), "127.0.0.1");
  EXPECT_EQ(c->port(), 8080);
  EXPECT_EQ(c->data_dir, "./cairn-data");
  EXPECT_EQ(c->public_url, "http://127.0.0.1:8080");
  EXPECT_EQ(c->transfer_url_ttl, std::chrono::seconds(3600));
  EXPECT_GE(c->io_threads, 1u);
  EXPECT_GE(c->worker_threads, 1u);
  EXPECT_GE(c->request_threads, 16u);  // above the CPU count: these wait on I/O
  EXPECT_FALSE(c->jwt_secret.has_value());
  EXPECT_EQ(c->log_level, "info");
  EXPECT_EQ(c->upload_buffers_kept, 2u);
}

TEST(Config, PrecedenceDefaultsTomlEnvFlags) {
  TempDir dir;
  const std::string file = dir.Write("cairn.toml", R"(
listen = "0.0.0.0:9000"
data_dir = "/from/toml"
io_threads = 3
worker_threads = 5
transfer_url_ttl = "30m"
log_level = "debug"
)");
  ConfigSources s;
  s.file = file;
  auto only_toml = LoadConfig(s);
  ASSERT_TRUE(only_toml.ok()) << only_toml.error().message;
  EXPECT_EQ(only_toml->listen, "0.0.0.0:9000");
  EXPECT_EQ(only_toml->data_dir, "/from/toml");
  EXPECT_EQ(only_toml->io_threads, 3u);
  EXPECT_EQ(only_toml->transfer_url_ttl, std::chrono::seconds(1800));
  EXPECT_EQ(only_toml->public_url, "http://0.0.0.0:9000");

  s.env = {{"CAIRN_DATA_DIR", "/from/env"}, {"CAIRN_IO_THREADS", "4"}, {"CAIRN_UNRELATED", "x"}};
  auto with_env = LoadConfig(s);
  ASSERT_TRUE(with_env.ok()) << with_env.error().message;
  EXPECT_EQ(with_env->listen, "0.0.0.0:9000");  // TOML still
  EXPECT_EQ(with_env->data_dir, "/from/env");
  EXPECT_EQ(with_env->io_threads, 4u);
  EXPECT_EQ(with_env->worker_threads, 5u);

  s.flags = {{"data_dir", "/from/flag"}, {"public_url", "https://cas.example.com/"}};
  auto with_flags = LoadConfig(s);
  ASSERT_TRUE(with_flags.ok()) << with_flags.error().message;
  EXPECT_EQ(with_flags->data_dir, "/from/flag");
  EXPECT_EQ(with_flags->io_threads, 4u);
  EXPECT_EQ(with_flags->public_url, "https://cas.example.com");  // trailing slash dropped
  EXPECT_EQ(with_flags->log_level, "debug");
}

TEST(Config, ConnectionCapsAndTrustedProxies) {
  auto d = LoadConfig({});
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->max_connections, 8192u);
  EXPECT_EQ(d->max_connections_per_client, 1024u);
  EXPECT_TRUE(d->trusted_proxies.empty());
  ConfigSources s;
  s.env = {{"CAIRN_TRUSTED_PROXIES", " 10.0.0.0/8, ::1 ,,192.168.0.7"},
           {"CAIRN_MAX_CONNECTIONS_PER_CLIENT", "0"}};
  auto c = LoadConfig(s);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->trusted_proxies, (std::vector<std::string>{"10.0.0.0/8", "::1", "192.168.0.7"}));
  EXPECT_EQ(c->max_connections_per_client, 0u);
  s.env = {{"CAIRN_MAX_CONNECTIONS", "3"}};
  EXPECT_FALSE(LoadConfig(s).ok());
}

TEST(Config, ConfigFileFromEnvironment) {
  TempDir dir;
  const std::string file = dir.Write("c.toml", "listen = \"127.0.0.1:7000\"\n");
  ConfigSources s;
  s.env = {{"CAIRN_CONFIG", file}};
  auto c = LoadConfig(s);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->port(), 7000);
}

TEST(Config, BadValuesSayWhereAndWhat) {
  struct Case {
    std::map<std::string, std::string> flags, env;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {{{"listen", "nonsense"}}, {}, "--listen"},
      {{{"listen", "127.0.0.1:70000"}}, {}, "out of range"},
      {{{"listen", "::1:80"}}, {}, "brackets"},
      {{{"io_threads", "zero"}}, {}, "not a number"},
      {{{"io_threads", "0"}}, {}, "out of range"},
      {{{"transfer_url_ttl", "5 minutes"}}, {}, "not a duration"},
      {{{"transfer_url_ttl", "0"}}, {}, "positive"},
      {{{"log_level", "loud"}}, {}, "--log-level"},
      {{{"public_url", "cas.example.com"}}, {}, "http://"},
      // Found by config_fuzz (tests/fuzz/regressions/config_fuzz/): "http://" was taken, as "http:".
      {{{"public_url", "http://"}}, {}, "must name a host"},
      {{{"public_url", "https:////"}}, {}, "must name a host"},
      {{{"s3_endpoint", "http:///bucket"}}, {}, "must name a host"},
      {{{"jwt_secret", "short"}}, {}, "32"},
      {{{"no_such_setting", "1"}}, {}, "unknown setting"},
      {{}, {{"CAIRN_WORKER_THREADS", "-1"}}, "CAIRN_WORKER_THREADS"},
      {{{"upload_buffers_kept", "5000"}}, {}, "out of range"},
      {{{"dedup_across_scopes", "yes"}}, {}, "true or false"},
      {{{"dedup_answer_max_bytes", "16 MiB"}}, {}, "not a byte size"},
      {{{"dedup_answer_max_bytes", "1KiB"}}, {}, "out of range"},
      {{{"dedup_answer_max_bytes", "1GiB"}}, {}, "out of range"},
  };
  for (const auto& c : cases) {
    ConfigSources s;
    s.flags = c.flags;
    s.env = c.env;
    auto r = LoadConfig(s);
    ASSERT_FALSE(r.ok()) << c.expect;
    EXPECT_NE(r.error().message.find(c.expect), std::string::npos) << r.error().message;
  }
}

// The TOML document given as text (ConfigSources::toml) loads as the same file would, named in errors.
TEST(Config, TomlText) {
  ConfigSources s;
  s.toml = "listen = \"127.0.0.1:7001\"\nio_threads = 3\n";
  auto c = LoadConfig(s);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->port(), 7001);
  EXPECT_EQ(c->io_threads, 3u);
  s.file = "given.toml";
  s.toml = "io_threads = \"x\"\n";
  auto bad = LoadConfig(s);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("given.toml: io_threads"), std::string::npos) << bad.error().message;
}

TEST(Config, BadTomlFile) {
  TempDir dir;
  ConfigSources s;
  s.file = dir.Write("typo.toml", "lissten = \"x\"\n");
  auto r = LoadConfig(s);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("lissten: unknown setting"), std::string::npos) << r.error().message;

  s.file = dir.Write("syntax.toml", "listen = \n");
  r = LoadConfig(s);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("syntax.toml:1"), std::string::npos) << r.error().message;

  s.file = dir.Write("type.toml", "io_threads = true\n");
  r = LoadConfig(s);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("io_threads"), std::string::npos) << r.error().message;

  s.file = (dir.path() / "missing.toml").string();
  EXPECT_FALSE(LoadConfig(s).ok());
}

TEST(Config, Durations) {
  EXPECT_EQ(*ParseDuration("3600"), std::chrono::seconds(3600));
  EXPECT_EQ(*ParseDuration("90s"), std::chrono::seconds(90));
  EXPECT_EQ(*ParseDuration("30m"), std::chrono::seconds(1800));
  EXPECT_EQ(*ParseDuration("12h"), std::chrono::seconds(43200));
  EXPECT_EQ(*ParseDuration("7d"), std::chrono::seconds(604800));
  for (const char* bad : {"", "m", "-5", "5x", "1.5h", "0", "99999999999999999999"})
    EXPECT_FALSE(ParseDuration(bad).ok()) << bad;
}

TEST(Config, ByteSizesAndBooleans) {
  EXPECT_EQ(*ParseByteSize("4096"), 4096u);
  EXPECT_EQ(*ParseByteSize("100B"), 100u);
  EXPECT_EQ(*ParseByteSize("512KiB"), 512u << 10);
  EXPECT_EQ(*ParseByteSize("16MiB"), 16u << 20);
  EXPECT_EQ(*ParseByteSize("2GiB"), 2ULL << 30);
  for (const char* bad : {"", "MiB", "-5", "5MB", "1.5MiB", "99999999999999999999GiB"})
    EXPECT_FALSE(ParseByteSize(bad).ok()) << bad;

  TempDir dir;
  ConfigSources s;
  s.file = dir.Write("dedup.toml", "dedup_across_scopes = true\ndedup_answer_max_bytes = \"4MiB\"\n");
  auto c = LoadConfig(s);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_TRUE(c->dedup_across_scopes);
  EXPECT_EQ(c->dedup_answer_max_bytes, 4u << 20);
  s.env = {{"CAIRN_DEDUP_ACROSS_SCOPES", "false"}};
  EXPECT_FALSE(LoadConfig(s)->dedup_across_scopes);
}

TEST(Config, Listen) {
  auto v6 = ParseListen("[::1]:8080");
  ASSERT_TRUE(v6.ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, 8080);
  EXPECT_TRUE(ParseListen("localhost:0").ok());
  EXPECT_FALSE(ParseListen(":80").ok());
  EXPECT_FALSE(ParseListen("host:").ok());
}

// A stand-in for the index's secrets table: first value stored wins.
struct SecretTable {
  std::map<std::string, std::string, std::less<>> rows;
  SharedSecretFn fn() {
    return [this](std::string_view name, std::string_view candidate) -> Result<std::string> {
      return rows.try_emplace(std::string(name), candidate).first->second;
    };
  }
};

TEST(Secrets, CreatedOnceThroughTheIndexAndReused) {
  TempDir dir;
  Config c;
  c.data_dir = dir.path().string();
  SecretTable table;
  auto first = LoadSecrets(c, table.fn());
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_EQ(first->jwt_key.size(), 64u);
  EXPECT_EQ(first->url_key.size(), 64u);
  EXPECT_NE(first->jwt_key, first->url_key);
  EXPECT_EQ(table.rows.at("jwt"), first->jwt_key);
  EXPECT_FALSE(std::filesystem::exists(LegacyKeyPath(c, "jwt")));  // nothing written beside the index
  auto again = LoadSecrets(c, table.fn());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->jwt_key, first->jwt_key);
  EXPECT_EQ(again->url_key, first->url_key);

  c.jwt_secret = std::string(40, 'k');
  auto configured = LoadSecrets(c, table.fn());
  ASSERT_TRUE(configured.ok());
  EXPECT_EQ(configured->jwt_key, std::string(40, 'k'));
  EXPECT_EQ(configured->url_key, first->url_key);
}

// A data directory from before keeps its keys: the files' values become the index's.
TEST(Secrets, LegacyKeyFilesAreImported) {
  TempDir dir;
  Config c;
  c.data_dir = dir.path().string();
  std::filesystem::create_directories(dir.path() / "secrets");
  const std::string old(64, 'a');
  std::ofstream(LegacyKeyPath(c, "jwt")) << old << "\n";
  SecretTable table;
  auto s = LoadSecrets(c, table.fn());
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->jwt_key, old);
  EXPECT_EQ(table.rows.at("jwt"), old);
  EXPECT_EQ(s->url_key.size(), 64u);                    // no file: a new one
  std::ofstream(LegacyKeyPath(c, "url")) << "short\n";  // too short to be a key
  SecretTable fresh;
  EXPECT_FALSE(LoadSecrets(c, fresh.fn()).ok());
}

}  // namespace
}  // namespace cairn::config
