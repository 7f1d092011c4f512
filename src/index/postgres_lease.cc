// The PostgreSQL backend's lease slice (index.h's LeaseIndex), one statement per call: the upsert's condition
// is checked on the newest row (READ COMMITTED), so of two nodes taking a lapsed lease at once one gets it.
#include <string>

#include "index/postgres_index.h"
#include "index/records.h"

namespace cairn::index {

namespace {

constexpr pg::Statement kTakeLease{"take_lease", R"sql(
INSERT INTO leases(name, holder, expires) VALUES ($1::text, $2::text, $4::int8)
ON CONFLICT (name) DO UPDATE SET holder = EXCLUDED.holder, expires = EXCLUDED.expires
WHERE leases.holder = EXCLUDED.holder OR leases.expires <= $3::int8
RETURNING name)sql"};
constexpr pg::Statement kDropLease{"drop_lease",
                                   "DELETE FROM leases WHERE name = $1::text AND holder = $2::text"};

}  // namespace

xet::Result<bool> PostgresIndex::TakeLease(std::string_view name, std::string_view holder, int64_t now,
                                           int64_t expires) {
  if (auto st = CheckLeaseNames(name, holder); !st.ok()) return st.error();
  auto rows = Query(kTakeLease, pg::Params().Text(name).Text(holder).Int8(now).Int8(expires));
  if (!rows.ok()) return rows.error();
  return rows->size() == 1;
}

xet::Status PostgresIndex::DropLease(std::string_view name, std::string_view holder) {
  if (auto st = CheckLeaseNames(name, holder); !st.ok()) return st;
  auto rows = Query(kDropLease, pg::Params().Text(name).Text(holder));
  if (!rows.ok()) return rows.error();
  return xet::Ok{};
}

}  // namespace cairn::index
