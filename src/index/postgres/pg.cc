#include "index/postgres/pg.h"

#include <endian.h>
#include <libpq-fe.h>

#include <cstring>
#include <functional>
#include <utility>

#include "index/failures.h"

namespace cairn::index::pg {

namespace {

// Type OIDs of the binary array headers (pg_type.dat; stable since PostgreSQL 7).
constexpr uint32_t kBoolOid = 16;
constexpr uint32_t kByteaOid = 17;
constexpr uint32_t kInt8Oid = 20;
constexpr uint32_t kTextOid = 25;

void PutBe32(std::string& out, uint32_t v) {
  const uint32_t be = htobe32(v);
  out.append(reinterpret_cast<const char*>(&be), 4);
}

void PutBe64(std::string& out, uint64_t v) {
  const uint64_t be = htobe64(v);
  out.append(reinterpret_cast<const char*>(&be), 8);
}

std::string_view SqlState(const PGresult* r) {
  const char* s = r != nullptr ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
  return s != nullptr ? std::string_view(s) : std::string_view();
}

// Connection-level trouble: the server went away, is shutting down or starting, or is full.
bool UnavailableState(std::string_view state) {
  return state.starts_with("08") || state == "57P01" || state == "57P02" || state == "57P03" ||
         state == "53300";
}

// libpq's messages end in a newline and may span lines ("...failed: Connection refused\n\tIs the server
// running..."): one line for logs and JSON error bodies.
std::string OneLine(const std::string& msg) {
  std::string out;
  out.reserve(msg.size());
  for (char ch : msg) {
    const bool space = ch == '\n' || ch == '\t' || ch == ' ';
    if (space && (out.empty() || out.back() == ' ')) continue;
    out.push_back(space ? ' ' : ch);
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

}  // namespace

// ---- Params

Params& Params::Add(std::string bytes) {
  values_.emplace_back(std::move(bytes));
  return *this;
}

Params& Params::Bytea(std::span<const uint8_t> b) {
  return Add(std::string(reinterpret_cast<const char*>(b.data()), b.size()));
}

Params& Params::Int8(int64_t v) {
  std::string s;
  PutBe64(s, static_cast<uint64_t>(v));
  return Add(std::move(s));
}

Params& Params::Bool(bool v) {
  return Add(std::string(1, v ? '\1' : '\0'));
}

Params& Params::Text(std::string_view t) {
  return Add(std::string(t));
}

Params& Params::Null() {
  values_.emplace_back(std::nullopt);
  return *this;
}

// The binary array format (array_send): ndim, has-nulls flag, element type, then per dimension its length
// and lower bound, then each element as a length (-1: NULL) and its bytes. `put` appends element i, length
// included, and says whether it was NULL.
Params& Params::Array(uint32_t element_oid, size_t n, const std::function<bool(std::string&, size_t)>& put) {
  std::string s;
  PutBe32(s, n == 0 ? 0 : 1);
  const size_t flags_at = s.size();
  PutBe32(s, 0);
  PutBe32(s, element_oid);
  if (n > 0) {
    PutBe32(s, static_cast<uint32_t>(n));
    PutBe32(s, 1);
  }
  bool nulls = false;
  for (size_t i = 0; i < n; ++i) nulls |= put(s, i);
  if (nulls) s[flags_at + 3] = 1;
  return Add(std::move(s));
}

Params& Params::ByteaArray(std::span<const std::optional<std::span<const uint8_t>>> items) {
  return Array(kByteaOid, items.size(), [&](std::string& s, size_t i) {
    if (!items[i]) {
      PutBe32(s, 0xffffffffU);
      return true;
    }
    PutBe32(s, static_cast<uint32_t>(items[i]->size()));
    s.append(reinterpret_cast<const char*>(items[i]->data()), items[i]->size());
    return false;
  });
}

Params& Params::HashArray(std::span<const xet::Hash> items) {
  return Array(kByteaOid, items.size(), [&](std::string& s, size_t i) {
    PutBe32(s, 32);
    s.append(reinterpret_cast<const char*>(items[i].bytes.data()), 32);
    return false;
  });
}

Params& Params::Int8Array(std::span<const int64_t> items) {
  return Array(kInt8Oid, items.size(), [&](std::string& s, size_t i) {
    PutBe32(s, 8);
    PutBe64(s, static_cast<uint64_t>(items[i]));
    return false;
  });
}

Params& Params::Int8Array(std::span<const std::optional<int64_t>> items) {
  return Array(kInt8Oid, items.size(), [&](std::string& s, size_t i) {
    if (!items[i]) {
      PutBe32(s, 0xffffffffU);
      return true;
    }
    PutBe32(s, 8);
    PutBe64(s, static_cast<uint64_t>(*items[i]));
    return false;
  });
}

Params& Params::BoolArray(const std::vector<bool>& items) {
  return Array(kBoolOid, items.size(), [&](std::string& s, size_t i) {
    PutBe32(s, 1);
    s.push_back(items[i] ? '\1' : '\0');
    return false;
  });
}

Params& Params::TextArray(std::span<const std::string> items) {
  return Array(kTextOid, items.size(), [&](std::string& s, size_t i) {
    PutBe32(s, static_cast<uint32_t>(items[i].size()));
    s.append(items[i]);
    return false;
  });
}

std::vector<const char*> Params::values() const {
  std::vector<const char*> v;
  v.reserve(values_.size());
  for (const auto& x : values_) v.push_back(x ? x->data() : nullptr);
  return v;
}

std::vector<int> Params::lengths() const {
  std::vector<int> v;
  v.reserve(values_.size());
  for (const auto& x : values_) v.push_back(x ? static_cast<int>(x->size()) : 0);
  return v;
}

// ---- Rows

Rows::~Rows() {
  if (r_ != nullptr) PQclear(r_);
}

Rows& Rows::operator=(Rows&& o) noexcept {
  if (this != &o) {
    if (r_ != nullptr) PQclear(r_);
    r_ = std::exchange(o.r_, nullptr);
  }
  return *this;
}

int Rows::size() const {
  return r_ != nullptr ? PQntuples(r_) : 0;
}

bool Rows::IsNull(int row, int col) const {
  return PQgetisnull(r_, row, col) != 0;
}

std::span<const uint8_t> Rows::Bytes(int row, int col) const {
  return {reinterpret_cast<const uint8_t*>(PQgetvalue(r_, row, col)),
          static_cast<size_t>(PQgetlength(r_, row, col))};
}

std::string_view Rows::Text(int row, int col) const {
  return {PQgetvalue(r_, row, col), static_cast<size_t>(PQgetlength(r_, row, col))};
}

int64_t Rows::Int8(int row, int col) const {
  const auto b = Bytes(row, col);
  if (b.size() != 8) return 0;
  uint64_t be = 0;
  std::memcpy(&be, b.data(), 8);
  return static_cast<int64_t>(be64toh(be));
}

bool Rows::Bool(int row, int col) const {
  const auto b = Bytes(row, col);
  return b.size() == 1 && b[0] != 0;
}

std::optional<xet::Hash> Rows::Hash(int row, int col) const {
  const auto b = Bytes(row, col);
  if (b.size() != 32) return std::nullopt;
  return xet::Hash::FromBytes(b.data());
}

// ---- Conn

Result<std::unique_ptr<Conn>> Conn::Connect(const std::string& conninfo) {
  // Defaults first; the URI (expanded from dbname) overrides them where it sets them.
  const char* const keys[] = {"connect_timeout", "application_name", "dbname", nullptr};
  const char* const values[] = {"10", "cairn", conninfo.c_str(), nullptr};
  std::string msg;
  for (int attempt = 0; attempt < 2; ++attempt) {
    PGconn* c = PQconnectdbParams(keys, values, /*expand_dbname=*/1);
    if (c == nullptr) return IoError("postgres: out of memory");
    if (PQstatus(c) == CONNECTION_OK) {
      // Notices ("relation already exists, skipping") are not errors; libpq would print them to stderr.
      PQsetNoticeProcessor(
          c, [](void*, const char*) {}, nullptr);
      return std::unique_ptr<Conn>(new Conn(c));
    }
    msg = PQerrorMessage(c);
    PQfinish(c);
    msg = OneLine(msg);
    msg.insert(0, "postgres: cannot connect to " + RedactedUri(conninfo) + ": ");
    // A server that does not answer (or is starting or stopping) may come back: unavailable. One that
    // answers is asked again (it may have finished starting meanwhile); refusing twice, it will not change.
    const PGPing ping = PQpingParams(keys, values, 1);
    if (ping == PQPING_NO_RESPONSE || ping == PQPING_REJECT) return Unavailable(std::move(msg));
  }
  return IoError(std::move(msg));
}

Conn::~Conn() {
  PQfinish(c_);
}

bool Conn::broken() const {
  return PQstatus(c_) != CONNECTION_OK;
}

Error Conn::ErrorOf(const PGresult* r, std::string_view what) const {
  std::string msg = r != nullptr ? PQresultErrorMessage(r) : "";
  if (msg.empty()) msg = PQerrorMessage(c_);
  msg = OneLine(msg);
  msg = "postgres: " + std::string(what) + ": " + msg;
  const std::string_view state = SqlState(r);
  // cairn's own refusals (migrations 11, 15, 16), worded as SQLite words them (failures.h): a write named a
  // xorb the garbage collector claimed or deleted, passed a quota, or found a file a compaction read changed.
  if (state == "CR001") return NamedBeingDeleted();
  if (state == "CR002") return NamedXorbNotStored();
  if (state == "CR003") return QuotaHasNoRoom();
  if (state == "CR004") return FileChangedSinceCompaction();
  if (broken() || UnavailableState(state)) return Unavailable(std::move(msg));
  if (state.starts_with("23")) return Inconsistent(std::move(msg));
  return IoError(std::move(msg));
}

bool Conn::RetryableResult(const PGresult* r) const {
  const std::string_view state = SqlState(r);
  return state == "40001" || state == "40P01";
}

Result<Rows> Conn::Exec(const std::string& sql) {
  Rows rows(PQexec(c_, sql.c_str()));
  const PGresult* r = rows.raw();
  const ExecStatusType st = r != nullptr ? PQresultStatus(r) : PGRES_FATAL_ERROR;
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) return ErrorOf(r, "exec");
  return rows;
}

Result<Rows> Conn::Query(const std::string& sql, const Params& p) {
  const auto values = p.values();
  const auto lengths = p.lengths();
  const auto formats = p.formats();
  Rows rows(PQexecParams(c_, sql.c_str(), p.count(), nullptr, values.data(), lengths.data(), formats.data(),
                         /*resultFormat=*/1));
  const PGresult* r = rows.raw();
  const ExecStatusType st = r != nullptr ? PQresultStatus(r) : PGRES_FATAL_ERROR;
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) return ErrorOf(r, "query");
  return rows;
}

Status Conn::Prepare(const Statement& s) {
  if (prepared_.contains(s.name)) return Ok{};
  const Rows r(PQprepare(c_, s.name, s.sql, 0, nullptr));
  const PGresult* raw = r.raw();
  if (raw == nullptr || PQresultStatus(raw) != PGRES_COMMAND_OK)
    return ErrorOf(raw, std::string("prepare ") + s.name);
  prepared_.insert(s.name);
  return Ok{};
}

Result<Rows> Conn::Run(const Statement& s, const Params& p) {
  if (auto st = Prepare(s); !st.ok()) return st.error();
  const auto values = p.values();
  const auto lengths = p.lengths();
  const auto formats = p.formats();
  PGresult* r = PQexecPrepared(c_, s.name, p.count(), values.data(), lengths.data(), formats.data(),
                               /*resultFormat=*/1);
  Rows rows(r);
  const ExecStatusType st = r != nullptr ? PQresultStatus(r) : PGRES_FATAL_ERROR;
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) return ErrorOf(r, s.name);
  return rows;
}

