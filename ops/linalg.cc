#include "ops/linalg.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <string>

#include <fmt/format.h>

#include "ops/elementwise.h"
#include "ops/internal/kernels.h"
#include "ops/reduction.h"
#include "ops/shape_ops.h"

namespace spmdsim {

using ops_internal::CheckValid;
using ops_internal::IsStorageOf;
using ops_internal::NewResult;
using ops_internal::VaryingUnion;
using ops_internal::VisitCompute;
using ops_internal::WithVaryingAxes;

namespace {

std::string IntTuple(const std::vector<int>& v) { return PyTuple(std::vector<int64_t>(v.begin(), v.end())); }

[[noreturn]] void DotError(std::string_view op, const std::string& message) {
  ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kTypeError, "{}: {}", op, message);
}

// One GEMM operand laid out as [batch, rows, cols]: either the array's own buffer (row-major, or column-major
// when its natural order is [batch, cols, rows]) or a permuted, converted copy.
template <typename C>
struct MatOperand {
  const C* ptr = nullptr;
  bool col_major = false;
  ops_internal::Scratch<C> storage;
};

template <typename C>
MatOperand<C> PrepareMat(const Array& a, const std::vector<int>& batch, const std::vector<int>& rows,
                         const std::vector<int>& cols) {
  std::vector<int> row_major = batch, col_major = batch;
  row_major.insert(row_major.end(), rows.begin(), rows.end());
  row_major.insert(row_major.end(), cols.begin(), cols.end());
  col_major.insert(col_major.end(), cols.begin(), cols.end());
  col_major.insert(col_major.end(), rows.begin(), rows.end());
  auto is_identity = [](const std::vector<int>& p) {
    for (size_t i = 0; i < p.size(); ++i)
      if (p[i] != static_cast<int>(i)) return false;
    return true;
  };
  MatOperand<C> m;
  if (IsStorageOf<C>(a.dtype()) && is_identity(row_major)) {
    m.ptr = static_cast<const C*>(a.raw_data());
  } else if (IsStorageOf<C>(a.dtype()) && is_identity(col_major)) {
    m.ptr = static_cast<const C*>(a.raw_data());
    m.col_major = true;
  } else {
    m.storage = ops_internal::PermutedCompute<C>(a, row_major);
    m.ptr = m.storage.data();
  }
  return m;
}

template <typename C>
void Gemm(const MatOperand<C>& a, const MatOperand<C>& b, int64_t batch, int64_t m, int64_t n, int64_t k, C* out) {
  using RowMat = Eigen::Matrix<C, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  using ColMat = Eigen::Matrix<C, Eigen::Dynamic, Eigen::Dynamic, Eigen::ColMajor>;
  for (int64_t i = 0; i < batch; ++i) {
    Eigen::Map<RowMat> o(out + i * m * n, m, n);
    if (k == 0) {
      o.setZero();
      continue;
    }
    const C* pa = a.ptr + i * m * k;
    const C* pb = b.ptr + i * k * n;
    if (!a.col_major && !b.col_major) {
      o.noalias() = Eigen::Map<const RowMat>(pa, m, k) * Eigen::Map<const RowMat>(pb, k, n);
    } else if (!a.col_major) {
      o.noalias() = Eigen::Map<const RowMat>(pa, m, k) * Eigen::Map<const ColMat>(pb, k, n);
    } else if (!b.col_major) {
      o.noalias() = Eigen::Map<const ColMat>(pa, m, k) * Eigen::Map<const RowMat>(pb, k, n);
    } else {
      o.noalias() = Eigen::Map<const ColMat>(pa, m, k) * Eigen::Map<const ColMat>(pb, k, n);
    }
  }
}

// JAX's checks of dot_general's dimension numbers against the operands, with JAX's messages: in range, as many
// batch and as many contracting dimensions on each side, distinct, batch disjoint from contracting, equal sizes.
void CheckDotDimensions(std::string_view op, const Array& lhs, const Array& rhs, const DotDimensionNumbers& dims) {
  const auto &lc = dims.lhs_contracting, &rc = dims.rhs_contracting, &lb = dims.lhs_batch, &rb = dims.rhs_batch;
  auto in_range = [](const std::vector<int>& v, int rank) {
    return std::all_of(v.begin(), v.end(), [&](int d) { return d >= 0 && d < rank; });
  };
  if (!in_range(lc, lhs.rank()) || !in_range(lb, lhs.rank())) {
    DotError(op,
             fmt::format("dot_general requires lhs dimension numbers to be nonnegative and less than the number "
                         "of axes of the lhs value, got lhs_batch of {} and lhs_contracting of {} for lhs of rank {}",
                         IntTuple(lb), IntTuple(lc), lhs.rank()));
  }
  if (!in_range(rc, rhs.rank()) || !in_range(rb, rhs.rank())) {
    DotError(op,
             fmt::format("dot_general requires rhs dimension numbers to be nonnegative and less than the number "
                         "of axes of the rhs value, got rhs_batch of {} and rhs_contracting of {} for rhs of rank {}",
                         IntTuple(rb), IntTuple(rc), rhs.rank()));
  }
  if (lb.size() != rb.size()) {
    DotError(op, fmt::format("dot_general requires equal numbers of lhs_batch and rhs_batch dimensions, got lhs_batch "
                             "{} and rhs_batch {}.", IntTuple(lb), IntTuple(rb)));
  }
  if (lc.size() != rc.size()) {
    DotError(op, fmt::format("dot_general requires contracting dimensions to have the same shape, got {} and {}.",
                             IntTuple(lc), IntTuple(rc)));
  }
  auto distinct = [](const std::vector<int>& v) {
    std::vector<int> s = v;
    std::sort(s.begin(), s.end());
    return std::adjacent_find(s.begin(), s.end()) == s.end();
  };
  auto disjoint = [](const std::vector<int>& a, const std::vector<int>& b) {
    for (int x : a)
      if (std::find(b.begin(), b.end(), x) != b.end()) return false;
    return true;
  };
  if (!distinct(lb))
    DotError(op,
             fmt::format("dot_general requires lhs batch dimensions to be distinct, got lhs_batch {}.", IntTuple(lb)));
  if (!distinct(rb))
    DotError(op,
             fmt::format("dot_general requires rhs batch dimensions to be distinct, got rhs_batch {}.", IntTuple(rb)));
  if (!distinct(lc))
    DotError(op, fmt::format("dot_general requires lhs contracting dimensions to be distinct, got lhs_contracting {}.",
                             IntTuple(lc)));
  if (!distinct(rc))
    DotError(op, fmt::format("dot_general requires rhs contracting dimensions to be distinct, got rhs_contracting {}.",
                             IntTuple(rc)));
  if (!disjoint(lb, lc)) {
    DotError(op,
             fmt::format("dot_general requires lhs batch dimensions to be disjoint from contracting dimensions, got "
                         "lhs_batch {} and lhs_contracting {}.",
                         IntTuple(lb), IntTuple(lc)));
  }
  if (!disjoint(rb, rc)) {
    DotError(op,
             fmt::format("dot_general requires rhs batch dimensions to be disjoint from contracting dimensions, got "
                         "rhs_batch {} and rhs_contracting {}.",
                         IntTuple(rb), IntTuple(rc)));
  }
  std::vector<int64_t> lbs, rbs, lcs, rcs;
  for (int d : lb) lbs.push_back(lhs.shape()[d]);
  for (int d : rb) rbs.push_back(rhs.shape()[d]);
  for (int d : lc) lcs.push_back(lhs.shape()[d]);
  for (int d : rc) rcs.push_back(rhs.shape()[d]);
  if (lbs != rbs) {
    DotError(op, fmt::format("dot_general requires lhs batch dimensions and rhs batch dimensions to have the same "
                             "shape, got {} and {}.", PyTuple(lbs), PyTuple(rbs)));
  }
  if (lcs != rcs) {
    DotError(op, fmt::format("dot_general requires contracting dimensions to have the same shape, got {} and {}.",
                             PyTuple(lcs), PyTuple(rcs)));
  }
}

Array DotGeneralImpl(std::string_view op, const Array& lhs, const Array& rhs, const DotDimensionNumbers& dims) {
  CheckValid(op, lhs, 0);
  CheckValid(op, rhs, 1);
  CheckDotDimensions(op, lhs, rhs, dims);
  const auto &lc = dims.lhs_contracting, &rc = dims.rhs_contracting, &lb = dims.lhs_batch, &rb = dims.rhs_batch;
  std::vector<int64_t> lbs, lcs;
  for (int d : lb) lbs.push_back(lhs.shape()[d]);
  for (int d : lc) lcs.push_back(lhs.shape()[d]);
  DType dtype = PromoteTypes(lhs.dtype(), rhs.dtype());
  if (dtype == DType::kBool) {
    DotError(op, fmt::format("dot_general does not accept bool operands (got {} and {}); Cast them first",
                             lhs.ShapeString(), rhs.ShapeString()));
  }
  auto free_dims = [](int rank, const std::vector<int>& a, const std::vector<int>& b) {
    std::vector<int> f;
    for (int d = 0; d < rank; ++d)
      if (std::find(a.begin(), a.end(), d) == a.end() && std::find(b.begin(), b.end(), d) == b.end()) f.push_back(d);
    return f;
  };
  std::vector<int> lf = free_dims(lhs.rank(), lb, lc), rf = free_dims(rhs.rank(), rb, rc);
  std::vector<int64_t> shape = lbs;
  int64_t batch = NumElements(lbs), m = 1, n = 1, k = NumElements(lcs);
  for (int d : lf) {
    shape.push_back(lhs.shape()[d]);
    m *= lhs.shape()[d];
  }
  for (int d : rf) {
    shape.push_back(rhs.shape()[d]);
    n *= rhs.shape()[d];
  }
  const bool abstract = lhs.is_abstract() || rhs.is_abstract();
  ArrayBuilder out = NewResult(dtype, shape, abstract);
  if (!abstract && out.size() > 0) {
    VisitCompute(dtype, [&](auto tag) {
      using C = decltype(tag);
      if constexpr (!std::is_same_v<C, bool>) {
        MatOperand<C> a = PrepareMat<C>(lhs, lb, lf, lc);
        MatOperand<C> b = PrepareMat<C>(rhs, rb, rc, rf);
        if (IsStorageOf<C>(dtype)) {
          Gemm<C>(a, b, batch, m, n, k, static_cast<C*>(out.mutable_data()));
        } else {
          ops_internal::Scratch<C> scratch(static_cast<size_t>(out.size()));
          Gemm<C>(a, b, batch, m, n, k, scratch.data());
          ops_internal::StoreAs<C>(scratch.data(), out.size(), out.mutable_data(), dtype);
        }
      }
    });
  }
  OpCost cost{"dot_general", 2 * batch * m * n * k, 0, lhs.nbytes() + rhs.nbytes(), out.nbytes()};
  cost.batch = batch;
  cost.m = m;
  cost.n = n;
  cost.k = k;
  ops_internal::ReportCost(cost);
  return WithVaryingAxes(std::move(out).Freeze(), VaryingUnion({&lhs, &rhs}));
}

// ---- einsum ---------------------------------------------------------------------------------------------------

constexpr int kEllipsisBase = 1000;  // label of the ellipsis dimension j places from the right: 1000 + j

std::string LabelName(int label) {
  return label >= kEllipsisBase ? std::string("...") : std::string(1, static_cast<char>(label));
}

[[noreturn]] void EinsumError(ErrorCode code, ErrorKind kind, const std::string& message) {
  ThrowKind(code, kind, "Einsum: {}", message);
}

// Parses one term ("bsd", "...d") into labels for an operand of `rank` (rank < 0: the output, where an ellipsis
// stands for `ellipsis_rank` dimensions).
std::vector<int> ParseTerm(std::string_view term, int operand, int rank, int ellipsis_rank, bool* has_ellipsis) {
  std::vector<int> letters;
  int ellipsis_at = -1;
  for (size_t i = 0; i < term.size(); ++i) {
    char c = term[i];
    if (c == '.') {
      if (term.substr(i, 3) != "..." || ellipsis_at >= 0) {
        EinsumError(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
                    fmt::format("Invalid Ellipses '{}': use '...' at most once per term.", term));
      }
      ellipsis_at = static_cast<int>(letters.size());
      i += 2;
    } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      letters.push_back(c);
    } else {
      EinsumError(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
                  fmt::format("Character '{}' is not a valid symbol.", c));
    }
  }
  *has_ellipsis = ellipsis_at >= 0;
  int e = 0;
  if (rank >= 0) {
    e = rank - static_cast<int>(letters.size());
    if (e < 0 || (ellipsis_at < 0 && e != 0)) {
      EinsumError(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
                  fmt::format("Einstein sum subscript '{}' does not contain the correct number of indices for "
                              "operand {}.", term, operand));
    }
  } else if (ellipsis_at >= 0) {
    e = ellipsis_rank;
  }
  std::vector<int> labels;
  for (int i = 0; i <= static_cast<int>(letters.size()); ++i) {
    if (i == ellipsis_at) {
      for (int j = 0; j < e; ++j) labels.push_back(kEllipsisBase + (e - 1 - j));
    }
    if (i < static_cast<int>(letters.size())) labels.push_back(letters[i]);
  }
  return labels;
}

