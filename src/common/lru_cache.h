// A thread-safe LRU cache of immutable values, bounded by the bytes the values report. Values are shared
// (std::shared_ptr<const V>), so an entry evicted while a reader holds it stays alive for that reader.
// Thread-safety: every method may be called from any thread (one mutex; lookups are short).
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace cairn {

template <typename K, typename V, typename KeyHash>
class LruCache {
 public:
  explicit LruCache(size_t capacity_bytes) : capacity_(capacity_bytes) {}

  std::shared_ptr<const V> Get(const K& key) {
    std::lock_guard lock(mu_);
    auto it = map_.find(key);
    if (it == map_.end()) return nullptr;
    order_.splice(order_.begin(), order_, it->second);
    return it->second->value;
  }

  // Inserts (or refreshes) `key`. A value larger than the whole capacity is not cached.
  void Put(const K& key, std::shared_ptr<const V> value, size_t charge) {
    if (charge > capacity_) return;
    std::lock_guard lock(mu_);
    if (auto it = map_.find(key); it != map_.end()) {
      used_ -= it->second->charge;
      order_.erase(it->second);
      map_.erase(it);
    }
    order_.push_front({key, std::move(value), charge});
    map_.emplace(key, order_.begin());
    used_ += charge;
    while (used_ > capacity_) {
      used_ -= order_.back().charge;
      map_.erase(order_.back().key);
      order_.pop_back();
    }
  }

  // Forgets `key` (a record that was deleted). Another process's cache is its own.
  void Erase(const K& key) {
    std::lock_guard lock(mu_);
    auto it = map_.find(key);
    if (it == map_.end()) return;
    used_ -= it->second->charge;
    order_.erase(it->second);
    map_.erase(it);
  }

  size_t used_bytes() const {
    std::lock_guard lock(mu_);
    return used_;
  }

 private:
  struct Entry {
    K key;
    std::shared_ptr<const V> value;
    size_t charge;
  };
  const size_t capacity_;
  mutable std::mutex mu_;
  std::list<Entry> order_;  // most recently used first
  std::unordered_map<K, typename std::list<Entry>::iterator, KeyHash> map_;
  size_t used_ = 0;
};

}  // namespace cairn