void Conn::DrainToSync() {
  for (int guard = 0; guard < 1'000'000 && !broken(); ++guard) {
    PGresult* r = PQgetResult(c_);
    if (r == nullptr) continue;
    const bool sync = PQresultStatus(r) == PGRES_PIPELINE_SYNC;
    PQclear(r);
    if (sync) return;
  }
}

BasicResult<std::vector<Rows>, Conn::BatchFailure> Conn::RunBatch(std::span<const BatchItem> items) {
  const auto link_failure = [&](std::string_view what) {
    return BatchFailure{ErrorOf(nullptr, what), items.size(), false};
  };
  for (const auto& item : items) {
    if (auto st = Prepare(*item.statement); !st.ok()) return BatchFailure{st.error(), items.size(), false};
  }
  if (PQenterPipelineMode(c_) != 1) return link_failure("enter pipeline mode");
  bool sent = PQsendQueryParams(c_, "BEGIN ISOLATION LEVEL READ COMMITTED", 0, nullptr, nullptr, nullptr,
                                nullptr, 1) == 1;
  for (size_t i = 0; sent && i < items.size(); ++i) {
    const auto values = items[i].params->values();
    const auto lengths = items[i].params->lengths();
    const auto formats = items[i].params->formats();
    sent = PQsendQueryPrepared(c_, items[i].statement->name, items[i].params->count(), values.data(),
                               lengths.data(), formats.data(), 1) == 1;
  }
  sent = sent && PQsendQueryParams(c_, "COMMIT", 0, nullptr, nullptr, nullptr, nullptr, 1) == 1;
  sent = sent && PQpipelineSync(c_) == 1;
  if (!sent) return link_failure("send batch");

  // Results: BEGIN, each item, COMMIT; each followed by a null; then the sync.
  std::vector<Rows> out;
  out.reserve(items.size());
  std::optional<BatchFailure> failure;
  for (size_t k = 0; k < items.size() + 2; ++k) {
    Rows owned(PQgetResult(c_));
    const PGresult* r = owned.raw();
    if (r == nullptr) return link_failure("read batch results");
    const ExecStatusType st = PQresultStatus(r);
    const size_t item = k == 0 ? items.size() : k - 1;  // BEGIN and COMMIT report as items.size()
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK && st != PGRES_PIPELINE_ABORTED && !failure) {
      failure = BatchFailure{ErrorOf(r, k == 0                  ? "begin"
                                        : k == items.size() + 1 ? "commit"
                                                                : items[k - 1].statement->name),
                             std::min(item, items.size()), RetryableResult(r)};
    }
    if (k >= 1 && k <= items.size()) out.push_back(std::move(owned));
    if (PGresult* extra = PQgetResult(c_); extra != nullptr) {  // one result per command
      PQclear(extra);
      return link_failure("read batch results");
    }
    if (broken()) return link_failure("read batch results");
  }
  {
    PGresult* r = PQgetResult(c_);
    const bool sync = r != nullptr && PQresultStatus(r) == PGRES_PIPELINE_SYNC;
    if (r != nullptr) PQclear(r);
    if (!sync) {
      DrainToSync();
      if (broken()) return link_failure("read batch sync");
    }
  }
  if (PQexitPipelineMode(c_) != 1) return link_failure("exit pipeline mode");
  if (PQtransactionStatus(c_) != PQTRANS_IDLE) {
    PGresult* r = PQexec(c_, "ROLLBACK");
    if (r != nullptr) PQclear(r);
  }
  if (failure) return *failure;
  return out;
}