struct Term {
  Array array;
  std::vector<int> labels;
};

// Sums out the labels of `t` that are not in `keep`.
Term SumOutExcept(Term t, const std::vector<int>& keep) {
  std::vector<int> axes, kept;
  for (size_t i = 0; i < t.labels.size(); ++i) {
    if (std::find(keep.begin(), keep.end(), t.labels[i]) == keep.end()) {
      axes.push_back(static_cast<int>(i));
    } else {
      kept.push_back(t.labels[i]);
    }
  }
  if (axes.empty()) return t;
  return {Sum(t.array, axes), kept};
}

bool Has(const std::vector<int>& v, int x) { return std::find(v.begin(), v.end(), x) != v.end(); }

Term Contract(const Term& a, const Term& b, const std::vector<int>& keep) {
  DotDimensionNumbers dims;
  std::vector<int> labels;
  for (size_t i = 0; i < a.labels.size(); ++i) {
    int l = a.labels[i];
    auto it = std::find(b.labels.begin(), b.labels.end(), l);
    if (it == b.labels.end()) continue;
    int j = static_cast<int>(it - b.labels.begin());
    if (Has(keep, l)) {
      dims.lhs_batch.push_back(static_cast<int>(i));
      dims.rhs_batch.push_back(j);
      labels.push_back(l);
    } else {
      dims.lhs_contracting.push_back(static_cast<int>(i));
      dims.rhs_contracting.push_back(j);
    }
  }
  for (int l : a.labels)
    if (!Has(b.labels, l)) labels.push_back(l);
  for (int l : b.labels)
    if (!Has(a.labels, l)) labels.push_back(l);
  return {DotGeneralImpl("Einsum", a.array, b.array, dims), labels};
}

