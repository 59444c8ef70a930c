#include "sim/observer.h"

namespace spmdsim {

std::string_view CollectiveName(CollectiveKind op) {
  using OpKind = CollectiveKind;
  switch (op) {
    case OpKind::kBarrier: return "barrier";
    case OpKind::kPsum: return "psum";
    case OpKind::kPmean: return "pmean";
    case OpKind::kPmax: return "pmax";
    case OpKind::kPmin: return "pmin";
    case OpKind::kAllGather: return "all_gather";
    case OpKind::kPsumScatter: return "psum_scatter";
    case OpKind::kAllToAll: return "all_to_all";
    case OpKind::kPpermute: return "ppermute";
  }
  return "unknown";
}

}  // namespace spmdsim
