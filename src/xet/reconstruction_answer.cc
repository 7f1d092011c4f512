#include "xet/reconstruction_answer.h"

#include <boost/json.hpp>
#include <unordered_map>

#include "xet/hashing.h"
#include "xet/xorb.h"

namespace cairn::xet {
namespace {

namespace json = boost::json;

Error BadAnswer(const std::string& why) {
  return Malformed("the reconstruction answer is not what the protocol says: " + why);
}

uint64_t U64(const json::value* v) {
  if (v == nullptr) return 0;
  if (v->is_uint64()) return v->get_uint64();
  if (v->is_int64() && v->get_int64() >= 0) return static_cast<uint64_t>(v->get_int64());
  return 0;
}

// start/end of a {"start","end"} object.
std::pair<uint64_t, uint64_t> Span(const json::value* v) {
  const json::object* o = v ? v->if_object() : nullptr;
  if (o == nullptr) return {0, 0};
  return {U64(o->if_contains("start")), U64(o->if_contains("end"))};
}

}  // namespace

Result<ParsedReconstruction> ParseReconstruction(const std::string& body, bool v2) {
  boost::system::error_code ec;
  const json::value doc = json::parse(body, ec);
  const json::object* root = ec ? nullptr : doc.if_object();
  if (root == nullptr) return BadAnswer("not a JSON object");
  ParsedReconstruction plan;
  plan.offset_into_first = U64(root->if_contains("offset_into_first_range"));
  const json::array* terms = root->if_contains("terms") ? root->at("terms").if_array() : nullptr;
  if (terms == nullptr) return BadAnswer("no terms");
  for (const auto& t : *terms) {
    const json::object* o = t.if_object();
    const json::string* h = o && o->if_contains("hash") ? o->at("hash").if_string() : nullptr;
    if (h == nullptr) return BadAnswer("a term without a hash");
    const auto [cs, ce] = Span(o->if_contains("range"));
    if (ce <= cs || ce > UINT32_MAX) return BadAnswer("a term with an empty chunk range");
    plan.terms.push_back({std::string(*h), static_cast<uint32_t>(cs), static_cast<uint32_t>(ce),
                          U64(o->if_contains("unpacked_length")), 0});
  }
  const char* key = v2 ? "xorbs" : "fetch_info";
  const json::object* xorbs = root->if_contains(key) ? root->at(key).if_object() : nullptr;
  if (xorbs == nullptr) return BadAnswer(std::string("no ") + key);
  for (const auto& [xorb, entries] : *xorbs) {
    const json::array* list = entries.if_array();
    if (list == nullptr) return BadAnswer("a xorb's fetches are not a list");
    for (const auto& e : *list) {
      const json::object* o = e.if_object();
      const json::string* url = o && o->if_contains("url") ? o->at("url").if_string() : nullptr;
      if (url == nullptr) return BadAnswer("a fetch without a URL");
      if (v2) {
        const json::array* ranges = o->if_contains("ranges") ? o->at("ranges").if_array() : nullptr;
        if (ranges == nullptr) return BadAnswer("a v2 fetch without ranges");
        for (const auto& r : *ranges) {
          const json::object* ro = r.if_object();
          if (ro == nullptr) return BadAnswer("a v2 range is not an object");
          const auto [cs, ce] = Span(ro->if_contains("chunks"));
          const auto [bs, be] = Span(ro->if_contains("bytes"));
          plan.fetches.push_back({std::string(xorb), std::string(*url), static_cast<uint32_t>(cs),
                                  static_cast<uint32_t>(ce), bs, be});
        }
      } else {
        const auto [cs, ce] = Span(o->if_contains("range"));
        const auto [bs, be] = Span(o->if_contains("url_range"));
        plan.fetches.push_back({std::string(xorb), std::string(*url), static_cast<uint32_t>(cs),
                                static_cast<uint32_t>(ce), bs, be});
      }
    }
  }
  for (const auto& f : plan.fetches)
    if (f.ce <= f.cs || f.last < f.first) return BadAnswer("an empty fetch range");
  // Each term's chunks lie in one fetch of its xorb (§5.2).
  std::unordered_map<std::string, std::vector<size_t>> by_xorb;
  for (size_t i = 0; i < plan.fetches.size(); ++i) by_xorb[plan.fetches[i].xorb].push_back(i);
  for (auto& t : plan.terms) {
    bool found = false;
    for (size_t i : by_xorb[t.xorb]) {
      if (plan.fetches[i].cs <= t.cs && t.ce <= plan.fetches[i].ce) {
        t.fetch = i;
        found = true;
        break;
      }
    }
    if (!found) return BadAnswer("a term of xorb " + t.xorb + " is in none of its fetches");
  }
  return plan;
}

Result<DecodedFetch> DecodeFetch(const ParsedReconstruction::Fetch& f, std::span<const uint8_t> body) {
  if (body.size() != f.last - f.first + 1) {
    return Inconsistent("xorb " + f.xorb + " bytes " + std::to_string(f.first) + "-" +
                        std::to_string(f.last) + " came back as " + std::to_string(body.size()) + " bytes");
  }
  thread_local ChunkDecoder decoder;
  DecodedFetch out;
  const uint8_t* p = body.data();
  size_t at = 0;
  for (uint32_t c = f.cs; c < f.ce; ++c) {
    auto chunk = StoredChunk::Parse({p + at, body.size() - at});
    if (!chunk)
      return Inconsistent("xorb " + f.xorb + " chunk " + std::to_string(c) + ": " + chunk.error().message);
    const size_t start = out.bytes.size();
    out.bytes.resize(start + chunk->header.uncompressed_length);
    const std::span<uint8_t> into(out.bytes.data() + start, chunk->header.uncompressed_length);
    if (auto st = decoder.Decode(chunk->header, chunk->payload, into); !st)
      return Inconsistent("xorb " + f.xorb + " chunk " + std::to_string(c) + ": " + st.error().message);
    at += chunk->stored_size();
    out.ends.push_back(out.bytes.size());
    out.hashes.push_back(ChunkHashOf(into));
  }
  if (at != body.size()) return Inconsistent("xorb " + f.xorb + ": bytes left over after its chunks");
  return out;
}

}  // namespace cairn::xet
