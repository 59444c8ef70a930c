// How one device of an HLO module meets the others at a collective, and which device it is: the seam between the
// interpreter (hlo/interpreter.h, one device's program) and what runs the devices together (hlo/executor.h gives
// each device a peer over sim/group_exchange.h; a test may give its own).
//
// Thread safety: a CollectivePeer belongs to one device; the devices of a group call it concurrently, each on its
// own peer.
#ifndef SPMDSIM_HLO_COLLECTIVE_PEER_H_
#define SPMDSIM_HLO_COLLECTIVE_PEER_H_

#include <cstdint>
#include <vector>

#include "hlo/ir.h"
#include "sim/array.h"

namespace spmdsim::hlo {

// A device's part in the module: logical device id = replica * num_partitions + partition.
struct DeviceIds {
  int64_t replica = 0;
  int64_t partition = 0;
};

// Every device of a group calls the same method for the same instruction (SPMD: every device runs every
// collective in the same order).
class CollectivePeer {
 public:
  virtual ~CollectivePeer() = default;
  // The group of this device for `collective`: every member's `mine`, in group order; `*rank` is this device's
  // index in it.
  virtual std::vector<Array> Exchange(const Instruction& collective, const Array& mine, int64_t* rank) = 0;
  // collective-permute: what the device that sends to this one sent, or an invalid Array when nobody does.
  virtual Array Permute(const Instruction& collective, const Array& mine) = 0;
};

}  // namespace spmdsim::hlo

#endif  // SPMDSIM_HLO_COLLECTIVE_PEER_H_
