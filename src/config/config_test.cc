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
  EXPECT_EQ(with_flags->content_url, "");
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

TEST(Config, TlsNeedsBothFilesAndMakesTheDefaultPublicUrlHttps) {
  auto plain = LoadConfig({});
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->scheme(), "http");
  EXPECT_EQ(plain->public_url, "http://127.0.0.1:8080");
  ConfigSources s;
  s.env = {{"CAIRN_TLS_CERT", "/etc/cairn/fullchain.pem"}, {"CAIRN_TLS_KEY", "/etc/cairn/privkey.pem"}};
  auto tls = LoadConfig(s);
  ASSERT_TRUE(tls.ok()) << tls.error().message;
  EXPECT_EQ(tls->scheme(), "https");
  EXPECT_EQ(tls->public_url, "https://127.0.0.1:8080");
  EXPECT_EQ(tls->tls_key, "/etc/cairn/privkey.pem");
  s.env.erase("CAIRN_TLS_KEY");
  auto half = LoadConfig(s);
  ASSERT_FALSE(half.ok());
  EXPECT_NE(half.error().message.find("tls_key"), std::string::npos) << half.error().message;
  EXPECT_NE(half.error().message.find("both"), std::string::npos) << half.error().message;
}

TEST(Config, AUserContentOriginIsAnotherHostsOrigin) {
  ConfigSources s;
  s.flags = {{"public_url", "https://hub.example"}, {"content_url", "https://files.hub.example/"}};
  auto c = LoadConfig(s);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->content_url, "https://files.hub.example");
  EXPECT_EQ(HostOf(c->content_url), "files.hub.example");
  EXPECT_EQ(HostOf("http://LocalHost:8081/x"), "localhost:8081");
  EXPECT_EQ(OriginOf("http://localhost:8081/x/y"), "http://localhost:8081");
  EXPECT_EQ(HostOf("https://files.example:443"), "files.example") << "the Host a browser sends";
  EXPECT_EQ(HostOf("http://files.example:80"), "files.example");
  EXPECT_EQ(HostOf("http://files.example:443"), "files.example:443");
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
      {{{"content_url", "https://files.example/x"}}, {}, "without a path"},
      {{{"public_url", "https://hub.example"}, {"content_url", "https://HUB.example"}}, {}, "another host"},
      {{{"public_url", "http://127.0.0.1:8080"}, {"content_url", "http://127.0.0.1:8081"}},
       {},
       "another host"},
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

TEST(Config, MirrorSettingsAsATableAndAsVariables) {
  auto d = LoadConfig({});
  ASSERT_TRUE(d.ok());
  EXPECT_TRUE(d->mirror_upstream.empty());  // no mirror unless asked
  EXPECT_EQ(d->mirror_read, "anyone");
  EXPECT_EQ(d->mirror_revision_ttl.count(), 60);
  EXPECT_EQ(d->mirror_max_bytes, 0u);  // no limit
  ConfigSources s;
  s.toml =
      "[mirror]\nupstream = \"https://huggingface.co/\"\ntoken = \"hf_x\"\nrepos = [\"openai\", "
      "\"datasets/a/b\"]\n"
      "read = \"token\"\nrevision_ttl = \"5m\"\noffline = true\nmax_bytes = \"2TiB\"\n";
  auto c = LoadConfig(s);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->mirror_upstream, "https://huggingface.co");
  EXPECT_EQ(c->mirror_token, "hf_x");
  EXPECT_EQ(c->mirror_repos, (std::vector<std::string>{"openai", "datasets/a/b"}));
  EXPECT_EQ(c->mirror_read, "token");
  EXPECT_EQ(c->mirror_revision_ttl.count(), 300);
  EXPECT_TRUE(c->mirror_offline);
  EXPECT_EQ(c->mirror_max_bytes, 2ULL << 40);
  s.toml.reset();
  s.env = {{"CAIRN_MIRROR_UPSTREAM", "http://10.0.0.2:8080"},
           {"CAIRN_MIRROR_OFFLINE", "false"},
           {"CAIRN_MIRROR_NODE_URL", "http://10.0.0.5:8080/"}};
  c = LoadConfig(s);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->mirror_upstream, "http://10.0.0.2:8080");
  EXPECT_FALSE(c->mirror_offline);
  EXPECT_EQ(c->mirror_node_url, "http://10.0.0.5:8080");
  const std::string long_url = "[mirror]\nnode_url = \"http://" + std::string(200, 'a') + "\"\n";
  for (const std::string& bad :
       {std::string("[mirror]\nread = \"everyone\"\n"), std::string("[mirror]\nupstream = \"ftp://x\"\n"),
        std::string("[mirror]\nunknown = 1\n"), std::string("[mirror]\nnode_url = \"10.0.0.5\"\n"),
        long_url}) {
    s.env.clear();
    s.toml = bad;
    auto refused = LoadConfig(s);
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_NE(refused.error().message.find("mirror_"), std::string::npos) << refused.error().message;
  }
}

