// Who holds a large file's lease among the nodes sharing an index (index::MirrorIndex): the node's random
// name and the URL the other nodes reach it at (MirrorOptions::node_url), from which a node waiting on the
// lease relays the file's ranges. The index stores it as one string, the name, then a space and the URL when
// there is one; nodes read each other's, so that string never changes (at most 256 bytes: config.cc bounds
// the URL).
//
// Pure functions. Parse takes any string: one without a space is a name alone, and so is one whose URL is
// empty (no node writes either with a URL).
#pragma once

#include <string>
#include <string_view>

namespace cairn::mirror {

struct LeaseHolder {
  std::string node;  // random, without spaces
  std::string url;   // empty: none to relay from

  std::string Encode() const { return url.empty() ? node : node + " " + url; }

  static LeaseHolder Parse(std::string_view stored) {
    const size_t space = stored.find(' ');
    if (space == std::string_view::npos) return LeaseHolder{.node = std::string(stored), .url = {}};
    return LeaseHolder{.node = std::string(stored.substr(0, space)),
                       .url = std::string(stored.substr(space + 1))};
  }
};

}  // namespace cairn::mirror
