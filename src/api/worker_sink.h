// A streamed request body handed to a writer on the worker pool in batches (the LFS uploads, a git push's
// spool). Owned by the server as the route's BodySink; `write` and `finish` run on workers, one at a time,
// in order.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "api/errors.h"
#include "common/error.h"
#include "http/handler.h"

namespace cairn::api {

// Streams a body into `write` on the worker pool and calls `finish` there once all of it is written. The body
// is read straight into batches of kBatch bytes: one batch is written on a worker while the next one is read
// (two in memory at most), so receiving overlaps the work and a worker is asked once per batch, not once per
// 64 KiB piece.
class WorkerSink final : public http::BodySink {
 public:
  using Write = std::function<Status(std::span<const uint8_t>)>;
  using Finish = std::function<void(const std::shared_ptr<http::Exchange>&)>;
  using Answer = std::function<http::Response(const Error&)>;
  static constexpr size_t kBatch = 4 << 20;

  // `answer` words a failure of `write` (or of the body) for the client.
  WorkerSink(std::shared_ptr<http::Exchange> ex, Write write, Finish finish, Answer answer)
      : s_(std::make_shared<State>()) {
    s_->ex = std::move(ex);
    s_->write = std::move(write);
    s_->finish = std::move(finish);
    s_->answer = std::move(answer);
    s_->batch.resize(kBatch);
  }

  // The body lands in the batch being gathered, in place.
  std::span<uint8_t> ReceiveBuffer() override { return {s_->batch.data() + s_->filled, kBatch - s_->filled}; }

  // On the connection's strand, as are OnEnd and the workers' completions: the state needs no lock.
  void OnData(std::span<const uint8_t> data, Next next) override {
    if (!s_->failed) return next(s_->failed.error());
    uint8_t* at = s_->batch.data() + s_->filled;
    if (data.data() != at) std::memcpy(at, data.data(), data.size());  // the server's buffer, not ours
    s_->filled += data.size();
    if (s_->filled < kBatch) return next(http::Ok{});
    if (s_->busy) {  // read on once the worker is done with the batch before
      s_->waiting = std::move(next);
      return;
    }
    Dispatch(s_);
    next(http::Ok{});
  }

  void OnEnd(std::shared_ptr<http::Exchange> ex) override {
    if (!s_->failed) return ex->Respond(s_->answer(s_->failed.error()));
    s_->end = std::move(ex);
    if (!s_->busy) Dispatch(s_);
  }

 private:
  struct State {
    std::shared_ptr<http::Exchange> ex;
    Write write;
    Finish finish;
    Answer answer;
    std::vector<uint8_t> batch;  // kBatch bytes, `filled` of them gathered
    size_t filled = 0;
    std::vector<uint8_t> spare;  // the batch a worker writes, then the next one to fill
    bool busy = false;           // a worker holds a batch
    Next waiting;                // the piece after a full batch, held while busy
    std::shared_ptr<http::Exchange> end;
    Status failed = Ok{};
  };

  // Hands the gathered batch to a worker (none busy); the last one also finishes.
  static void Dispatch(const std::shared_ptr<State>& s);

  std::shared_ptr<State> s_;
};

}  // namespace cairn::api
