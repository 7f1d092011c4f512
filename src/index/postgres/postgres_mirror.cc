// The PostgreSQL backend's mirror slice (index.h's MirrorIndex), one statement per call: a lease's upsert
// condition is checked on the newest row (READ COMMITTED), so of two nodes taking a lapsed lease at once one
// gets it; a read's upsert keeps the later time.
#include <string>

#include "index/postgres/postgres_index.h"
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
constexpr pg::Statement kLeaseHolder{
    "lease_holder", "SELECT holder FROM leases WHERE name = $1::text AND expires > $2::int8"};
constexpr pg::Statement kNoteMirrorRead{"note_mirror_read", R"sql(
INSERT INTO mirror_reads(repo, last_read)
SELECT $1::int8, $2::int8 WHERE EXISTS (SELECT 1 FROM repos WHERE id = $1::int8)
ON CONFLICT (repo) DO UPDATE SET last_read = GREATEST(mirror_reads.last_read, EXCLUDED.last_read)
RETURNING repo)sql"};
constexpr pg::Statement kListMirrorReads{"list_mirror_reads",
                                         "SELECT repo, last_read FROM mirror_reads ORDER BY last_read, repo"};

}  // namespace

Result<bool> PostgresIndex::TakeLease(std::string_view name, std::string_view holder, int64_t now,
                                      int64_t expires) {
  if (auto st = CheckLeaseNames(name, holder); !st.ok()) return st.error();
  auto rows = Query(kTakeLease, pg::Params().Text(name).Text(holder).Int8(now).Int8(expires));
  if (!rows.ok()) return rows.error();
  return rows->size() == 1;
}

Status PostgresIndex::DropLease(std::string_view name, std::string_view holder) {
  if (auto st = CheckLeaseNames(name, holder); !st.ok()) return st;
  auto rows = Query(kDropLease, pg::Params().Text(name).Text(holder));
  if (!rows.ok()) return rows.error();
  return Ok{};
}

Result<std::optional<std::string>> PostgresIndex::LeaseHolder(std::string_view name, int64_t now) {
  if (auto st = CheckLeaseName(name); !st.ok()) return st.error();
  auto rows = Query(kLeaseHolder, pg::Params().Text(name).Int8(now));
  if (!rows.ok()) return rows.error();
  if (rows->size() == 0) return std::optional<std::string>();
  return std::optional<std::string>(std::string(rows->Text(0, 0)));
}

Status PostgresIndex::NoteMirrorRead(int64_t repo, int64_t at) {
  auto rows = Query(kNoteMirrorRead, pg::Params().Int8(repo).Int8(at));
  if (!rows.ok()) return rows.error();
  if (rows->size() == 0) return NotFound("no repository " + std::to_string(repo));
  return Ok{};
}

Result<std::vector<MirrorRead>> PostgresIndex::ListMirrorReads() {
  auto rows = Query(kListMirrorReads, pg::Params());
  if (!rows.ok()) return rows.error();
  std::vector<MirrorRead> out;
  for (int i = 0; i < rows->size(); ++i)
    out.push_back(MirrorRead{.repo = rows->Int8(i, 0), .last_read = rows->Int8(i, 1)});
  return out;
}

}  // namespace cairn::index
