// A repository's history (page_context.h): /commits/{rev}, newest first and paged, and /commit/{id}: what
// the commit changed against its first parent, with a line diff of small text files.
#include <map>
#include <set>
#include <utility>

#include "web/page_context.h"
#include "web/text_diff.h"

namespace cairn::web {

namespace {

using http::Exchange;
using http::Verb;

constexpr size_t kCommitsPage = 50;
constexpr size_t kMessageBytesPage = 256 << 10;  // a history page's messages, at most
constexpr size_t kMaxChangesShown = 300;         // files listed on a commit's page
constexpr uint64_t kMaxDiffBytes = 64 << 10;     // either side of a file diffed, at most
constexpr size_t kMaxDiffs = 50;                 // files diffed on one page

View CommitRow(const std::string& repo_url, const hub::CommitInfo& c) {
  View row;
  row.set("repo_url", repo_url);
  row.set("oid", c.oid.hex());
  row.set("short", c.oid.hex().substr(0, 7));
  row.set("summary", c.commit.title());
  row.set("author", c.commit.author.name);
  row.set("date", DateText(c.commit.committer.time));
  row.set("iso", IsoTime(c.commit.committer.time));
  return row;
}

// Page `p` of the history from the page's commit, newest first.
Result<std::string> CommitsBody(const PageContext& ctx, const RepoPage& page, size_t p) {
  auto listed =
      ctx.hub.ListCommits(page.repo, page.commit, p * kCommitsPage, kCommitsPage, kMessageBytesPage);
  if (!listed) return listed.error();
  View v;
  v.set("rev", page.rev);
  View rows{View::type::list};
  for (const hub::CommitInfo& c : listed->commits) rows.push_back(CommitRow(page.url, c));
  v.set("commits", rows);
  if (p > 0) v.set("prev", std::to_string(p - 1));
  if (listed->more) v.set("next", std::to_string(p + 1));
  return Render("commits.html", v);
}

void RenderCommits(const PageContext& ctx, const std::shared_ptr<Exchange>& ex, const RepoPage& page) {
  const size_t p = PageNumber(ex->request());
  auto body = Kept(ctx, page, "commits:" + std::to_string(p), [&] { return CommitsBody(ctx, page, p); });
  if (!body)
    return ex->Respond(
        ErrorPage(http::HttpStatusOf(body.error().code), body.error().message, page.who.visitor));
  ex->Respond(
      RepoPageAnswer(ctx, page, "history", "History · " + hub::RepoPath(page.repo.id()), (*body)->html));
}

// One file a commit changed: its state before (null: added) and after (null: deleted).
struct Change {
  std::string path;
  std::optional<hub::PathInfo> before;
  std::optional<hub::PathInfo> after;
};

// The entries of the folder at `path` of `commit` by name (none for no commit, or no such folder there).
Result<std::map<std::string, hub::PathInfo>> FolderAt(const PageContext& ctx, const RepoPage& page,
                                                      const std::optional<hub::ObjectId>& commit,
                                                      const std::string& path, bool present) {
  std::map<std::string, hub::PathInfo> out;
  if (!commit || !present) return out;
  auto entries = ctx.hub.List(page.repo, *commit, path, false);
  if (!entries) return entries.error();
  for (hub::PathInfo& f : *entries) {
    const size_t slash = f.path.rfind('/');
    out.emplace(slash == std::string::npos ? f.path : f.path.substr(slash + 1), std::move(f));
  }
  return out;
}

// Adds to `out` the files that differ between folder `path` before (`had`: it existed) and after (`has`),
// walking both trees together: a subfolder whose tree id is the same on both sides is the same, and is not
// read.
Status Compare(const PageContext& ctx, const RepoPage& page, const std::optional<hub::ObjectId>& parent,
               const std::string& path, bool had, bool has, std::vector<Change>& out) {
  auto before = FolderAt(ctx, page, parent, path, had);
  auto after = FolderAt(ctx, page, page.commit, path, has);
  if (!before) return before.error();
  if (!after) return after.error();
  std::set<std::string> names;
  for (const auto& [name, f] : *before) names.insert(name);
  for (const auto& [name, f] : *after) names.insert(name);
  for (const std::string& name : names) {
    const auto b = before->find(name);
    const auto a = after->find(name);
    const hub::PathInfo* was = b == before->end() ? nullptr : &b->second;
    const hub::PathInfo* now = a == after->end() ? nullptr : &a->second;
    if (was != nullptr && now != nullptr && was->oid == now->oid && was->is_dir == now->is_dir) continue;
    std::string full = path;
    if (!full.empty()) full += '/';
    full += name;
    const bool was_dir = was != nullptr && was->is_dir;
    const bool now_dir = now != nullptr && now->is_dir;
    if (was_dir || now_dir) {
      if (auto st = Compare(ctx, page, parent, full, was_dir, now_dir, out); !st) return st;
    }
    // A file on either side (beside a folder of the same name on the other, the folder handled above).
    std::optional<hub::PathInfo> file_before =
        was != nullptr && !was_dir ? std::optional(*was) : std::nullopt;
    std::optional<hub::PathInfo> file_after = now != nullptr && !now_dir ? std::optional(*now) : std::nullopt;
    if (file_before || file_after) out.push_back({full, std::move(file_before), std::move(file_after)});
  }
  return Ok{};
}

// A small file's text, when it is one (nullopt: large, binary or unreadable).
std::optional<std::string> SmallText(const PageContext& ctx, const RepoPage& page, const hub::PathInfo* f) {
  if (f == nullptr) return std::string();
  if (f->lfs || f->xet || f->size > kMaxDiffBytes) return std::nullopt;
  auto text = ReadHead(ctx, page.repo, *f, kMaxDiffBytes);
  if (!text || !LooksLikeText(*text, false)) return std::nullopt;
  return std::move(*text);
}

View ChangeView(const PageContext& ctx, const RepoPage& page, const std::string& path,
                const hub::PathInfo* before, const hub::PathInfo* after, size_t& diffs) {
  View c;
  c.set("path", path);
  c.set("status", std::string(before == nullptr ? "added" : after == nullptr ? "deleted" : "modified"));
  auto a = diffs < kMaxDiffs ? SmallText(ctx, page, before) : std::nullopt;
  auto b = a ? SmallText(ctx, page, after) : std::nullopt;
  auto lines = b ? DiffLines(*a, *b) : std::nullopt;
  if (!lines) {
    const hub::PathInfo* now = after != nullptr ? after : before;
    c.set("note", (now->lfs || now->xet) ? "A large file (" + HumanSize(now->size) + "): no diff shown."
                                         : "No diff shown (binary, large, or past this page's diffs).");
    return c;
  }
  ++diffs;
  View rows{View::type::list};
  for (const DiffLine& d : *lines) {
    View row;
    const char* mark = d.kind == DiffLine::Kind::kAdd ? "+" : d.kind == DiffLine::Kind::kDel ? "-" : " ";
    row.set("kind", std::string(d.kind == DiffLine::Kind::kAdd   ? "add"
                                : d.kind == DiffLine::Kind::kDel ? "del"
                                                                 : "keep"));
    row.set("line", mark + std::string(d.text));
    rows.push_back(row);
  }
  c.set("has_diff", !rows.is_empty_list());
  c.set("diff", rows);
  return c;
}

void SetChanges(View& v, const PageContext& ctx, const RepoPage& page, const hub::Commit& commit) {
  std::optional<hub::ObjectId> parent;
  if (!commit.parents.empty()) parent = commit.parents.front();
  std::vector<Change> changed;
  if (!Compare(ctx, page, parent, "", true, true, changed)) return;
  std::sort(changed.begin(), changed.end(), [](const Change& x, const Change& y) { return x.path < y.path; });
  View list{View::type::list};
  size_t diffs = 0;
  for (size_t i = 0; i < changed.size() && i < kMaxChangesShown; ++i) {
    const Change& c = changed[i];
    list.push_back(
        ChangeView(ctx, page, c.path, c.before ? &*c.before : nullptr, c.after ? &*c.after : nullptr, diffs));
  }
  v.set("changes", list);
  v.set("changed_count", std::to_string(changed.size()));
  if (changed.size() > kMaxChangesShown) {
    v.set("more", true);
    v.set("shown", std::to_string(kMaxChangesShown));
  }
}

// What the page's commit is and changed.
Result<std::string> CommitBody(const PageContext& ctx, const RepoPage& page, const hub::Commit& commit) {
  View v;
  v.set("repo_url", page.url);
  v.set("oid", page.commit.hex());
  v.set("summary", commit.title());
  if (const size_t nl = commit.message.find("\n\n");
      nl != std::string::npos && nl + 2 < commit.message.size()) {
    v.set("description", commit.message.substr(nl + 2));
  }
  v.set("author", commit.author.name);
  v.set("date", DateText(commit.committer.time));
  v.set("iso", IsoTime(commit.committer.time));
  View parents{View::type::list};
  for (const hub::ObjectId& p : commit.parents) {
    View row;
    row.set("oid", p.hex());
    row.set("short", p.hex().substr(0, 7));
    parents.push_back(row);
  }
  v.set("has_parents", !parents.is_empty_list());
  v.set("parents", parents);
  SetChanges(v, ctx, page, commit);
  return Render("commit.html", v);
}

void RenderCommit(const PageContext& ctx, const std::shared_ptr<Exchange>& ex, const RepoPage& page) {
  auto commit = ctx.hub.ReadCommit(page.repo, page.commit);
  if (!commit) {
    return ex->Respond(
        ErrorPage(http::HttpStatusOf(commit.error().code), commit.error().message, page.who.visitor));
  }
  auto body = Kept(ctx, page, "commit", [&] { return CommitBody(ctx, page, *commit); });
  if (!body)
    return ex->Respond(
        ErrorPage(http::HttpStatusOf(body.error().code), body.error().message, page.who.visitor));
  ex->Respond(RepoPageAnswer(ctx, page, "history", commit->title() + " · " + hub::RepoPath(page.repo.id()),
                             (*body)->html));
}

}  // namespace

void RegisterHistoryPages(const std::shared_ptr<const PageContext>& ctx) {
  auto& r = ctx->server.router();
  for (const std::string repo : {"/{types}/{ns}/{name}", "/{ns}/{name}"}) {
    r.Handle(Verb::get, repo + "/commits/{rev}", http::RouteOptions().Name("page_commits"),
             RepoPageHandler(ctx, &RenderCommits));
    r.Handle(Verb::get, repo + "/commit/{rev}", http::RouteOptions().Name("page_commit"),
             RepoPageHandler(ctx, &RenderCommit));
  }
}

}  // namespace cairn::web
