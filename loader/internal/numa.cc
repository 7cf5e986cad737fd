#include "loader/internal/numa.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/const_init.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "oneapi/tbb/info.h"

#include "pinning/base/mutex.h"
#include "pinning/base/small_file.h"

namespace pinwheel {
namespace {

// Parses a sysfs list such as "0", "0-3" or "0,2-3".
std::vector<int> ParseNodeList(const std::string& text) {
  std::vector<int> nodes;
  for (absl::string_view part :
       absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    part = absl::StripAsciiWhitespace(part);
    std::vector<absl::string_view> range = absl::StrSplit(part, '-');
    int first = 0, last = 0;
    if (range.size() == 1 && absl::SimpleAtoi(range[0], &first)) {
      nodes.push_back(first);
    } else if (range.size() == 2 && absl::SimpleAtoi(range[0], &first) &&
               absl::SimpleAtoi(range[1], &last)) {
      for (int n = first; n <= last; ++n) nodes.push_back(n);
    }
  }
  return nodes;
}

}  // namespace

NumaPlacement DecideNumaPlacement(const NumaTopology& topology) {
  const size_t count = topology.nodes.size();
  if (topology.device == "host") {
    return {-1, count <= 1 ? "NUMA placement: one node, nothing to do"
                           : "NUMA placement: host backend, no GPU to be near: "
                             "not placed"};
  }
  if (count <= 1) return {-1, "NUMA placement: one node, nothing to do"};
  const std::string& gpu = topology.device;
  if (topology.device_node < 0 ||
      std::find(topology.nodes.begin(), topology.nodes.end(),
                topology.device_node) == topology.nodes.end()) {
    return {-1, absl::StrCat("NUMA placement: ", count, " nodes but ", gpu,
                             "'s node is unknown (sysfs numa_node = ",
                             topology.device_node, "): not placed")};
  }
  if (std::find(topology.bindable_nodes.begin(), topology.bindable_nodes.end(),
                topology.device_node) == topology.bindable_nodes.end()) {
    return {-1, absl::StrCat("NUMA placement: ", count, " nodes, ", gpu,
                             " on node ", topology.device_node,
                             ", but oneTBB cannot bind threads there (is "
                             "libtbbbind installed?): not placed")};
  }
  return {
      topology.device_node,
      absl::StrCat("NUMA placement: workers and pinned slots on node ",
                   topology.device_node, " of ", count, " (", gpu, "'s node)")};
}

NumaTopology DetectNumaTopology(const Device& device) {
  NumaTopology topology;
  topology.device = device.ToString();
  if (const std::optional<std::string> online =
          internal::ReadSmallFile("/sys/devices/system/node/online")) {
    topology.nodes =
        ParseNodeList(std::string(absl::StripAsciiWhitespace(*online)));
  }
  if (topology.nodes.empty()) topology.nodes = {0};
#ifndef PINWHEEL_NUMA_BINDING_DISABLED
  if (topology.nodes.size() > 1) {
    // Asking oneTBB loads libtbbbind (hwloc): only worth it with >1 node.
    for (int node : tbb::info::numa_nodes()) {
      if (node >= 0) topology.bindable_nodes.push_back(node);
    }
  }
#endif
  topology.device_node = device.NumaNode();
  return topology;
}

const NumaPlacement& NumaPlacementFor(const Device& device) {
  static absl::Mutex mu(absl::kConstInit);
  static auto* placements = new std::map<std::string, NumaPlacement>();
  const std::string key = device.ToString();
  {
    internal::MutexLock lock(&mu);
    auto it = placements->find(key);
    if (it != placements->end()) return it->second;
  }
  NumaPlacement placement = DecideNumaPlacement(DetectNumaTopology(device));
  internal::MutexLock lock(&mu);
  // std::map never moves its values: the reference stays valid.
  return placements->emplace(key, std::move(placement)).first->second;
}

namespace internal {

std::unique_ptr<tbb::task_arena> MakeWorkerArena(const NumaPlacement& placement,
                                                 int workers) {
#ifdef PINWHEEL_NUMA_BINDING_DISABLED
  const bool bind = false;
#else
  const bool bind = placement.node >= 0;
#endif
  if (!bind) return std::make_unique<tbb::task_arena>(workers, 1);
  return std::make_unique<tbb::task_arena>(tbb::task_arena::constraints{}
                                               .set_numa_id(placement.node)
                                               .set_max_concurrency(workers),
                                           1);
}

void RunOnNumaNode(const NumaPlacement& placement,
                   const std::function<void()>& fn) {
#ifdef PINWHEEL_NUMA_BINDING_DISABLED
  const bool bind = false;
#else
  const bool bind = placement.node >= 0;
#endif
  if (!bind) {
    fn();
    return;
  }
  // oneTBB binds a thread that joins a constrained arena (the caller's too,
  // for the length of execute()) and restores its affinity on leaving.
  tbb::task_arena arena(tbb::task_arena::constraints{}
                            .set_numa_id(placement.node)
                            .set_max_concurrency(1),
                        1);
  arena.execute(fn);
}

}  // namespace internal
}  // namespace pinwheel
