#include "hlo/internal/scalar_program.h"

#include <cstring>

#include "hlo/internal/element_ops.h"
#include "hlo/internal/types.h"

namespace spmdsim::hlo::internal {
namespace {

bool IsScalarArray(const Shape& s) {
  return s.IsArray() && s.rank() == 0 && !IsComplex(s.dtype) && DTypeSize(s.dtype) <= 8;
}

bool Compilable(const Instruction& ins) {
  const Opcode op = ins.opcode();
  if (op == Opcode::kTuple) return ins.is_root();
  if (!IsScalarArray(ins.shape())) return false;
  if (op == Opcode::kDot || op == Opcode::kIota) return false;
  if (op == Opcode::kIsFinite || op == Opcode::kCompare || op == Opcode::kSelect || op == Opcode::kClamp ||
      op == Opcode::kConvert || op == Opcode::kParameter || op == Opcode::kConstant || op == Opcode::kCopy) {
    return op != Opcode::kConstant || !ins.literal().elided;
  }
  if (op == Opcode::kBitcastConvert || op == Opcode::kBitcast || op == Opcode::kReshape) {
    return IsScalarArray(ins.operand(0)->shape()) &&
           DTypeSize(ins.operand(0)->shape().dtype) == DTypeSize(ins.shape().dtype);
  }
  return IsElementwiseUnary(op) || IsElementwiseBinary(op);
}

template <typename T>
uint64_t UnaryBits(Opcode op, uint64_t a) {
  uint64_t out = 0;
  DispatchUnary<T>(op, [&](auto f) { out = ToBits<T>(f(FromBits<T>(a))); });
  return out;
}

template <typename T>
uint64_t BinaryBits(Opcode op, uint64_t a, uint64_t b) {
  uint64_t out = 0;
  DispatchBinary<T>(op, [&](auto f) { out = ToBits<T>(f(FromBits<T>(a), FromBits<T>(b))); });
  return out;
}

uint64_t ConvertBits(DType to, DType from, uint64_t bits) {
  return VisitType(from, [&](auto f) {
    using From = decltype(f);
    return VisitType(to, [&](auto t) {
      using To = decltype(t);
      return ToBits<To>(Convert<To, From>(FromBits<From>(bits)));
    });
  });
}

}  // namespace

std::unique_ptr<ScalarProgram> ScalarProgram::Compile(const Computation& c) {
  auto p = std::make_unique<ScalarProgram>();
  p->steps_.resize(static_cast<size_t>(c.instruction_count()));
  for (int64_t i = 0; i < c.instruction_count(); ++i) {
    const Instruction& ins = *c.instruction(i);
    if (!Compilable(ins)) return nullptr;
    Step& s = p->steps_[i];
    s.op = ins.opcode();
    if (s.op == Opcode::kTuple) continue;  // the root; its operands are the results
    s.dtype = ins.shape().dtype;
    if (ins.operand_count() > 0) s.operand_dtype = ins.operand(0)->shape().dtype;
    if (ins.operand_count() > 0) s.a = ins.operand(0)->index();
    if (ins.operand_count() > 1) s.b = ins.operand(1)->index();
    if (ins.operand_count() > 2) s.c = ins.operand(2)->index();
    s.parameter = ins.attrs().parameter_number;
    if (s.op == Opcode::kConstant) std::memcpy(&s.constant, ins.literal().bytes.data(), ins.literal().bytes.size());
    s.direction = ins.attrs().direction;
    s.comparison = ins.attrs().comparison_type;
  }
  const Instruction* root = c.root();
  if (root->opcode() == Opcode::kTuple) {
    for (const Instruction* o : root->operands()) p->results_.push_back(o->index());
  } else {
    p->results_.push_back(root->index());
  }
  p->num_params_ = c.parameter_count();
  if (c.parameter_count() == 2 && c.instruction_count() == 3 && IsElementwiseBinary(root->opcode()) &&
      root->opcode() != Opcode::kCompare && root->operand(0)->opcode() == Opcode::kParameter &&
      root->operand(1)->opcode() == Opcode::kParameter && root->operand(0)->attrs().parameter_number == 0 &&
      root->operand(1)->attrs().parameter_number == 1) {
    p->simple_binary_ = root->opcode();
  }
  return p;
}

uint64_t ScalarProgram::Execute(const Step& s, std::span<const uint64_t> r, std::span<const uint64_t> params) const {
  switch (s.op) {
    case Opcode::kParameter: return params[s.parameter];
    case Opcode::kConstant: return s.constant;
    case Opcode::kCopy: case Opcode::kBitcastConvert: case Opcode::kBitcast: case Opcode::kReshape: return r[s.a];
    case Opcode::kSelect: return (r[s.a] & 1) ? r[s.b] : r[s.c];
    case Opcode::kConvert: return ConvertBits(s.dtype, s.operand_dtype, r[s.a]);
    case Opcode::kCompare:
      return VisitType(s.operand_dtype, [&](auto t) -> uint64_t {
        using T = decltype(t);
        return Compare<T>(s.direction, s.comparison, FromBits<T>(r[s.a]), FromBits<T>(r[s.b])) ? 1 : 0;
      });
    case Opcode::kIsFinite:
      return VisitType(s.operand_dtype, [&](auto t) -> uint64_t {
        using T = decltype(t);
        if constexpr (kIsFloat<T>) return std::isfinite(Widen(FromBits<T>(r[s.a]))) ? 1 : 0;
        return 1;
      });
    case Opcode::kClamp:
      return VisitType(s.dtype, [&](auto t) -> uint64_t {
        using T = decltype(t);
        uint64_t lo = 0;
        DispatchBinary<T>(Opcode::kMaximum,
                          [&](auto f) { lo = ToBits<T>(f(FromBits<T>(r[s.a]), FromBits<T>(r[s.b]))); });
        return BinaryBits<T>(Opcode::kMinimum, lo, r[s.c]);
      });
    default: break;
  }
  return VisitType(s.dtype, [&](auto t) -> uint64_t {
    using T = decltype(t);
    if (IsElementwiseUnary(s.op)) return UnaryBits<T>(s.op, r[s.a]);
    return BinaryBits<T>(s.op, r[s.a], r[s.b]);
  });
}

void ScalarProgram::Run(std::span<const uint64_t> params, std::span<uint64_t> registers,
                        std::span<uint64_t> results) const {
  for (size_t i = 0; i < steps_.size(); ++i) {
    if (steps_[i].op == Opcode::kTuple) continue;
    registers[i] = Execute(steps_[i], registers, params);
  }
  for (size_t i = 0; i < results_.size(); ++i) results[i] = registers[results_[i]];
}

}  // namespace spmdsim::hlo::internal
