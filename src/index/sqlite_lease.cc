// The SQLite backend's lease slice (index.h's LeaseIndex): one row per name, taken by an upsert whose update
// applies only to the holder's own row or a lapsed one.
#include <string>

#include "index/records.h"
#include "index/sqlite_conn.h"
#include "index/sqlite_index.h"

namespace cairn::index {

namespace {

// ?1 name, ?2 holder, ?3 now, ?4 expires.
constexpr const char kTakeLease[] =
    "INSERT INTO leases(name, holder, expires) VALUES (?1, ?2, ?4) "
    "ON CONFLICT(name) DO UPDATE SET holder = excluded.holder, expires = excluded.expires "
    "WHERE leases.holder = excluded.holder OR leases.expires <= ?3";
constexpr const char kDropLease[] = "DELETE FROM leases WHERE name = ?1 AND holder = ?2";

}  // namespace

xet::Result<bool> SqliteIndex::TakeLease(std::string_view name, std::string_view holder, int64_t now,
                                         int64_t expires) {
  if (auto st = CheckLeaseNames(name, holder); !st.ok()) return st.error();
  bool taken = false;
  auto st = Write([&](Conn& c) -> xet::Status {
    auto s = c.Prepare(kTakeLease);
    if (!s.ok()) return s.error();
    s->Bind(1, name);
    s->Bind(2, holder);
    s->Bind(3, now);
    s->Bind(4, expires);
    if (auto run = c.Run(*s, "take lease"); !run.ok()) return run;
    taken = c.changes() == 1;
    return xet::Ok{};
  });
  if (!st.ok()) return st.error();
  return taken;
}

xet::Status SqliteIndex::DropLease(std::string_view name, std::string_view holder) {
  if (auto st = CheckLeaseNames(name, holder); !st.ok()) return st;
  return Write([&](Conn& c) -> xet::Status {
    auto s = c.Prepare(kDropLease);
    if (!s.ok()) return s.error();
    s->Bind(1, name);
    s->Bind(2, holder);
    return c.Run(*s, "drop lease");
  });
}

}  // namespace cairn::index
