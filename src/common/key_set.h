// Signing keys with ids: one kind's keys (token keys, URL keys), one of which signs (the current one) while
// every one of them verifies. Key ids are not secret (tokens and URLs carry them); the key material is.
//
// The key named kLegacyKeyId is the one cairn signed with before keys had ids: what it signs names no key,
// so that tokens and URLs made before an upgrade verify unchanged, and ones made after verify on an older
// cairn. Whatever names no key is checked against it.
//
// A KeySet is an immutable value: rotation builds a new one. Thread-safety: const methods, from any thread.
#pragma once

#include <algorithm>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace cairn {

inline constexpr std::string_view kLegacyKeyId = "legacy";

// Whether `id` may name a key: 1 to 64 of [A-Za-z0-9._-] (it travels in URLs and JWT headers unescaped).
inline bool ValidKeyId(std::string_view id) {
  return !id.empty() && id.size() <= 64 && std::all_of(id.begin(), id.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  });
}

template <typename Material>
class KeySet {
 public:
  struct Key {
    std::string id;
    Material material;
    // Whether what this key signs names it (every key but the legacy one).
    bool named() const { return id != kLegacyKeyId; }
    friend bool operator==(const Key&, const Key&) = default;
  };

  // nullopt unless `keys` is non-empty, its ids valid and distinct, and `current` one of them.
  static std::optional<KeySet> Make(std::vector<Key> keys, std::string_view current) {
    size_t at = keys.size();
    for (size_t i = 0; i < keys.size(); ++i) {
      if (!ValidKeyId(keys[i].id)) return std::nullopt;
      for (size_t j = 0; j < i; ++j)
        if (keys[j].id == keys[i].id) return std::nullopt;
      if (keys[i].id == current) at = i;
    }
    if (at == keys.size()) return std::nullopt;
    return KeySet(std::move(keys), at);
  }
  // One legacy key (a deployment that never rotated, and tests).
  static KeySet Single(Material material) {
    return KeySet({{std::string(kLegacyKeyId), std::move(material)}}, 0);
  }

  const Key& current() const { return keys_[current_]; }
  // The key a token or URL names; `id` empty (it names none): the legacy key. Null when there is none.
  const Key* Find(std::string_view id) const {
    if (id.empty()) id = kLegacyKeyId;
    for (const auto& k : keys_)
      if (k.id == id) return &k;
    return nullptr;
  }
  const std::vector<Key>& keys() const { return keys_; }

  // The same ids and current key, each key's material transformed by `f` (a secret's derived MAC key).
  template <typename F>
  auto Map(F f) const -> KeySet<decltype(f(std::declval<const Material&>()))> {
    using Derived = decltype(f(std::declval<const Material&>()));
    std::vector<typename KeySet<Derived>::Key> out;
    out.reserve(keys_.size());
    for (const auto& k : keys_) out.push_back({k.id, f(k.material)});
    return *KeySet<Derived>::Make(std::move(out), current().id);
  }

  friend bool operator==(const KeySet&, const KeySet&) = default;

 private:
  KeySet(std::vector<Key> keys, size_t current) : keys_(std::move(keys)), current_(current) {}

  std::vector<Key> keys_;
  size_t current_ = 0;
};

}  // namespace cairn