TEST(Config, CompanySignInFromAnOidcTableOrTheEnvironment) {
  ConfigSources s;
  s.toml =
      "[oidc]\nissuer = \"https://sso.example/realms/acme/\"\nclient_id = \"cairn\"\nclient_secret = \"s\"\n"
      "name = \"Acme SSO\"\ngroups_claim = \"groups\"\ngroups = [\"ml=acme:write\", \"leads=acme:admin\"]\n"
      "create_users = false\nsession = \"8h\"\n";
  auto c = LoadConfig(s);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->oidc_issuer, "https://sso.example/realms/acme");
  EXPECT_EQ(c->oidc_client_id, "cairn");
  EXPECT_EQ(c->oidc_name, "Acme SSO");
  EXPECT_EQ(c->oidc_groups, (std::vector<std::string>{"ml=acme:write", "leads=acme:admin"}));
  EXPECT_FALSE(c->oidc_create_users);
  EXPECT_EQ(c->oidc_session.count(), 8 * 3600);
  EXPECT_EQ(c->oidc_username_claim, "preferred_username");
  s.toml.reset();
  s.env = {{"CAIRN_OIDC_ISSUER", "https://sso.example"}};
  auto refused = LoadConfig(s);
  ASSERT_FALSE(refused.ok()) << "an issuer without a client id";
  EXPECT_NE(refused.error().message.find("oidc_client_id"), std::string::npos) << refused.error().message;
  s.env.clear();
  s.toml = "[oidc]\nissuer = \"sso.example\"\nclient_id = \"c\"\n";
  EXPECT_FALSE(LoadConfig(s).ok()) << "an issuer that is no URL";
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
  EXPECT_FALSE(ParseDuration("0").ok());
  EXPECT_EQ(*ParseDuration("0s", /*allow_zero=*/true), std::chrono::seconds(0));
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

// A stand-in for the index's secrets table, with a clock the test moves.
class MemoryTable final : public SecretTable {
 public:
  std::map<std::string, StoredSecret, std::less<>> rows;
  int64_t now = 1'000'000;

  Result<std::vector<StoredSecret>> List() override {
    std::vector<StoredSecret> out;
    for (const auto& [name, row] : rows) out.push_back(row);
    return out;
  }
  Result<std::string> Shared(std::string_view name, std::string_view candidate) override {
    return rows.try_emplace(std::string(name), StoredSecret{std::string(name), std::string(candidate), now})
        .first->second.value;
  }
  Result<bool> Add(std::string_view name, std::string_view value) override {
    return rows.try_emplace(std::string(name), StoredSecret{std::string(name), std::string(value), now})
        .second;
  }
  Result<bool> Remove(std::string_view name) override { return rows.erase(std::string(name)) == 1; }
};

// A fresh data directory, configuration and secrets table.
class KeysTest : public ::testing::Test {
 protected:
  KeysTest() { c.data_dir = dir.path().string(); }
  TempDir dir;
  Config c;
  MemoryTable table;
};

TEST(Secrets, CreatedOnceThroughTheIndexAndReused) {
  TempDir dir;
  Config c;
  c.data_dir = dir.path().string();
  MemoryTable table;
  auto first = LoadSecrets(c, table, table.now);
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_EQ(first->jwt.current().id, kLegacyKeyId);
  EXPECT_EQ(first->jwt.current().material.size(), 64u);
  EXPECT_EQ(first->url.current().material.size(), 64u);
  EXPECT_NE(first->jwt.current().material, first->url.current().material);
  EXPECT_EQ(table.rows.at("jwt").value, first->jwt.current().material);
  EXPECT_FALSE(std::filesystem::exists(LegacyKeyPath(c, "jwt")));  // nothing written beside the index
  auto again = LoadSecrets(c, table, table.now);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->jwt, first->jwt);
  EXPECT_EQ(again->url, first->url);

  c.jwt_secret = std::string(40, 'k');
  auto configured = LoadSecrets(c, table, table.now);
  ASSERT_TRUE(configured.ok());
  EXPECT_EQ(configured->jwt.current().material, std::string(40, 'k'));
  EXPECT_EQ(configured->url, first->url);
}

