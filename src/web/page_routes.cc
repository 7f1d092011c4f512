#include "web/page_routes.h"

#include <memory>
#include <utility>

#include "web/page_context.h"

namespace cairn::web {

namespace {
constexpr size_t kKeptPageBytes = 32 << 20;  // rendered parts of repository pages (PageContext::kept)
}  // namespace

void RegisterPageRoutes(http::Server& server, hub::HubService& hub, files::FileService& files,
                        PageOptions options) {
  while (!options.public_url.empty() && options.public_url.back() == '/') options.public_url.pop_back();
  auto ctx = std::make_shared<PageContext>(PageContext{
      .server = server,
      .hub = hub,
      .files = files,
      .options = std::move(options),
      .tensors = std::make_shared<LruCache<hub::ObjectId, TensorCounts, hub::ObjectIdHash>>(4 << 20),
      .kept = std::make_shared<LruCache<std::string, PageContext::KeptPart, std::hash<std::string>>>(
          kKeptPageBytes)});
  server.router().Handle(http::Verb::get, StylesheetPath(), http::RouteOptions().Name("page_static"),
                         [](const std::shared_ptr<http::Exchange>& ex) { ex->Respond(StylesheetAnswer()); });
  // The most specific patterns first: the router takes the first route that matches.
  RegisterSignInPages(ctx);
  RegisterDevicePages(ctx);
  RegisterTokenPages(ctx);
  RegisterOperatorPages(ctx);
  RegisterBucketPages(ctx);
  RegisterHistoryPages(ctx);
  RegisterRepoPages(ctx);
  RegisterListPages(ctx);
}

}  // namespace cairn::web
