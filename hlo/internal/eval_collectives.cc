// Collective kernels: all-reduce, all-gather, reduce-scatter, all-to-all, collective-permute,
// collective-broadcast (and the -start forms, which complete at once: -done only picks the result), and
// partition-id / replica-id.
//
// Every member's operand comes from CollectivePeer::Exchange in group order; each device computes its own
// result from them. all-reduce and reduce-scatter fold as XLA CPU's in-process collectives do: the
// accumulator starts at the reduction's identity (0 for add, 1 for multiply, -inf / the lowest value for
// maximum, +inf / the highest for minimum) and adds the members in rank order, so results are bitwise XLA's.
// A reduction computation that is not one of those folds from member 0.
#include <cstring>
#include <limits>

#include "common/shape.h"
#include "hlo/internal/element_ops.h"
#include "hlo/internal/kernels.h"
#include "hlo/internal/types.h"

namespace spmdsim::hlo::internal {
namespace {

template <typename T>
bool Identity(Opcode op, T* out) {
  switch (op) {
    case Opcode::kAdd: *out = T(0); return true;
    case Opcode::kMultiply: *out = T(1); return true;
    case Opcode::kMaximum:
      if constexpr (kIsFloat<T>) *out = T(-std::numeric_limits<float>::infinity());
      else *out = std::numeric_limits<T>::lowest();
      return true;
    case Opcode::kMinimum:
      if constexpr (kIsFloat<T>) *out = T(std::numeric_limits<float>::infinity());
      else *out = std::numeric_limits<T>::max();
      return true;
    default: return false;
  }
}

// Folds `parts` (arrays of `dtype` and `dims`, in rank order) with the instruction's reduction.
Value Fold(const Instruction& ins, DType dtype, const std::vector<int64_t>& dims, const std::vector<const void*>& parts,
           KernelContext& context) {
  ValueBuilder out(dtype, dims);
  const int64_t n = out.size();
  ScalarFunction f(*ins.to_apply(), context);
  const std::optional<Opcode> op = f.simple_binary();
  bool done = false;
  if (op.has_value()) {
    VisitType(dtype, [&](auto t) {
      using T = decltype(t);
      T identity;
      if (!Identity<T>(*op, &identity)) return;
      T* o = out.data<T>();
      std::fill(o, o + n, identity);
      DispatchBinary<T>(*op, [&](auto g) {
        for (const void* p : parts) {
          const T* x = static_cast<const T*>(p);
          for (int64_t i = 0; i < n; ++i) o[i] = g(o[i], x[i]);
        }
      });
      done = true;
    });
  }
  if (!done) {
    const int64_t size = DTypeSize(dtype);
    char* o = static_cast<char*>(out.raw());
    std::memcpy(o, parts[0], static_cast<size_t>(n * size));
    std::vector<uint64_t> params(2), r(1);
    for (size_t j = 1; j < parts.size(); ++j) {
      for (int64_t i = 0; i < n; ++i) {
        params[0] = params[1] = 0;
        std::memcpy(&params[0], o + i * size, static_cast<size_t>(size));
        std::memcpy(&params[1], static_cast<const char*>(parts[j]) + i * size, static_cast<size_t>(size));
        f(params, r);
        std::memcpy(o + i * size, &r[0], static_cast<size_t>(size));
      }
    }
  }
  return std::move(out).Finish();
}

// Block `index` of `count` equal blocks of `x` along dimension d, as a new value.
Value Block(const Array& x, DType dtype, int64_t d, int64_t index, int64_t count) {
  std::vector<int64_t> dims = x.shape();
  dims[d] /= count;
  ValueBuilder out(dtype, dims);
  const std::vector<int64_t> xs = RowMajorStrides(x.shape());
  if (out.size() > 0) {
    StridedCopy(x.raw_data(), index * dims[d] * xs[d], xs, out.raw(), 0, RowMajorStrides(dims), dims, DTypeSize(dtype));
  }
  return std::move(out).Finish();
}

// members concatenated along d.
Value Concatenate(const std::vector<Array>& members, DType dtype, int64_t d) {
  std::vector<int64_t> dims = members[0].shape();
  dims[d] *= static_cast<int64_t>(members.size());
  ValueBuilder out(dtype, dims);
  const std::vector<int64_t> os = RowMajorStrides(dims);
  for (size_t j = 0; j < members.size(); ++j) {
    const Array& m = members[j];
    if (m.size() == 0) continue;
    StridedCopy(m.raw_data(), 0, RowMajorStrides(m.shape()), out.raw(), static_cast<int64_t>(j) * m.shape()[d] * os[d],
                os, m.shape(), DTypeSize(dtype));
  }
  return std::move(out).Finish();
}

CollectivePeer& PeerOf(KernelContext& context) { return context.peer(); }

Value AllReduce(const Instruction& ins, Operands v, KernelContext& context) {
  std::vector<Value> outs;
  for (const Value* x : v) {
    int64_t rank = 0;
    const std::vector<Array> members = PeerOf(context).Exchange(ins, x->storage(), &rank);
    std::vector<const void*> parts;
    for (const Array& m : members) parts.push_back(m.raw_data());
    outs.push_back(Fold(ins, x->dtype(), x->dims(), parts, context));
  }
  return outs.size() == 1 ? outs[0] : Value::Tuple(std::move(outs));
}

Value ReduceScatter(const Instruction& ins, Operands v, KernelContext& context) {
  std::vector<Value> outs;
  const int64_t d = ins.attrs().dimensions[0];
  for (const Value* x : v) {
    int64_t rank = 0;
    const std::vector<Array> members = PeerOf(context).Exchange(ins, x->storage(), &rank);
    const int64_t n = static_cast<int64_t>(members.size());
    std::vector<Value> blocks;
    std::vector<const void*> parts;
    for (const Array& m : members) {
      blocks.push_back(Block(m, x->dtype(), d, rank, n));
      parts.push_back(blocks.back().raw());
    }
    outs.push_back(Fold(ins, x->dtype(), blocks[0].dims(), parts, context));
  }
  return outs.size() == 1 ? outs[0] : Value::Tuple(std::move(outs));
}

Value AllGather(const Instruction& ins, Operands v, KernelContext& context) {
  std::vector<Value> outs;
  for (const Value* x : v) {
    int64_t rank = 0;
    const std::vector<Array> members = PeerOf(context).Exchange(ins, x->storage(), &rank);
    outs.push_back(Concatenate(members, x->dtype(), ins.attrs().dimensions[0]));
  }
  Value result = outs.size() == 1 ? outs[0] : Value::Tuple(std::move(outs));
  if (ins.opcode() != Opcode::kAllGatherStart) return result;
  std::vector<Value> operands;
  for (const Value* x : v) operands.push_back(*x);
  return Value::Tuple({operands.size() == 1 ? operands[0] : Value::Tuple(operands), result});
}

Value AllToAll(const Instruction& ins, Operands v, KernelContext& context) {
  int64_t rank = 0;
  if (!ins.attrs().dimensions.empty()) {
    const Value& x = *v[0];
    const int64_t d = ins.attrs().dimensions[0];
    const std::vector<Array> members = PeerOf(context).Exchange(ins, x.storage(), &rank);
    const int64_t n = static_cast<int64_t>(members.size());
    std::vector<Array> blocks;
    for (const Array& m : members) blocks.push_back(Block(m, x.dtype(), d, rank, n).storage());
    return Concatenate(blocks, x.dtype(), d);
  }
  // Tuple form: operand i goes to member i; output j is what member j sent to this device.
  std::vector<std::vector<Array>> exchanged;
  for (const Value* x : v) exchanged.push_back(PeerOf(context).Exchange(ins, x->storage(), &rank));
  std::vector<Value> outs;
  for (size_t j = 0; j < v.size(); ++j) outs.push_back(Value::FromArray(v[0]->dtype(), exchanged[rank][j]));
  return Value::Tuple(std::move(outs));
}

// collective-permute(-start): the received value, zeros when nobody sends here.
Value Permute(const Instruction& ins, const Value& x, KernelContext& context) {
  Array got = PeerOf(context).Permute(ins, x.storage());
  Value received = got.valid() ? Value::FromArray(x.dtype(), got) : NewArray(x.dtype(), x.dims(), true);
  if (ins.opcode() == Opcode::kCollectivePermute) return received;
  std::vector<Value> parts{x, received};
  for (size_t i = 2; i < ins.shape().tuple.size(); ++i) parts.push_back(NewArray(ins.shape().tuple[i], true));
  return Value::Tuple(std::move(parts));
}

Value ScalarU32(int64_t v) {
  ValueBuilder b(DType::kU32, {});
  b.data<uint32_t>()[0] = static_cast<uint32_t>(v);
  return std::move(b).Finish();
}

}  // namespace

Value EvalCollective(const Instruction& ins, Operands v, KernelContext& context) {
  switch (ins.opcode()) {
    case Opcode::kPartitionId: return ScalarU32(context.ids().partition);
    case Opcode::kReplicaId: return ScalarU32(context.ids().replica);
    case Opcode::kAllReduce: case Opcode::kAllReduceStart: return AllReduce(ins, v, context);
    case Opcode::kReduceScatter: return ReduceScatter(ins, v, context);
    case Opcode::kAllGather: case Opcode::kAllGatherStart: return AllGather(ins, v, context);
    case Opcode::kAllToAll: return AllToAll(ins, v, context);
    case Opcode::kCollectivePermute: case Opcode::kCollectivePermuteStart: return Permute(ins, *v[0], context);
    case Opcode::kCollectiveBroadcast: {
      int64_t rank = 0;
      return Value::FromArray(v[0]->dtype(), PeerOf(context).Exchange(ins, v[0]->storage(), &rank)[0]);
    }
    default: return Value();
  }
}

}  // namespace spmdsim::hlo::internal