// A data directory from before keeps its keys: the files' values become the index's.
TEST(Secrets, LegacyKeyFilesAreImported) {
  TempDir dir;
  Config c;
  c.data_dir = dir.path().string();
  std::filesystem::create_directories(dir.path() / "secrets");
  const std::string old(64, 'a');
  std::ofstream(LegacyKeyPath(c, "jwt")) << old << "\n";
  MemoryTable table;
  auto s = LoadSecrets(c, table, table.now);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->jwt.current().material, old);
  EXPECT_EQ(table.rows.at("jwt").value, old);
  EXPECT_EQ(s->url.current().material.size(), 64u);     // no file: a new one
  std::ofstream(LegacyKeyPath(c, "url")) << "short\n";  // too short to be a key
  MemoryTable fresh;
  EXPECT_FALSE(LoadSecrets(c, fresh, fresh.now).ok());
}

// A rotated key is accepted at once, signs once every node has had time to learn it (2 x key_refresh), and
// the key before stays accepted until retired.
TEST_F(KeysTest, RotationAddsAKeyThatSignsAfterTheRefreshDelay) {
  c.key_refresh = std::chrono::seconds(30);
  const auto legacy = LoadSecrets(c, table, table.now)->jwt.current();

  table.now += 100;
  auto added = RotateKey(c, table, KeyKind::kJwt, "k2", table.now);
  ASSERT_TRUE(added.ok()) << added.error().message;
  EXPECT_EQ(added->state, KeyInfo::State::kPending);
  EXPECT_EQ(added->active_from, table.now + 60);
  auto pending = LoadSecrets(c, table, table.now + 59);
  ASSERT_TRUE(pending.ok());
  EXPECT_EQ(pending->jwt.current().id, kLegacyKeyId);  // still signing with the legacy key
  ASSERT_NE(pending->jwt.Find("k2"), nullptr);         // but k2 verifies already
  EXPECT_EQ(pending->url.keys().size(), 1u);           // the other kind is untouched

  auto active = LoadSecrets(c, table, table.now + 60);
  EXPECT_EQ(active->jwt.current().id, "k2");
  EXPECT_TRUE(active->jwt.current().named());
  EXPECT_EQ(*active->jwt.Find(""), legacy);  // what names no key: the legacy key

  EXPECT_EQ(RotateKey(c, table, KeyKind::kJwt, "k2", table.now).error().code, ErrorCode::kConflict);
  EXPECT_EQ(RotateKey(c, table, KeyKind::kJwt, "bad id", table.now).error().code, ErrorCode::kMalformed);
  EXPECT_EQ(RotateKey(c, table, KeyKind::kJwt, "legacy", table.now).error().code, ErrorCode::kMalformed);
  auto generated = RotateKey(c, table, KeyKind::kUrl, "", table.now);
  ASSERT_TRUE(generated.ok());
  EXPECT_TRUE(ValidKeyId(generated->id));

  auto listed = ListKeys(c, table, table.now + 60);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 4u);
  EXPECT_EQ((*listed)[0].id, "k2");
  EXPECT_EQ((*listed)[0].state, KeyInfo::State::kCurrent);
  EXPECT_EQ((*listed)[1].id, kLegacyKeyId);
  EXPECT_EQ((*listed)[1].state, KeyInfo::State::kAccepted);
  EXPECT_EQ((*listed)[2].id, generated->id);  // url: rotated at the same time, due as well
  EXPECT_EQ((*listed)[3].id, kLegacyKeyId);
  auto early = ListKeys(c, table, table.now + 59);
  EXPECT_EQ((*early)[0].id, kLegacyKeyId);
  EXPECT_EQ((*early)[0].state, KeyInfo::State::kCurrent);
  EXPECT_EQ((*early)[1].state, KeyInfo::State::kPending);
}

// Keys added in the second the legacy key was made (a fresh install rotated at once): the legacy key is the
// older, whatever the ids.
TEST_F(KeysTest, TheLegacyKeyIsOlderThanKeysOfItsSecond) {
  ASSERT_TRUE(LoadSecrets(c, table, table.now).ok());
  ASSERT_TRUE(RotateKey(c, table, KeyKind::kJwt, "aaa", table.now).ok());
  EXPECT_EQ(LoadSecrets(c, table, table.now)->jwt.current().id, kLegacyKeyId);
  EXPECT_EQ(LoadSecrets(c, table, table.now + 120)->jwt.current().id, "aaa");
}

