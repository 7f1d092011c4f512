#include "http/metrics.h"

#include <gtest/gtest.h>

namespace cairn::http {
namespace {

TEST(Metrics, RendersCountersHistogramsAndGauges) {
  MetricsRegistry m;
  auto& c = m.Counter("reqs_total", "Requests", {"route", "status"});
  c.Inc({"/a", "200"});
  c.Inc({"/a", "200"});
  c.Inc({"/b\"x", "404"}, 3);
  EXPECT_EQ(c.Value({"/a", "200"}), 2);
  auto& h = m.Histogram("lat_seconds", "Latency", {"route"}, {0.1, 1});
  h.Observe({"/a"}, 0.05);
  h.Observe({"/a"}, 0.5);
  h.Observe({"/a"}, 5);
  m.Gauge("stored_bytes", "Bytes stored", [] { return 1234.0; });
  m.Gauge("dedup_ratio", "Dedup ratio", [] { return 1.5; });
  const std::string text = m.Render();
  EXPECT_NE(text.find("# TYPE reqs_total counter"), std::string::npos);
  EXPECT_NE(text.find("reqs_total{route=\"/a\",status=\"200\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("reqs_total{route=\"/b\\\"x\",status=\"404\"} 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("lat_seconds_bucket{route=\"/a\",le=\"0.1\"} 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("lat_seconds_bucket{route=\"/a\",le=\"1\"} 2\n"), std::string::npos) << text;
  EXPECT_NE(text.find("lat_seconds_bucket{route=\"/a\",le=\"+Inf\"} 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("lat_seconds_count{route=\"/a\"} 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("# TYPE stored_bytes gauge\nstored_bytes 1234\n"), std::string::npos) << text;
  EXPECT_NE(text.find("dedup_ratio 1.5\n"), std::string::npos) << text;
  // Same name, same family.
  EXPECT_EQ(&m.Counter("reqs_total", "ignored"), &c);
}

}  // namespace
}  // namespace cairn::http
