#include "api/refusal_audit.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <utility>

#include "api/person_tokens.h"
#include "common/printable.h"
#include "people/token_text.h"

namespace cairn::api {

namespace {

constexpr size_t kMaxTarget = 256;  // bytes of the path kept: a name is never longer, garbage is cut

std::string VerbName(http::Verb v) {
  return std::string(boost::beast::http::to_string(v));
}

}  // namespace

bool RefusalAudit::WriteAttempt(const http::Request& req) {
  if (req.method == http::Verb::get || req.method == http::Verb::head) {
    return req.Query("service") == "git-receive-pack";  // git push asks for the refs to push to first
  }
  return req.method != http::Verb::options && req.route != "oauth_token";
}

std::optional<index::AuditActor> RefusalAudit::ActorOf(const http::Request& req) const {
  if (req.principal) {
    hub::Caller caller = CallerFrom(*req.principal);
    caller.client = req.remote;
    return caller.Actor();
  }
  const auto token = http::CredentialOf(req.Header("Authorization"));
  if (!token) return std::nullopt;
  // A person's token is named by the directory, valid or not, from memory: verifying it again would note a
  // use and, for an unknown one, ask for an index refresh. Only signed tokens are verified (CPU, cached).
  if (token->starts_with(people::kTokenPrefix)) {
    if (people_ == nullptr) return std::nullopt;
    auto holder = people_->HolderOf(*token);
    if (!holder) return std::nullopt;
    return index::AuditActor{.actor = holder->user, .token_id = holder->token_id, .client = req.remote};
  }
  const http::Authenticator* auth = server_.authenticator();
  if (auth == nullptr) return std::nullopt;
  auto who =
      auth->Verify(*token, auth->now(), http::TokenKinds{.access = true, .cas = true, .fine_grained = true});
  if (!who) return std::nullopt;
  hub::Caller caller = CallerFrom(*who);
  caller.client = req.remote;
  return caller.Actor();
}

std::optional<uint64_t> RefusalAudit::Pass(const std::string& key, int64_t now) {
  std::lock_guard lock(mu_);
  if (buckets_.size() >= kMaxActors && !buckets_.contains(key)) buckets_.clear();
  auto [it, fresh] = buckets_.try_emplace(key, Bucket{.tokens = kBurst, .at = now, .held = 0});
  Bucket& b = it->second;
  if (!fresh) {
    b.tokens = std::min(kBurst, b.tokens + static_cast<double>(now - b.at) / kEverySeconds);
    b.at = now;
  }
  if (b.tokens < 1) {
    ++b.held;
    return std::nullopt;
  }
  b.tokens -= 1;
  return std::exchange(b.held, 0);
}

void RefusalAudit::Observe(const http::Request& req, unsigned status) {
  if (!WriteAttempt(req)) return;
  auto actor = ActorOf(req);
  if (!actor) return;
  const int64_t now = clock_.UnixSeconds();
  const auto held = Pass(actor->actor + "\n" + actor->token_id, now);
  if (!held) return;
  std::string detail = VerbName(req.method) + " " + std::to_string(status);
  if (*held > 0) detail += " (" + std::to_string(*held) + " more before it not recorded)";
  std::string ns = req.Param("ns");
  auto event = actor->Event(now, "access.refused", std::move(ns), Printable(req.path, kMaxTarget), detail);
  const bool queued = server_.workers().Post([&audit = audit_, event = std::move(event)] {
    if (auto st = audit.AppendAudit(event); !st.ok()) {
      spdlog::warn("audit: a refused attempt by {} was not recorded: {}", event.actor, st.error().message);
    }
  });
  if (!queued)
    spdlog::warn("audit: a refused attempt by {} was not recorded: the workers are busy", actor->actor);
}

}  // namespace cairn::api