// An einsum's subscripts without spaces, where "->" starts (npos: the output is implicit), and one term per operand.
struct EinsumSubscripts {
  std::string spec;
  size_t arrow = std::string::npos;
  std::vector<std::string> terms;
};

EinsumSubscripts SplitSubscripts(std::string_view subscripts, size_t num_operands) {
  EinsumSubscripts out;
  for (char c : subscripts)
    if (c != ' ') out.spec.push_back(c);
  out.arrow = out.spec.find("->");
  std::string inputs = out.spec.substr(0, out.arrow);
  for (size_t start = 0;;) {
    size_t comma = inputs.find(',', start);
    out.terms.push_back(inputs.substr(start, comma == std::string::npos ? std::string::npos : comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (out.terms.size() != num_operands) {
    EinsumError(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
                fmt::format("Number of einsum subscripts must be equal to the number of operands ('{}' has {}, got "
                            "{} operands).", subscripts, out.terms.size(), num_operands));
  }
  return out;
}

// The operands with their labels, how many operands have each label, and the rank '...' stands for.
struct LabeledOperands {
  std::vector<Term> parts;
  std::map<int, int> counts;
  int ellipsis_rank = 0;
};

LabeledOperands LabelOperands(const std::vector<std::string>& terms, const std::vector<Array>& operands) {
  LabeledOperands out;
  std::map<int, int64_t> sizes;
  for (size_t i = 0; i < operands.size(); ++i) {
    CheckValid("Einsum", operands[i], static_cast<int>(i));
    bool has = false;
    std::vector<int> labels = ParseTerm(terms[i], static_cast<int>(i), operands[i].rank(), 0, &has);
    for (size_t d = 0; d < labels.size(); ++d) {
      int l = labels[d];
      if (std::count(labels.begin(), labels.end(), l) > 1) {
        EinsumError(ErrorCode::kUnimplemented, ErrorKind::kNotImplementedError,
                    fmt::format("label '{}' repeats within operand {} ('{}'): diagonals are not supported",
                                LabelName(l), i, terms[i]));
      }
      int64_t size = operands[i].shape()[d];
      auto [it, inserted] = sizes.emplace(l, size);
      if (!inserted && it->second != size) {
        EinsumError(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
                    fmt::format("Size of label '{}' for operand {} ({}) does not match previous terms ({}).",
                                LabelName(l), i, size, it->second));
      }
      ++out.counts[l];
      if (l >= kEllipsisBase) out.ellipsis_rank = std::max(out.ellipsis_rank, l - kEllipsisBase + 1);
    }
    out.parts.push_back({operands[i], std::move(labels)});
  }
  return out;
}

// The output's labels: the explicit output term, else numpy's implicit output ('...' first, then every label
// that appears once, in label order).
std::vector<int> OutputLabels(const EinsumSubscripts& subscripts, const LabeledOperands& in) {
  std::vector<int> output;
  if (subscripts.arrow == std::string::npos) {
    for (int j = in.ellipsis_rank - 1; j >= 0; --j) output.push_back(kEllipsisBase + j);
    for (const auto& [l, c] : in.counts)
      if (l < kEllipsisBase && c == 1) output.push_back(l);
    return output;
  }
  bool has = false;
  std::string out_term = subscripts.spec.substr(subscripts.arrow + 2);
  output = ParseTerm(out_term, -1, -1, in.ellipsis_rank, &has);
  for (int l : output) {
    if (l < kEllipsisBase && !in.counts.count(l)) {
      EinsumError(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
                  fmt::format("Output character '{}' did not appear in the input", LabelName(l)));
    }
    if (std::count(output.begin(), output.end(), l) > 1) {
      EinsumError(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
                  fmt::format("Output character '{}' appeared more than once in the output", LabelName(l)));
    }
  }
  // numpy: with an explicit output that has no '...', the ellipsis dimensions are summed out.
  return output;
}

// Contracts the operands left to right, keeping the labels the output or a later operand still needs, and returns
// the result with its dimensions in `output`'s order.
Array ContractInOrder(std::vector<Term> parts, const std::vector<int>& output) {
  auto needed_after = [&](size_t i) {
    std::vector<int> keep = output;
    for (size_t j = i + 1; j < parts.size(); ++j)
      keep.insert(keep.end(), parts[j].labels.begin(), parts[j].labels.end());
    return keep;
  };
  for (size_t i = 0; i < parts.size(); ++i) {
    std::vector<int> keep = needed_after(i);
    for (size_t j = 0; j < i; ++j) keep.insert(keep.end(), parts[j].labels.begin(), parts[j].labels.end());
    parts[i] = SumOutExcept(parts[i], keep);  // labels only this operand has and the output lacks
  }
  Term acc = parts[0];
  for (size_t i = 1; i < parts.size(); ++i) {
    std::vector<int> keep = needed_after(i);
    std::vector<int> keep_a = keep, keep_b = keep;
    keep_a.insert(keep_a.end(), parts[i].labels.begin(), parts[i].labels.end());
    keep_b.insert(keep_b.end(), acc.labels.begin(), acc.labels.end());
    acc = Contract(SumOutExcept(acc, keep_a), SumOutExcept(parts[i], keep_b), keep);
  }
  acc = SumOutExcept(acc, output);
  std::vector<int> perm;
  for (int l : output)
    perm.push_back(static_cast<int>(std::find(acc.labels.begin(), acc.labels.end(), l) - acc.labels.begin()));
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity = identity && perm[i] == static_cast<int>(i);
  return identity ? acc.array : Transpose(acc.array, perm);
}

}  // namespace

Array DotGeneral(const Array& lhs, const Array& rhs, const DotDimensionNumbers& dims) {
  return DotGeneralImpl("DotGeneral", lhs, rhs, dims);
}

Array MatMul(const Array& a, const Array& b) {
  CheckValid("MatMul", a, 0);
  CheckValid("MatMul", b, 1);
  for (int i = 0; i < 2; ++i) {
    const Array& x = i == 0 ? a : b;
    if (x.rank() == 0) {
      ThrowKind(ErrorCode::kInvalidArgument, ErrorKind::kValueError,
                "MatMul: matmul input operand {} must have ndim at least 1, but it has ndim 0", i);
    }
  }
  Array x = a.rank() == 1 ? Reshape(a, {1, a.shape()[0]}) : a;
  Array y = b.rank() == 1 ? Reshape(b, {b.shape()[0], 1}) : b;
  const int xr = x.rank(), yr = y.rank();
  if (x.shape()[xr - 1] != y.shape()[yr - 2]) {
    DotError("MatMul",
             fmt::format("dot_general requires contracting dimensions to have the same shape, got ({},) and ({},).",
                         x.shape()[xr - 1], y.shape()[yr - 2]));
  }
  Array result;
  if (yr == 2) {
    // [..., M, K] x [K, N]: no batch dimensions needed; lhs's leading dimensions stay free.
    result = DotGeneralImpl("MatMul", x, y, {{xr - 1}, {0}, {}, {}});
  } else {
    std::vector<int64_t> xb(x.shape().begin(), x.shape().end() - 2), yb(y.shape().begin(), y.shape().end() - 2);
    const std::vector<int64_t> batches[2] = {xb, yb};
    std::vector<int64_t> bb = BroadcastShapes(batches, "MatMul");
    auto expand = [&](const Array& z) {
      std::vector<int64_t> target = bb;
      target.push_back(z.shape()[z.rank() - 2]);
      target.push_back(z.shape()[z.rank() - 1]);
      return z.shape() == target ? z : BroadcastTo(z, target);
    };
    x = expand(x);
    y = expand(y);
    const int nb = static_cast<int>(bb.size());
    DotDimensionNumbers dims{{nb + 1}, {nb}, {}, {}};
    for (int i = 0; i < nb; ++i) {
      dims.lhs_batch.push_back(i);
      dims.rhs_batch.push_back(i);
    }
    result = DotGeneralImpl("MatMul", x, y, dims);
  }
  if (a.rank() == 1 || b.rank() == 1) {
    std::vector<int64_t> shape = result.shape();
    if (b.rank() == 1) shape.erase(shape.end() - 1);
    if (a.rank() == 1) shape.erase(shape.end() - (b.rank() == 1 ? 1 : 2));
    result = Reshape(result, shape);
  }
  return result;
}

Array Dot(const Array& a, const Array& b) {
  CheckValid("Dot", a, 0);
  CheckValid("Dot", b, 1);
  if (a.rank() == 0 || b.rank() == 0) return Mul(a, b);
  const int ca = a.rank() - 1, cb = b.rank() == 1 ? 0 : b.rank() - 2;
  return DotGeneralImpl("Dot", a, b, {{ca}, {cb}, {}, {}});
}

Array Einsum(std::string_view subscripts, const std::vector<Array>& operands) {
  const EinsumSubscripts split = SplitSubscripts(subscripts, operands.size());
  LabeledOperands in = LabelOperands(split.terms, operands);
  const std::vector<int> output = OutputLabels(split, in);
  return ContractInOrder(std::move(in.parts), output);
}

Array Einsum(std::string_view subscripts, const Array& a) { return Einsum(subscripts, std::vector<Array>{a}); }
Array Einsum(std::string_view subscripts, const Array& a, const Array& b) {
  return Einsum(subscripts, std::vector<Array>{a, b});
}

}  // namespace spmdsim
