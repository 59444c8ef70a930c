#include "sim/abstract_collective.h"

#include <utility>

#include "common/error.h"
#include "sim/internal/array_access.h"
#include "sim/internal/collective_call.h"

namespace spmdsim {

struct AbstractCollective::State {
  PermutationPairs perm;     // the call's pairs point into it
  Array input;               // abstract, charged to nobody
  internal::CollectiveCall call;
  internal::GroupInfo groups;
  std::vector<std::string> names;  // the event's axes point into it
  std::vector<int64_t> result_shape;
  CollectiveEvent event;
  bool identity = false;
};

AbstractCollective::AbstractCollective(const Mesh& mesh, CollectiveRequest request, DType dtype,
                                       std::vector<int64_t> shape)
    : state_(std::make_unique<State>()) {
  SPMDSIM_CHECK(request.op != CollectiveKind::kBarrier, "an AbstractCollective of a barrier");
  State& s = *state_;
  s.perm = std::move(request.perm);
  s.input = internal::ArrayAccess::Make(dtype, std::move(shape), nullptr, nullptr);
  const Axes axes(std::move(request.axes));
  const CollectiveKind op = request.op;
  // DeviceContext returns x itself over no axes for these (JAX), without validating anything else.
  s.identity = axes.names().empty() && (op == CollectiveKind::kPsum || op == CollectiveKind::kPmax ||
                                        op == CollectiveKind::kPmin || op == CollectiveKind::kAllGather ||
                                        op == CollectiveKind::kPsumScatter);
  if (s.identity) {
    s.result_shape = s.input.shape();
    s.call.out_dtype = dtype;
    return;
  }
  internal::CollectiveCall& call = s.call;
  call.op = op;
  call.axes = internal::MakeAxesKey(mesh, axes, CollectiveName(op));
  call.input = &s.input;
  call.p0 = request.axis;
  call.p1 = request.concat_axis;
  call.tiled = request.tiled;
  internal::ValidateCall(mesh, call, axes, s.perm);
  s.result_shape = call.out_shape;
  s.groups = internal::MakeGroupInfo(mesh, call.axes);
  s.event = internal::MakeEvent(mesh, call, &s.groups, 0, &s.names);
}

AbstractCollective::~AbstractCollective() = default;

bool AbstractCollective::identity() const { return state_->identity; }
const std::vector<int64_t>& AbstractCollective::result_shape() const { return state_->result_shape; }
DType AbstractCollective::result_dtype() const { return state_->call.out_dtype; }
int64_t AbstractCollective::input_bytes() const { return state_->input.nbytes(); }
int64_t AbstractCollective::result_bytes() const {
  return NumElements(state_->result_shape) * DTypeSize(state_->call.out_dtype);
}
const CollectiveEvent& AbstractCollective::event() const {
  SPMDSIM_CHECK(!state_->identity, "no event: the collective returns its input");
  return state_->event;
}

}  // namespace spmdsim