TEST_F(KeysTest, RetiredKeysAreGoneAndTheLastOneStays) {
  ASSERT_TRUE(LoadSecrets(c, table, table.now).ok());
  EXPECT_EQ(RetireKey(c, table, KeyKind::kJwt, "legacy", table.now).error().code,
            ErrorCode::kInconsistent);  // the only key
  ASSERT_TRUE(RotateKey(c, table, KeyKind::kJwt, "k2", table.now).ok());
  EXPECT_EQ(RetireKey(c, table, KeyKind::kJwt, "nope", table.now).error().code, ErrorCode::kNotFound);
  // Retiring the legacy key at once (a leak) makes the new one current without waiting.
  ASSERT_TRUE(RetireKey(c, table, KeyKind::kJwt, "legacy", table.now).ok());
  auto s = LoadSecrets(c, table, table.now);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->jwt.keys().size(), 1u);
  EXPECT_EQ(s->jwt.current().id, "k2");
  EXPECT_EQ(s->jwt.Find(""), nullptr);       // tokens without kid are refused now
  EXPECT_FALSE(table.rows.contains("jwt"));  // and no fresh legacy key was made in its place
}

TEST(Secrets, ConfiguredKeysWithIds) {
  TempDir dir;
  ConfigSources src;
  src.env = {{"CAIRN_DATA_DIR", dir.path().string()},
             {"CAIRN_JWT_KEYS", "old:" + std::string(40, 'o') + ", new:" + std::string(40, 'n')},
             {"CAIRN_JWT_SECRET", std::string(40, 'l')}};
  auto c = LoadConfig(src);
  ASSERT_TRUE(c.ok()) << c.error().message;
  MemoryTable table;
  auto s = LoadSecrets(*c, table, table.now);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->jwt.current().id, "new");  // the last listed, unless jwt_key_id says otherwise
  EXPECT_EQ(s->jwt.keys().size(), 3u);
  EXPECT_EQ(s->jwt.Find("")->material, std::string(40, 'l'));
  EXPECT_FALSE(table.rows.contains("jwt"));  // configured keys keep the index out of it
  EXPECT_EQ(RotateKey(*c, table, KeyKind::kJwt, "", table.now).error().code, ErrorCode::kMalformed);

  src.env["CAIRN_JWT_KEY_ID"] = "old";
  EXPECT_EQ(LoadSecrets(*LoadConfig(src), table, table.now)->jwt.current().id, "old");
  src.env["CAIRN_JWT_KEY_ID"] = "other";
  EXPECT_FALSE(LoadConfig(src).ok());

  // Errors name the key, never its secret.
  for (const std::string& bad :
       std::vector<std::string>{"x:tooshortsecret", "nocolon" + std::string(40, 's'),
                                "a:" + std::string(40, 's') + ",a:" + std::string(40, 't'),
                                "legacy:" + std::string(40, 's'), "bad id:" + std::string(40, 's')}) {
    src.env = {{"CAIRN_URL_KEYS", bad}};
    auto refused = LoadConfig(src);
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_EQ(refused.error().message.find("ssssssss"), std::string::npos) << refused.error().message;
    EXPECT_EQ(refused.error().message.find("tooshortsecret"), std::string::npos) << refused.error().message;
  }
}

TEST(Secrets, TomlTakesKeyLists) {
  TempDir dir;
  const auto path = dir.path() / "cairn.toml";
  std::ofstream(path) << "url_keys = [\"a:" << std::string(40, 'a') << "\", \"b:" << std::string(40, 'b')
                      << "\"]\nurl_key_id = \"a\"\nkey_refresh = \"10s\"\n";
  ConfigSources src;
  src.file = path.string();
  auto c = LoadConfig(src);
  ASSERT_TRUE(c.ok()) << c.error().message;
  ASSERT_EQ(c->url_keys.size(), 2u);
  EXPECT_EQ(c->url_keys[1].id, "b");
  EXPECT_EQ(c->url_key_id, "a");
  EXPECT_EQ(c->key_refresh, std::chrono::seconds(10));
  std::ofstream(path) << "listen = [\"a\"]\n";  // only key lists take arrays
  EXPECT_FALSE(LoadConfig(src).ok());
}

}  // namespace
}  // namespace cairn::config
