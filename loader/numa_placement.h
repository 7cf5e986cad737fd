// NUMA placement: on a machine with several NUMA nodes, a loader's worker
// threads and its pinned slots belong on the node its GPU is attached to,
// so samples are written into memory next to both the cores writing them
// and the PCIe root the DMA reads through. On a machine with one node (or
// the host backend) there is nothing to do, and the description says so.
//
// Example (what the trainer prints):
//   absl::PrintF("%s\n", NumaPlacementFor(device).description);
//   // "NUMA placement: one node, nothing to do"
//   // "NUMA placement: workers and pinned slots on node 1 of 2 (cuda:1's
//   node)"
//
// The decision (DecideNumaPlacement) is separate from the detection
// (DetectNumaTopology) so tests feed it made-up machines. Placing threads
// needs oneTBB's libtbbbind at run time (hwloc); without it the loader runs
// unplaced and the description says why.
#ifndef PINWHEEL_LOADER_NUMA_PLACEMENT_H_
#define PINWHEEL_LOADER_NUMA_PLACEMENT_H_

#include <string>
#include <vector>

#include "transfer/device.h"

namespace pinwheel {

// What a machine looks like, as far as placement cares.
struct NumaTopology {
  std::string device = "host";      // "host" or "cuda:N"
  std::vector<int> nodes;           // the online NUMA nodes (OS numbers)
  std::vector<int> bindable_nodes;  // those oneTBB can bind an arena to
  int device_node = -1;             // the GPU's node; -1: unknown / host
};

// Thread-compatible value type.
struct NumaPlacement {
  int node = -1;            // the node to bind to; -1: no binding
  std::string description;  // "NUMA placement: ..." (one line)
};

// Returns where a loader for topology.device should run.
NumaPlacement DecideNumaPlacement(const NumaTopology& topology);

// Returns this machine's topology for `device` (sysfs and oneTBB).
NumaTopology DetectNumaTopology(const Device& device);

// Returns DecideNumaPlacement(DetectNumaTopology(device)), worked out
// once per device and remembered. Thread-safe.
const NumaPlacement& NumaPlacementFor(const Device& device);

}  // namespace pinwheel

#endif  // PINWHEEL_LOADER_NUMA_PLACEMENT_H_
