#include "git/receive_pack.h"

#include "git/pkt_line.h"

namespace cairn::git {

namespace {

using hub::ObjectId;

constexpr std::string_view kCaps =
    "report-status delete-refs side-band-64k quiet atomic ofs-delta object-format=sha1 agent=cairn/1";
constexpr size_t kMaxCommands = 1000;

// A printable reason on one line (git prints it after "! [remote rejected]").
std::string OneLine(std::string_view s) {
  std::string out;
  for (const char c : s.substr(0, 500)) out.push_back(static_cast<unsigned char>(c) < 0x20 ? ' ' : c);
  return out;
}

}  // namespace

ReceivePack::ReceivePack(hub::HubService& hub, index::RepoIndex& index, hub::Repo repo,
                         std::vector<hub::RefInfo> refs, std::string head, PackLimits limits)
    : hub_(hub),
      index_(index),
      repo_(std::move(repo)),
      refs_(std::move(refs)),
      head_(std::move(head)),
      limits_(limits) {}

std::string ReceivePack::Advertise() const {
  std::string out;
  AppendPkt(out, "# service=git-receive-pack\n");
  AppendFlush(out);
  if (refs_.empty()) {
    AppendPkt(out, ObjectId{}.hex() + " capabilities^{}" + std::string(1, '\0') + std::string(kCaps) + "\n");
  }
  for (size_t i = 0; i < refs_.size(); ++i) {
    std::string line = refs_[i].target.hex() + " " + hub::FullRefName(refs_[i]);
    if (i == 0) line += std::string(1, '\0') + std::string(kCaps);
    AppendPkt(out, line + "\n");
  }
  AppendFlush(out);
  return out;
}

Result<std::string> ReceivePack::Serve(const hub::Caller& caller, std::string_view request) {
  // The commands: "old new ref" lines (the first with the client's capabilities after a NUL), a flush, then
  // the pack (none when every command deletes).
  PktReader reader(request);
  std::vector<hub::HubService::PushedRef> refs;
  bool side_band = false;
  size_t pack_at = request.size();
  for (;;) {
    auto pkt = reader.Next();
    if (!pkt.ok()) return pkt.error();
    if (!*pkt) return Malformed("receive-pack: the commands end before their flush");
    if ((*pkt)->kind == PktKind::kFlush) {
      pack_at = reader.position();
      break;
    }
    if ((*pkt)->kind != PktKind::kData) return Malformed("receive-pack: a delimiter among the commands");
    std::string_view line = Line((*pkt)->payload);
    if (line.starts_with("shallow ")) continue;  // a push from a shallow clone names its boundary
    if (const size_t nul = line.find('\0'); nul != std::string_view::npos) {
      const std::string_view caps = line.substr(nul + 1);
      side_band = caps.find("side-band-64k") != std::string_view::npos;
      line = line.substr(0, nul);
    }
    if (line.size() < 83 || line[40] != ' ' || line[81] != ' ') {
      return Malformed("receive-pack: a command is not \"old new ref\"");
    }
    auto old_id = ObjectId::FromHex(line.substr(0, 40));
    auto new_id = ObjectId::FromHex(line.substr(41, 40));
    if (!old_id || !new_id) return Malformed("receive-pack: a command's ids are not hex");
    if (refs.size() == kMaxCommands) return LimitExceeded("receive-pack: more than 1000 ref updates");
    hub::HubService::PushedRef r;
    r.name = std::string(line.substr(82));
    if (*old_id != ObjectId{}) r.old_id = *old_id;
    if (*new_id != ObjectId{}) r.new_id = *new_id;
    refs.push_back(std::move(r));
  }
  if (refs.empty()) return std::string();  // nothing to do: git sends only a flush
  const std::string_view pack = request.substr(pack_at);

  std::string report;
  std::vector<hub::RawObject> objects;
  std::optional<std::string> unpack_error;
  if (!pack.empty()) {
    const BaseLookup lookup = [&](const ObjectId& id) -> std::optional<hub::RawObject> {
      auto got =
          index_.GetRepoObjects(repo_.record.id, {std::vector<uint8_t>(id.bytes.begin(), id.bytes.end())});
      if (!got.ok() || !(*got)[0] || (*got)[0]->kind < 1 || (*got)[0]->kind > 3) return std::nullopt;
      return hub::RawObject{static_cast<hub::ObjectKind>((*got)[0]->kind), id, std::move((*got)[0]->data)};
    };
    auto read = ReadPack({reinterpret_cast<const uint8_t*>(pack.data()), pack.size()}, limits_, lookup);
    if (read.ok()) {
      objects = std::move(*read);
    } else {
      unpack_error = read.error().message;
    }
  }
  AppendPkt(report, unpack_error ? "unpack " + OneLine(*unpack_error) + "\n" : std::string("unpack ok\n"));
  if (unpack_error) {
    for (const auto& r : refs) AppendPkt(report, "ng " + r.name + " unpacker error\n");
  } else {
    auto applied = hub_.ApplyPush(caller, repo_, std::move(objects), refs);
    if (!applied.ok()) {
      if (ServerFault(applied.error())) {
        return Unavailable(applied.error().message);
      }
      for (const auto& r : refs)
        AppendPkt(report, "ng " + r.name + " " + OneLine(applied.error().message) + "\n");
    } else {
      for (size_t i = 0; i < refs.size(); ++i) {
        AppendPkt(report, (*applied)[i] ? "ng " + refs[i].name + " " + OneLine(*(*applied)[i]) + "\n"
                                        : "ok " + refs[i].name + "\n");
      }
    }
  }
  AppendFlush(report);
  if (!side_band) return report;
  std::string out;
  AppendSideBand(out, 1, report);
  AppendFlush(out);
  return out;
}

}  // namespace cairn::git
