#include "gc/scheduler.h"

#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <unistd.h>

#include <utility>

namespace cairn::gc {

Scheduler::Scheduler(index::CasIndex& cas, index::RepoIndex& repos, index::GcIndex& gc,
                     store::BlobStore& store, GcOptions options, std::chrono::seconds interval)
    : collector_(cas, repos, gc, store,
                 [&] {
                   // Stopping cuts a run short at its next step: what it leaves, the next run finishes.
                   GcOptions o = std::move(options);
                   o.hook = [this](std::string_view) -> Status {
                     std::lock_guard lock(mu_);
                     if (stop_) return Unavailable("the server is stopping");
                     return Ok{};
                   };
                   o.pause = [this](std::chrono::nanoseconds wait) -> Status {
                     std::unique_lock lock(mu_);
                     if (cv_.wait_for(lock, wait, [this] { return stop_; }))
                       return Unavailable("the server is stopping");
                     return Ok{};
                   };
                   return o;
                 }()),
      interval_(interval),
      thread_([this] { Run(); }) {}

Scheduler::~Scheduler() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::optional<GcReport> Scheduler::last() const {
  std::lock_guard lock(mu_);
  return last_;
}

void Scheduler::Run() {
  // Background work: a mark reads every file's terms and would otherwise take a core from the answers (the
  // reconstruction p99 tripled under a mark of 10^6 files on 2 cores; BENCHMARKS.md).
  (void)::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), kNice);  // Linux: this thread only
  std::unique_lock lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, interval_, [this] { return stop_; });
    if (stop_) return;
    lock.unlock();
    auto report = collector_.Run();
    lock.lock();
    if (stop_) return;
    ++runs_;
    if (!report) {
      ++failures_;
      spdlog::error("gc: the run failed (the next one resumes it): {}", report.error().message);
      continue;
    }
    reclaimed_bytes_ += report->reclaimed_bytes;
    spdlog::info(
        "gc: {} files, {} xorbs; {} newly unreferenced; {} quarantined bytes; freed {} files, {} xorbs, "
        "{} bytes in {:.1f} s",
        report->files, report->xorbs, report->newly_quarantined, report->quarantined_bytes,
        report->swept_files, report->swept_xorbs + report->resumed_xorbs, report->reclaimed_bytes,
        report->seconds);
    last_ = *report;
  }
}

}  // namespace cairn::gc
