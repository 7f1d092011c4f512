#include "http/metrics.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace cairn::http {
namespace {

std::string Escape(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// `{a="x",b="y"}` plus an optional extra label (le=...); empty when there are no labels.
std::string LabelText(const std::vector<std::string>& names, const LabelValues& values,
                      const std::string& extra = {}) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < values.size(); ++i) {
    out += out.empty() ? "{" : ",";
    out += names[i] + "=\"" + Escape(values[i]) + "\"";
  }
  if (!extra.empty()) {
    out += out.empty() ? "{" : ",";
    out += extra;
  }
  if (!out.empty()) out += "}";
  return out;
}

std::string Number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{}", static_cast<int64_t>(v));
  return fmt::format("{}", v);
}

void Header(std::string& out, const std::string& name, const std::string& help, const char* type) {
  out += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

}  // namespace

CounterFamily::CounterFamily(std::string name, std::string help, std::vector<std::string> labels)
    : name_(std::move(name)), help_(std::move(help)), labels_(std::move(labels)) {}

void CounterFamily::Inc(const LabelValues& labels, double by) {
  std::lock_guard lock(mu_);
  values_[labels] += by;
}

double CounterFamily::Value(const LabelValues& labels) const {
  std::lock_guard lock(mu_);
  auto it = values_.find(labels);
  return it == values_.end() ? 0 : it->second;
}

void CounterFamily::Render(std::string& out) const {
  Header(out, name_, help_, "counter");
  std::lock_guard lock(mu_);
  for (const auto& [labels, v] : values_) out += name_ + LabelText(labels_, labels) + " " + Number(v) + "\n";
}

HistogramFamily::HistogramFamily(std::string name, std::string help, std::vector<std::string> labels,
                                 std::vector<double> bounds)
    : name_(std::move(name)),
      help_(std::move(help)),
      labels_(std::move(labels)),
      bounds_(std::move(bounds)) {}

void HistogramFamily::Observe(const LabelValues& labels, double value) {
  const auto bucket =
      static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin());
  std::lock_guard lock(mu_);
  Series& s = series_[labels];
  if (s.counts.empty()) s.counts.assign(bounds_.size() + 1, 0);
  ++s.counts[bucket];
  s.sum += value;
  ++s.count;
}

void HistogramFamily::Render(std::string& out) const {
  Header(out, name_, help_, "histogram");
  std::lock_guard lock(mu_);
  for (const auto& [labels, s] : series_) {
    uint64_t cumulative = 0;
    for (size_t i = 0; i <= bounds_.size(); ++i) {
      cumulative += s.counts[i];
      const std::string le = i < bounds_.size() ? Number(bounds_[i]) : "+Inf";
      out += name_ + "_bucket" + LabelText(labels_, labels, "le=\"" + le + "\"") + " " +
             std::to_string(cumulative) + "\n";
    }
    out += name_ + "_sum" + LabelText(labels_, labels) + " " + Number(s.sum) + "\n";
    out += name_ + "_count" + LabelText(labels_, labels) + " " + std::to_string(s.count) + "\n";
  }
}

CounterFamily& MetricsRegistry::Counter(const std::string& name, const std::string& help,
                                        std::vector<std::string> labels) {
  std::lock_guard lock(mu_);
  auto& slot = counters_[name];
  if (!slot) slot = std::make_unique<CounterFamily>(name, help, std::move(labels));
  return *slot;
}

HistogramFamily& MetricsRegistry::Histogram(const std::string& name, const std::string& help,
                                            std::vector<std::string> labels, std::vector<double> bounds) {
  std::lock_guard lock(mu_);
  auto& slot = histograms_[name];
  if (!slot) slot = std::make_unique<HistogramFamily>(name, help, std::move(labels), std::move(bounds));
  return *slot;
}

void MetricsRegistry::Gauge(const std::string& name, const std::string& help, std::function<double()> read) {
  std::lock_guard lock(mu_);
  gauges_[name] = GaugeEntry{help, std::move(read)};
}

void MetricsRegistry::GaugeFamily(const std::string& name, const std::string& help,
                                  std::vector<std::string> labels, std::function<GaugeSeries()> read) {
  std::lock_guard lock(mu_);
  gauge_families_[name] = GaugeFamilyEntry{help, std::move(labels), std::move(read)};
}

std::string MetricsRegistry::Render() const {
  std::string out;
  std::lock_guard lock(mu_);
  for (const auto& [name, c] : counters_) c->Render(out);
  for (const auto& [name, h] : histograms_) h->Render(out);
  for (const auto& [name, g] : gauges_) {
    Header(out, name, g.help, "gauge");
    out += name + " " + Number(g.read ? g.read() : 0) + "\n";
  }
  for (const auto& [name, g] : gauge_families_) {
    Header(out, name, g.help, "gauge");
    if (!g.read) continue;
    for (const auto& [labels, value] : g.read())
      out += name + LabelText(g.labels, labels) + " " + Number(value) + "\n";
  }
  return out;
}

std::vector<double> MetricsRegistry::LatencyBuckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}

}  // namespace cairn::http
