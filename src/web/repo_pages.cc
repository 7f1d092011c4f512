// A repository's card, its folders and its files (page_context.h): /{ns}/{name}, /tree/{rev}/{path},
// /blob/{rev}/{path}, and the same under /datasets/ and /spaces/.
#include <algorithm>
#include <utility>

#include "common/percent_encode.h"
#include "web/markdown.h"
#include "web/page_context.h"

namespace cairn::web {

namespace {

using http::Exchange;
using http::Verb;

constexpr size_t kTreePage = 200;                // entries on one page of a folder
constexpr uint64_t kMaxReadmeBytes = 512 << 10;  // a card renders no more of its README
constexpr uint64_t kMaxBlobShown = 512 << 10;    // a file's text shown on its page, at most
constexpr size_t kMaxSafetensorsFiles = 64;      // a card reads no more headers than this

std::string KindOf(const hub::PathInfo& info) {
  if (info.is_dir) return "folder";
  if (info.xet) return "Xet";
  if (info.lfs) return "LFS";
  return "small file";
}

View BaseView(const RepoPage& page) {
  View v;
  v.set("repo_url", page.url);
  v.set("rev", page.rev);
  v.set("rev_url", PercentEncode(page.rev));
  return v;
}

// The parameters of the card's safetensors files (from the cache, or their headers read now).
std::optional<TensorCounts> Tensors(const PageContext& ctx, const RepoPage& page,
                                    const std::vector<hub::PathInfo>& root) {
  std::optional<TensorCounts> sum;
  size_t read = 0;
  for (const hub::PathInfo& f : root) {
    if (f.is_dir || !f.path.ends_with(".safetensors") || ++read > kMaxSafetensorsFiles) continue;
    auto counts = ctx.tensors->Get(f.oid);
    if (!counts) {
      auto head = ReadHead(ctx, page.repo, f, 8);
      auto length = head ? SafetensorsHeaderLength(*head) : std::nullopt;
      if (!length || *length + 8 > f.size) continue;
      auto whole = ReadHead(ctx, page.repo, f, 8 + *length);
      if (!whole) continue;
      auto parsed = CountTensors(std::string_view(*whole).substr(8));
      if (!parsed) continue;
      counts = std::make_shared<const TensorCounts>(std::move(*parsed));
      ctx.tensors->Put(f.oid, counts, 64 + counts->by_dtype.size() * 48);
    }
    if (!sum) sum.emplace();
    sum->Add(*counts);
  }
  return sum;
}

void SetRefs(View& v, const PageContext& ctx, const RepoPage& page) {
  View branches{View::type::list};
  View tags{View::type::list};
  auto refs = ctx.hub.ListRefs(page.repo);
  for (const hub::RefInfo& ref : refs ? *refs : std::vector<hub::RefInfo>{}) {
    View r;
    r.set("name", ref.name);
    r.set("url", PercentEncode(ref.name));
    (ref.kind == index::RefKind::kBranch ? branches : tags).push_back(r);
  }
  v.set("has_tags", !tags.is_empty_list());
  v.set("branches", branches);
  v.set("tags", tags);
}

// The card as the README at the page's commit makes it: its metadata as a table and its text rendered.
std::string CardBody(const PageContext& ctx, const RepoPage& page, const std::vector<hub::PathInfo>& root) {
  View v;
  const hub::RepoId id = page.repo.id();
  v.set("kind_lower", std::string(id.type == hub::RepoType::kDataset ? "dataset" : "repository"));
  auto readme = std::find_if(root.begin(), root.end(),
                             [](const hub::PathInfo& f) { return !f.is_dir && f.path == "README.md"; });
  if (readme == root.end()) return Render("card.html", v);
  auto text = ReadHead(ctx, page.repo, *readme, kMaxReadmeBytes);
  if (!text || !LooksLikeText(*text, readme->size > kMaxReadmeBytes)) return Render("card.html", v);
  const Card card = SplitCard(*text);
  View meta{View::type::list};
  for (auto& [key, value] : MetadataEntries(card.metadata)) {
    View row;
    row.set("key", key);
    row.set("value", value);
    meta.push_back(row);
  }
  v.set("has_metadata", !meta.is_empty_list());
  v.set("metadata", meta);
  const LinkBase base{.pages = page.url + "/blob/" + PercentEncode(page.rev) + "/",
                      .files = page.url + "/resolve/" + PercentEncode(page.rev) + "/",
                      .file = [&](std::string_view path) { return FileUrl(ctx, page, path); }};
  v.set("readme", RenderMarkdown(card.body, &base));
  return Render("card.html", v);
}

void RenderCard(const PageContext& ctx, const std::shared_ptr<Exchange>& ex, const RepoPage& page) {
  View v = BaseView(page);
  const hub::RepoId id = page.repo.id();
  auto root = ctx.hub.List(page.repo, page.commit, "", false);
  if (!root)
    return ex->Respond(
        ErrorPage(http::HttpStatusOf(root.error().code), root.error().message, page.who.visitor));
  auto card = Kept(ctx, page, "card", [&]() -> Result<std::string> { return CardBody(ctx, page, *root); });
  if (!card)
    return ex->Respond(
        ErrorPage(http::HttpStatusOf(card.error().code), card.error().message, page.who.visitor));
  v.set("card", (*card)->html);
  if (auto tensors = Tensors(ctx, page, *root); tensors && tensors->total() > 0) {
    v.set("params", ParameterText(tensors->total()));
    std::string dtypes;
    for (const auto& [dtype, n] : tensors->by_dtype) dtypes += (dtypes.empty() ? "" : " · ") + dtype;
    v.set("dtypes", dtypes);
  }
  if (auto commit = ctx.hub.ReadCommit(page.repo, page.commit)) {
    View head;
    head.set("oid", page.commit.hex());
    head.set("short", page.commit.hex().substr(0, 7));
    head.set("summary", commit->title());
    head.set("date", DateText(commit->committer.time));
    head.set("iso", IsoTime(commit->committer.time));
    v.set("head", head);
  }
  auto storage = ctx.hub.StorageOf(page.repo);
  v.set("size", HumanSize(storage ? storage->bytes : 0));
  SetRefs(v, ctx, page);
  v.set("clone_url", ctx.options.public_url + "/" + hub::RepoPath(id));
  ex->Respond(RepoPageAnswer(ctx, page, "card", hub::RepoPath(id), Render("repo.html", v)));
}

// Page `asked` of folder `path` (the last one when there are fewer), 200 entries a page.
Result<std::string> TreeBody(const PageContext& ctx, const RepoPage& page, const std::string& path,
                             size_t asked) {
  auto folder = ctx.hub.ListPage(page.repo, page.commit, path, asked * kTreePage, kTreePage);
  if (!folder) {
    if (folder.error().code != ErrorCode::kNotFound) return folder.error();
    return Error{ErrorCode::kNotFound, "No such folder: " + path};
  }
  const size_t pages = (folder->total + kTreePage - 1) / kTreePage;
  if (pages > 0 && asked >= pages) {  // past the last page: show the last
    folder = ctx.hub.ListPage(page.repo, page.commit, path, (pages - 1) * kTreePage, kTreePage);
    if (!folder) return folder.error();
  }
  const size_t p = pages == 0 ? 0 : std::min(asked, pages - 1);
  View v = BaseView(page);
  v.set("crumbs", Crumbs(path, false));
  const size_t first = p * kTreePage;
  const size_t last = first + folder->entries.size();
  View list{View::type::list};
  for (const hub::PathInfo& f : folder->entries) {
    View e;
    e.set("name", f.path.substr(f.path.rfind('/') + 1));
    e.set("url", UrlPath(f.path));
    e.set("dir", f.is_dir);
    e.set("size", f.is_dir ? std::string() : HumanSize(f.size));
    e.set("kind", KindOf(f));
    list.push_back(e);
  }
  v.set("entries", list);
  v.set("count", std::to_string(folder->total));
  if (pages > 1) {
    View pg;
    pg.set("first", std::to_string(first + 1));
    pg.set("last", std::to_string(last));
    if (p > 0) pg.set("prev", std::to_string(p - 1));
    if (p + 1 < pages) pg.set("next", std::to_string(p + 1));
    v.set("pages", pg);
  }
  return Render("tree.html", v);
}

void RenderTree(const PageContext& ctx, const std::shared_ptr<Exchange>& ex, const RepoPage& page) {
  const std::string& path = ex->request().Param("path");
  const size_t asked = PageNumber(ex->request());
  std::string what = "tree";
  what += '\0';
  what += path;
  what += '\0';
  what += std::to_string(asked);
  auto body = Kept(ctx, page, what, [&] { return TreeBody(ctx, page, path, asked); });
  if (!body)
    return ex->Respond(
        ErrorPage(http::HttpStatusOf(body.error().code), body.error().message, page.who.visitor));
  const std::string title = hub::RepoPath(page.repo.id()) + (path.empty() ? "" : " · " + path);
  ex->Respond(RepoPageAnswer(ctx, page, "files", title, (*body)->html));
}

void RenderBlob(const PageContext& ctx, const std::shared_ptr<Exchange>& ex, const RepoPage& page) {
  const std::string& path = ex->request().Param("path");
  auto info = ctx.hub.Stat(page.repo, page.commit, path);
  if (!info) {
    const unsigned status = http::HttpStatusOf(info.error().code);
    return ex->Respond(
        ErrorPage(status, status == 404 ? "No such file: " + path : info.error().message, page.who.visitor));
  }
  if (info->is_dir) {
    http::Response moved = ErrorPage(302, "A folder.", page.who.visitor);
    moved.Header("Location", page.url + "/tree/" + PercentEncode(page.rev) + "/" + UrlPath(path));
    return ex->Respond(std::move(moved));
  }
  View v = BaseView(page);
  v.set("crumbs", Crumbs(path, true));
  v.set("name", path.substr(path.rfind('/') + 1));
  v.set("size", HumanSize(info->size));
  v.set("kind", KindOf(*info));
  if (info->lfs) v.set("sha256", info->lfs->sha256);
  v.set("download", FileUrl(ctx, page, path));
  auto text = ReadHead(ctx, page.repo, *info, kMaxBlobShown);
  const bool cut = info->size > kMaxBlobShown;
  if (text && LooksLikeText(*text, cut)) {
    if (!text->empty()) v.set("text", *text);
    if (cut) v.set("cut", HumanSize(kMaxBlobShown));
  } else {
    View why;
    why.set("why", std::string(text ? "not text" : "not readable here"));
    v.set("binary", why);
  }
  const std::string title = hub::RepoPath(page.repo.id()) + " · " + path;
  ex->Respond(RepoPageAnswer(ctx, page, "files", title, Render("blob.html", v)));
}

}  // namespace

void RegisterRepoPages(const std::shared_ptr<const PageContext>& ctx) {
  auto& r = ctx->server.router();
  for (const std::string repo : {"/{types}/{ns}/{name}", "/{ns}/{name}"}) {
    r.Handle(Verb::get, repo + "/tree/{rev}", http::RouteOptions().Name("page_tree"),
             RepoPageHandler(ctx, &RenderTree));
    r.Handle(Verb::get, repo + "/tree/{rev}/{path...}", http::RouteOptions().Name("page_tree"),
             RepoPageHandler(ctx, &RenderTree));
    r.Handle(Verb::get, repo + "/blob/{rev}/{path...}", http::RouteOptions().Name("page_blob"),
             RepoPageHandler(ctx, &RenderBlob));
  }
  r.Handle(Verb::get, "/{types}/{ns}/{name}", http::RouteOptions().Name("page_repo"),
           RepoPageHandler(ctx, &RenderCard));
  r.Handle(Verb::get, "/{ns}/{name}", http::RouteOptions().Name("page_repo"),
           RepoPageHandler(ctx, &RenderCard));
}

}  // namespace cairn::web
