#include "hlo/opcode.h"

#include <array>
#include <map>

namespace spmdsim::hlo {
namespace {

constexpr std::array kNames = {
#define SPMDSIM_HLO_OPCODE_NAME(e, s) std::string_view(s),
    SPMDSIM_HLO_OPCODES(SPMDSIM_HLO_OPCODE_NAME)
#undef SPMDSIM_HLO_OPCODE_NAME
};

const std::map<std::string_view, Opcode>& ByName() {
  static const auto* const by_name = [] {
    auto* m = new std::map<std::string_view, Opcode>();
    for (size_t i = 0; i < kNames.size(); ++i) (*m)[kNames[i]] = static_cast<Opcode>(i);
    return m;
  }();
  return *by_name;
}

}  // namespace

std::string_view OpcodeName(Opcode opcode) { return kNames[static_cast<size_t>(opcode)]; }

bool ParseOpcode(std::string_view name, Opcode* opcode) {
  const auto& m = ByName();
  const auto it = m.find(name);
  if (it == m.end()) return false;
  *opcode = it->second;
  return true;
}

bool IsElementwiseUnary(Opcode opcode) {
  switch (opcode) {
    case Opcode::kAbs: case Opcode::kCbrt: case Opcode::kCeil: case Opcode::kClz: case Opcode::kCos:
    case Opcode::kErf: case Opcode::kExp: case Opcode::kExpm1: case Opcode::kFloor: case Opcode::kImag:
    case Opcode::kIsFinite: case Opcode::kLog: case Opcode::kLog1p: case Opcode::kLogistic:
    case Opcode::kNegate: case Opcode::kNot: case Opcode::kPopulationCount: case Opcode::kReal:
    case Opcode::kRoundNearestAfz: case Opcode::kRoundNearestEven: case Opcode::kRsqrt: case Opcode::kSign:
    case Opcode::kSin: case Opcode::kSqrt: case Opcode::kTan: case Opcode::kTanh: case Opcode::kAcos:
    case Opcode::kAcosh: case Opcode::kAsin: case Opcode::kAsinh: case Opcode::kAtan: case Opcode::kAtanh:
    case Opcode::kCosh: case Opcode::kSinh:
      return true;
    default:
      return false;
  }
}

bool IsElementwiseBinary(Opcode opcode) {
  switch (opcode) {
    case Opcode::kAdd: case Opcode::kAnd: case Opcode::kAtan2: case Opcode::kCompare: case Opcode::kComplex:
    case Opcode::kDivide: case Opcode::kMaximum: case Opcode::kMinimum: case Opcode::kMultiply:
    case Opcode::kOr: case Opcode::kPower: case Opcode::kRemainder: case Opcode::kShiftLeft:
    case Opcode::kShiftRightArithmetic: case Opcode::kShiftRightLogical: case Opcode::kSubtract:
    case Opcode::kXor: case Opcode::kMulhi:
      return true;
    default:
      return false;
  }
}

bool IsCollective(Opcode opcode) {
  switch (opcode) {
    case Opcode::kAllGather: case Opcode::kAllGatherStart: case Opcode::kAllGatherDone:
    case Opcode::kAllReduce: case Opcode::kAllReduceStart: case Opcode::kAllReduceDone:
    case Opcode::kAllToAll: case Opcode::kCollectiveBroadcast: case Opcode::kCollectivePermute:
    case Opcode::kCollectivePermuteStart: case Opcode::kCollectivePermuteDone: case Opcode::kReduceScatter:
    case Opcode::kRaggedAllToAll: case Opcode::kCollectiveReduce:
      return true;
    default:
      return false;
  }
}

bool IsAsyncCollectiveStart(Opcode opcode) {
  return opcode == Opcode::kAllGatherStart || opcode == Opcode::kAllReduceStart ||
         opcode == Opcode::kCollectivePermuteStart;
}

bool IsAsyncCollectiveDone(Opcode opcode) {
  return opcode == Opcode::kAllGatherDone || opcode == Opcode::kAllReduceDone ||
         opcode == Opcode::kCollectivePermuteDone;
}

}  // namespace spmdsim::hlo
