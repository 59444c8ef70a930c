// The verifier's reductions, windows, dot, convolution, gather, scatter, sort, collective and miscellaneous
// families (xla/service/shape_inference.cc is the reference for every rule).
#include <algorithm>
#include <numeric>

#include <fmt/ranges.h>

#include "common/error.h"
#include "hlo/groups.h"
#include "hlo/internal/verifier.h"

namespace spmdsim::hlo::internal {
namespace {

bool Contains(const std::vector<int64_t>& v, int64_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

// N arrays followed by N scalar init values (reduce, reduce-window): the arrays' dtypes, and the inits'.
void SplitInputsAndInits(const Instruction& ins, std::vector<const Shape*>* inputs, std::vector<DType>* init_types) {
  if (ins.operand_count() < 2 || ins.operand_count() % 2 != 0) {
    Verifier::Fail(ins, "takes N inputs followed by N init values");
  }
  const int64_t n = ins.operand_count() / 2;
  for (int64_t i = 0; i < n; ++i) {
    inputs->push_back(&ArrayOperand(ins, i));
    if ((*inputs)[i]->dims != (*inputs)[0]->dims) Verifier::Fail(ins, "the inputs must have one dimensions");
    const Shape& init = ArrayOperand(ins, n + i);
    if (init.rank() != 0) Verifier::Fail(ins, fmt::format("init value {} is {}; a scalar is needed", i, Str(init)));
    init_types->push_back(init.dtype);
  }
}

// The reducer takes (accumulators..., inputs...) scalars and returns the accumulators.
void ExpectReducer(const Instruction& ins, const Computation* c, const std::vector<const Shape*>& inputs,
                   const std::vector<DType>& init_types) {
  std::vector<DType> params = init_types;
  for (const Shape* s : inputs) params.push_back(s->dtype);
  std::vector<Shape> scalars = ScalarShapes(init_types);
  const Shape result = scalars.size() == 1 ? scalars[0] : Shape::Tuple(scalars);
  ExpectSignature(ins, c, ScalarShapes(params), result, "to_apply");
}

Shape MaybeTuple(std::vector<Shape> shapes) {
  return shapes.size() == 1 ? shapes[0] : Shape::Tuple(std::move(shapes));
}

// Output size of one windowed dimension (XLA's window_util: dilate, pad, then count window positions).
int64_t WindowedSize(int64_t in, const WindowDim& w) {
  const int64_t dilated = in == 0 ? 0 : (in - 1) * w.lhs_dilation + 1;
  const int64_t padded = dilated + w.pad_low + w.pad_high;
  const int64_t window = (w.size - 1) * w.rhs_dilation + 1;
  return padded < window ? 0 : (padded - window) / w.stride + 1;
}

void ExpectWindow(const Instruction& ins, const std::vector<WindowDim>& window, int rank) {
  if (static_cast<int>(window.size()) != rank) Verifier::Fail(ins, fmt::format("window needs {} dimensions", rank));
  for (const WindowDim& w : window) {
    if (w.size < 1 || w.stride < 1 || w.lhs_dilation < 1 || w.rhs_dilation < 1) {
      Verifier::Fail(ins, "window sizes, strides and dilations must be >= 1");
    }
  }
}

}  // namespace

bool Verifier::VerifyReduction(const Instruction& ins) {
  if (ins.opcode() != Opcode::kReduce) return false;
  std::vector<const Shape*> inputs;
  std::vector<DType> inits;
  SplitInputsAndInits(ins, &inputs, &inits);
  ExpectDims(ins, ins.attrs().dimensions, inputs[0]->rank(), "reduced dimension");
  ExpectReducer(ins, Called(ins, 0, "to_apply="), inputs, inits);
  std::vector<int64_t> dims;
  for (int d = 0; d < inputs[0]->rank(); ++d) {
    if (!Contains(ins.attrs().dimensions, d)) dims.push_back(inputs[0]->dims[d]);
  }
  std::vector<Shape> outs;
  for (DType t : inits) outs.push_back(Shape::Array(t, dims));
  ExpectShape(ins, MaybeTuple(outs));
  return true;
}

void Verifier::VerifyReduceWindow(const Instruction& ins) {
  std::vector<const Shape*> inputs;
  std::vector<DType> inits;
  SplitInputsAndInits(ins, &inputs, &inits);
  ExpectWindow(ins, ins.attrs().window, inputs[0]->rank());
  ExpectReducer(ins, Called(ins, 0, "to_apply="), inputs, inits);
  std::vector<int64_t> dims;
  for (int d = 0; d < inputs[0]->rank(); ++d) dims.push_back(WindowedSize(inputs[0]->dims[d], ins.attrs().window[d]));
  std::vector<Shape> outs;
  for (DType t : inits) outs.push_back(Shape::Array(t, dims));
  ExpectShape(ins, MaybeTuple(outs));
}

void Verifier::VerifySelectAndScatter(const Instruction& ins) {
  ExpectOperandCount(ins, 3);
  const Shape& x = ArrayOperand(ins, 0);
  const Shape& source = ArrayOperand(ins, 1);
  const Shape& init = ArrayOperand(ins, 2);
  if (init.rank() != 0 || !SameType(init.dtype, x.dtype) || !SameType(source.dtype, x.dtype)) {
    Fail(ins, "source and init value must have the operand's element type (init a scalar)");
  }
  ExpectWindow(ins, ins.attrs().window, x.rank());
  for (const WindowDim& w : ins.attrs().window) {
    if (w.lhs_dilation != 1 || w.rhs_dilation != 1) Fail(ins, "select-and-scatter windows cannot be dilated");
  }
  std::vector<int64_t> dims;
  for (int d = 0; d < x.rank(); ++d) dims.push_back(WindowedSize(x.dims[d], ins.attrs().window[d]));
  if (source.dims != dims)
    Fail(ins, fmt::format("source is {}; the windows give [{}]", Str(source), fmt::join(dims, ",")));
  const Shape scalar = Shape::Array(x.dtype, {});
  ExpectSignature(ins, ins.select(), {scalar, scalar}, Shape::Array(DType::kBool, {}), "select");
  ExpectSignature(ins, ins.to_apply(), {scalar, scalar}, scalar, "scatter");
  ExpectShape(ins, x);
}

bool Verifier::VerifyWindowed(const Instruction& ins) {
  if (ins.opcode() == Opcode::kReduceWindow) {
    VerifyReduceWindow(ins);
  } else if (ins.opcode() == Opcode::kSelectAndScatter) {
    VerifySelectAndScatter(ins);
  } else {
    return false;
  }
  return true;
}

void Verifier::VerifyConvolution(const Instruction& ins) {
  ExpectOperandCount(ins, 2);
  const Shape& x = ArrayOperand(ins, 0);
  const Shape& k = ArrayOperand(ins, 1);
  const ConvDims& c = ins.attrs().conv;
  const Attributes& a = ins.attrs();
  const int rank = static_cast<int>(c.input_spatial.size()) + 2;
  if (x.rank() != rank || k.rank() != rank || !ins.shape().IsArray() || ins.shape().rank() != rank) {
    Fail(ins, fmt::format("dim_labels describe rank {}; input {} and kernel {}", rank, Str(x), Str(k)));
  }
  const int64_t fin = x.dims[c.input_feature], batch = x.dims[c.input_batch];
  const int64_t kin = k.dims[c.kernel_input_feature], kout = k.dims[c.kernel_output_feature];
  if (a.feature_group_count < 1 || a.batch_group_count < 1 || fin != kin * a.feature_group_count ||
      kout % a.feature_group_count != 0 || batch % a.batch_group_count != 0 || kout % a.batch_group_count != 0) {
    Fail(ins, fmt::format("input features {} must equal kernel input features {} x feature_group_count {}, and the "
                          "group counts must divide the batch and the output features",
                          fin, kin, a.feature_group_count));
  }
  ExpectWindow(ins, a.window, rank - 2);
  std::vector<int64_t> dims(static_cast<size_t>(rank));
  dims[c.output_batch] = batch / a.batch_group_count;
  dims[c.output_feature] = kout;
  for (int s = 0; s < rank - 2; ++s) {
    if (a.window[s].size != k.dims[c.kernel_spatial[s]])
      Fail(ins, "window sizes must equal the kernel's spatial sizes");
    dims[c.output_spatial[s]] = WindowedSize(x.dims[c.input_spatial[s]], a.window[s]);
  }
  if (ins.shape().dims != dims)
    Fail(ins, fmt::format("declared {}; the convolution gives [{}]", Str(ins.shape()), fmt::join(dims, ",")));
}

bool Verifier::VerifyContraction(const Instruction& ins) {
  if (ins.opcode() == Opcode::kConvolution) {
    VerifyConvolution(ins);
    return true;
  }
  if (ins.opcode() != Opcode::kDot) return false;
  ExpectOperandsAtLeast(ins, 2);
  const Shape& l = ArrayOperand(ins, 0);
  const Shape& r = ArrayOperand(ins, 1);
  const DotDims& d = ins.attrs().dot;
  if (d.lhs_batch.size() != d.rhs_batch.size() || d.lhs_contracting.size() != d.rhs_contracting.size()) {
    Fail(ins, "lhs and rhs need as many batch and as many contracting dimensions");
  }
  std::vector<int64_t> lhs_used = d.lhs_batch, rhs_used = d.rhs_batch;
  lhs_used.insert(lhs_used.end(), d.lhs_contracting.begin(), d.lhs_contracting.end());
  rhs_used.insert(rhs_used.end(), d.rhs_contracting.begin(), d.rhs_contracting.end());
  ExpectDims(ins, lhs_used, l.rank(), "lhs batch/contracting dimension");
  ExpectDims(ins, rhs_used, r.rank(), "rhs batch/contracting dimension");
  std::vector<int64_t> dims;
  for (size_t i = 0; i < d.lhs_batch.size(); ++i) {
    if (l.dims[d.lhs_batch[i]] != r.dims[d.rhs_batch[i]]) Fail(ins, "batch dimensions must have equal sizes");
    dims.push_back(l.dims[d.lhs_batch[i]]);
  }
  for (size_t i = 0; i < d.lhs_contracting.size(); ++i) {
    if (l.dims[d.lhs_contracting[i]] != r.dims[d.rhs_contracting[i]]) {
      Fail(ins, fmt::format("contracting dimensions {} of {} and {} of {} differ in size", d.lhs_contracting[i], Str(l),
                            d.rhs_contracting[i], Str(r)));
    }
  }
  for (int i = 0; i < l.rank(); ++i) {
    if (!Contains(lhs_used, i)) dims.push_back(l.dims[i]);
  }
  for (int i = 0; i < r.rank(); ++i) {
    if (!Contains(rhs_used, i)) dims.push_back(r.dims[i]);
  }
  if (!ins.shape().IsArray() || ins.shape().dims != dims) {
    Fail(ins, fmt::format("declared {}; the dot gives [{}]", Str(ins.shape()), fmt::join(dims, ",")));
  }
  return true;
}

void Verifier::VerifyGather(const Instruction& ins) {
  ExpectOperandCount(ins, 2);
  const Shape& x = ArrayOperand(ins, 0);
  const Shape& idx = ArrayOperand(ins, 1);
  const GatherDims& g = ins.attrs().gather;
  if (!IsInteger(idx.dtype)) Fail(ins, "start indices must be integers");
  if (g.index_vector_dim < 0 || g.index_vector_dim > idx.rank()) Fail(ins, "index_vector_dim is out of range");
  const int64_t index_len = g.index_vector_dim == idx.rank() ? 1 : idx.dims[g.index_vector_dim];
  if (static_cast<int64_t>(g.start_index_map.size()) != index_len) {
    Fail(ins,
         fmt::format("start_index_map has {} entries; the index vectors have {}", g.start_index_map.size(), index_len));
  }
  ExpectDims(ins, g.start_index_map, x.rank(), "start_index_map entry");
  std::vector<int64_t> collapsed = g.collapsed_slice_dims;
  collapsed.insert(collapsed.end(), g.operand_batching_dims.begin(), g.operand_batching_dims.end());
  ExpectDims(ins, collapsed, x.rank(), "collapsed/batching dimension");
  if (static_cast<int>(g.slice_sizes.size()) != x.rank())
    Fail(ins, fmt::format("slice_sizes needs {} entries", x.rank()));
  for (int i = 0; i < x.rank(); ++i) {
    if (g.slice_sizes[i] < 0 || g.slice_sizes[i] > x.dims[i])
      Fail(ins, fmt::format("slice size {} exceeds dimension {}", g.slice_sizes[i], i));
    if (Contains(collapsed, i) && g.slice_sizes[i] > 1)
      Fail(ins, fmt::format("collapsed dimension {} needs slice size <= 1", i));
  }
  const size_t batch_rank = static_cast<size_t>(idx.rank()) - (g.index_vector_dim < idx.rank() ? 1 : 0);
  const size_t out_rank = g.offset_dims.size() + batch_rank;
  if (g.offset_dims.size() + collapsed.size() != static_cast<size_t>(x.rank())) {
    Fail(ins, "offset_dims must have one entry per dimension that is not collapsed");
  }
  ExpectDims(ins, g.offset_dims, static_cast<int64_t>(out_rank), "offset dimension");
  if (g.start_indices_batching_dims.size() != g.operand_batching_dims.size()) {
    Fail(ins, "operand_batching_dims and start_indices_batching_dims need as many entries");
  }
  std::vector<int64_t> dims;
  size_t offset = 0, batch = 0;
  for (size_t i = 0; i < out_rank; ++i) {
    if (Contains(g.offset_dims, static_cast<int64_t>(i))) {
      while (Contains(collapsed, static_cast<int64_t>(offset))) ++offset;
      dims.push_back(g.slice_sizes[offset++]);
    } else {
      if (static_cast<int64_t>(batch) == g.index_vector_dim) ++batch;
      dims.push_back(idx.dims[batch++]);
    }
  }
  ExpectShape(ins, Shape::Array(x.dtype, dims));
}

void Verifier::VerifyScatter(const Instruction& ins) {
  if (ins.operand_count() < 3 || ins.operand_count() % 2 == 0) Fail(ins, "takes N operands, the indices and N updates");
  const int64_t n = (ins.operand_count() - 1) / 2;
  const Shape& x = ArrayOperand(ins, 0);
  const Shape& idx = ArrayOperand(ins, n);
  const ScatterDims& s = ins.attrs().scatter;
  if (!IsInteger(idx.dtype)) Fail(ins, "scatter indices must be integers");
  if (s.index_vector_dim < 0 || s.index_vector_dim > idx.rank()) Fail(ins, "index_vector_dim is out of range");
  const int64_t index_len = s.index_vector_dim == idx.rank() ? 1 : idx.dims[s.index_vector_dim];
  if (static_cast<int64_t>(s.scatter_dims_to_operand_dims.size()) != index_len) {
    Fail(ins, "scatter_dims_to_operand_dims needs one entry per index vector element");
  }
  ExpectDims(ins, s.scatter_dims_to_operand_dims, x.rank(), "scatter_dims_to_operand_dims entry");
  std::vector<int64_t> inserted = s.inserted_window_dims;
  inserted.insert(inserted.end(), s.input_batching_dims.begin(), s.input_batching_dims.end());
  ExpectDims(ins, inserted, x.rank(), "inserted/batching dimension");
  std::vector<int64_t> batch_dims;
  for (int i = 0; i < idx.rank(); ++i) {
    if (i != s.index_vector_dim) batch_dims.push_back(idx.dims[i]);
  }
  std::vector<Shape> outs;
  std::vector<DType> types;
  for (int64_t i = 0; i < n; ++i) {
    const Shape& op = ArrayOperand(ins, i);
    const Shape& upd = ArrayOperand(ins, n + 1 + i);
    if (op.dims != x.dims || !SameType(upd.dtype, op.dtype))
      Fail(ins, "operands must share dimensions; updates their types");
    if (static_cast<size_t>(upd.rank()) != s.update_window_dims.size() + batch_dims.size() ||
        s.update_window_dims.size() + inserted.size() != static_cast<size_t>(x.rank())) {
      Fail(ins, fmt::format("update {} is {}: its rank must be the window dimensions plus the index batch dimensions",
                            i, Str(upd)));
    }
    ExpectDims(ins, s.update_window_dims, upd.rank(), "update window dimension");
    size_t w = 0, b = 0;
    for (int d = 0; d < upd.rank(); ++d) {
      if (Contains(s.update_window_dims, d)) {
        while (Contains(inserted, static_cast<int64_t>(w))) ++w;
        if (upd.dims[d] > x.dims[w++])
          Fail(ins, fmt::format("update window dimension {} is larger than the operand's", d));
      } else if (upd.dims[d] != batch_dims[b++]) {
        Fail(ins, fmt::format("update dimension {} must equal the indices' batch dimension", d));
      }
    }
    outs.push_back(op);
    types.push_back(op.dtype);
  }
  std::vector<const Shape*> as_inputs;
  for (int64_t i = 0; i < n; ++i) as_inputs.push_back(&ins.operand(n + 1 + i)->shape());
  ExpectReducer(ins, Called(ins, 0, "to_apply="), as_inputs, types);
  ExpectShape(ins, MaybeTuple(outs));
}

void Verifier::VerifySort(const Instruction& ins) {
  ExpectOperandsAtLeast(ins, 1);
  const Shape& first = ArrayOperand(ins, 0);
  if (ins.attrs().dimensions.size() != 1) Fail(ins, "dimensions must name the sorted dimension");
  ExpectDims(ins, ins.attrs().dimensions, first.rank(), "sort dimension");
  std::vector<Shape> outs, params;
  for (int64_t i = 0; i < ins.operand_count(); ++i) {
    const Shape& x = ArrayOperand(ins, i);
    if (x.dims != first.dims) Fail(ins, "sorted operands must have one dimensions");
    outs.push_back(x);
    params.push_back(Shape::Array(x.dtype, {}));
    params.push_back(Shape::Array(x.dtype, {}));
  }
  ExpectSignature(ins, Called(ins, 0, "to_apply= (the comparator)"), params, Shape::Array(DType::kBool, {}),
                  "comparator");
  ExpectShape(ins, MaybeTuple(outs));
}

bool Verifier::VerifyIndexing(const Instruction& ins) {
  switch (ins.opcode()) {
    case Opcode::kGather: VerifyGather(ins); return true;
    case Opcode::kScatter: VerifyScatter(ins); return true;
    case Opcode::kSort: VerifySort(ins); return true;
    default: return false;
  }
}

int64_t Verifier::GroupSize(const Instruction& ins) {
  return static_cast<int64_t>(
      GroupsOf(ins, module_.replica_count(), module_.num_partitions()).front().size());
}

}  // namespace spmdsim::hlo::internal
