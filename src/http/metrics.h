// Metrics in the Prometheus text exposition format (version 0.0.4): counters and histograms with labels, and
// gauges whose value a callback supplies when /metrics is scraped.
//
// Families are created once (usually at startup) and live as long as the registry; the references returned
// stay valid. Thread-safety: every method may be called from any thread. Gauge callbacks run on the scraping
// thread (an I/O thread): keep them cheap and non-blocking.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace cairn::http {

using LabelValues = std::vector<std::string>;  // in the order of the family's label names

class CounterFamily {
 public:
  CounterFamily(std::string name, std::string help, std::vector<std::string> labels);
  void Inc(const LabelValues& labels, double by = 1);
  double Value(const LabelValues& labels) const;
  void Render(std::string& out) const;

 private:
  const std::string name_, help_;
  const std::vector<std::string> labels_;
  mutable std::mutex mu_;
  std::map<LabelValues, double> values_;
};

class HistogramFamily {
 public:
  // `bounds`: ascending upper bounds of the buckets (the +Inf bucket is implicit).
  HistogramFamily(std::string name, std::string help, std::vector<std::string> labels,
                  std::vector<double> bounds);
  void Observe(const LabelValues& labels, double value);
  void Render(std::string& out) const;

 private:
  struct Series {
    std::vector<uint64_t> counts;  // per bucket, not cumulative
    double sum = 0;
    uint64_t count = 0;
  };
  const std::string name_, help_;
  const std::vector<std::string> labels_;
  const std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::map<LabelValues, Series> series_;
};

class MetricsRegistry {
 public:
  // Returns the family with this name, creating it on first use (later calls' help/labels are ignored).
  CounterFamily& Counter(const std::string& name, const std::string& help,
                         std::vector<std::string> labels = {});
  HistogramFamily& Histogram(const std::string& name, const std::string& help,
                             std::vector<std::string> labels, std::vector<double> bounds);
  // A gauge read at scrape time (e.g. stored xorbs, bytes, dedup ratio). Replaces a gauge of the same name.
  void Gauge(const std::string& name, const std::string& help, std::function<double()> read);
  // Gauges of one name, one series per label values, all read by one callback at scrape time (the quotas
  // of every namespace). Replaces a family of the same name.
  using GaugeSeries = std::vector<std::pair<LabelValues, double>>;
  void GaugeFamily(const std::string& name, const std::string& help, std::vector<std::string> labels,
                   std::function<GaugeSeries()> read);

  // The whole registry in the text exposition format.
  std::string Render() const;

  // Latency buckets in seconds, 1 ms .. 60 s.
  static std::vector<double> LatencyBuckets();

 private:
  struct GaugeEntry {
    std::string help;
    std::function<double()> read;
  };
  mutable std::mutex mu_;
  std::map<std::string, std::unique_ptr<CounterFamily>> counters_;
  std::map<std::string, std::unique_ptr<HistogramFamily>> histograms_;
  std::map<std::string, GaugeEntry> gauges_;
  struct GaugeFamilyEntry {
    std::string help;
    std::vector<std::string> labels;
    std::function<GaugeSeries()> read;
  };
  std::map<std::string, GaugeFamilyEntry> gauge_families_;
};

}  // namespace cairn::http