Status CheckUri(const std::string& uri) {
  char* err = nullptr;
  PQconninfoOption* opts = PQconninfoParse(uri.c_str(), &err);
  if (opts == nullptr) {
    std::string msg = err != nullptr ? err : "out of memory";
    PQfreemem(err);
    msg = OneLine(msg);
    return Malformed("index: not a PostgreSQL URI (" + RedactedUri(uri) + "): " + msg);
  }
  PQconninfoFree(opts);
  return Ok{};
}

std::string RedactedUri(std::string_view uri) {
  // postgres://user:password@host/... → postgres://user:***@host/...
  const size_t scheme = uri.find("://");
  if (scheme != std::string_view::npos) {
    const size_t start = scheme + 3;
    const size_t at = uri.find('@', start);
    const size_t slash = uri.find('/', start);
    if (at != std::string_view::npos && (slash == std::string_view::npos || at < slash)) {
      const size_t colon = uri.find(':', start);
      if (colon != std::string_view::npos && colon < at) {
        return std::string(uri.substr(0, colon + 1)) + "***" + std::string(uri.substr(at));
      }
    }
    // A password in the query string (?password=...).
    const size_t pw = uri.find("password=");
    if (pw != std::string_view::npos) {
      const size_t end = uri.find('&', pw);
      return std::string(uri.substr(0, pw)) + "password=***" +
             (end == std::string_view::npos ? "" : std::string(uri.substr(end)));
    }
    return std::string(uri);
  }
  // key=value form.
  const size_t pw = uri.find("password=");
  if (pw == std::string_view::npos) return std::string(uri);
  const size_t end = uri.find(' ', pw);
  return std::string(uri.substr(0, pw)) + "password=***" +
         (end == std::string_view::npos ? "" : std::string(uri.substr(end)));
}

}  // namespace cairn::index::pg
