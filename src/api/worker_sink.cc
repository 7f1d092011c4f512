#include "api/worker_sink.h"

#include <utility>

#include "api/errors.h"

namespace cairn::api {

void WorkerSink::Dispatch(const std::shared_ptr<State>& s) {
  s->busy = true;
  auto batch = std::make_shared<std::vector<uint8_t>>(std::move(s->batch));
  const size_t filled = std::exchange(s->filled, 0);
  s->batch = std::move(s->spare);
  s->batch.resize(kBatch);
  const bool last = s->end != nullptr;
  auto result = std::make_shared<Status>(Ok{});
  const bool queued = s->ex->Offload(
      [s, batch, filled, result, last] {
        if (filled > 0) *result = s->write({batch->data(), filled});
        if (last && *result) s->finish(s->end);
      },
      [s, batch, result, last] {
        s->busy = false;
        s->spare = std::move(*batch);
        if (!*result) {
          s->failed = *result;
          if (last) return s->end->Respond(s->answer(result->error()));
          if (s->waiting) std::exchange(s->waiting, nullptr)(result->error());
          return;
        }
        if (last) return;
        if (s->end) return Dispatch(s);  // the body ended while this batch was written
        if (s->waiting) {
          if (s->filled >= kBatch) Dispatch(s);
          std::exchange(s->waiting, nullptr)(http::Ok{});
        }
      });
  if (!queued) {  // answered 503 already
    s->busy = false;
    s->failed = Unavailable("the server is busy");
    if (s->waiting) std::exchange(s->waiting, nullptr)(Unavailable("the server is busy"));
  }
}

}  // namespace cairn::api
