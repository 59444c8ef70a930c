#include "ops/linalg.h"

#include <functional>
#include <map>
#include <random>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ops/elementwise.h"
#include "ops/shape_ops.h"
#include "tests/ops/ops_test_util.h"

namespace spmdsim {
namespace {

using ops_test::ExpectValues;
using ops_test::ErrorOf;
using ops_test::MakeArray;
using ::testing::HasSubstr;

// Naive einsum in double: loops over every assignment of every label (explicit output, letters only).
std::vector<double> ReferenceEinsum(const std::string& spec, const std::vector<Array>& ops) {
  size_t arrow = spec.find("->");
  std::string out = spec.substr(arrow + 2);
  std::vector<std::string> terms;
  std::string in = spec.substr(0, arrow);
  for (size_t s = 0;;) {
    size_t c = in.find(',', s);
    terms.push_back(in.substr(s, c == std::string::npos ? std::string::npos : c - s));
    if (c == std::string::npos) break;
    s = c + 1;
  }
  std::map<char, int64_t> size;
  for (size_t i = 0; i < ops.size(); ++i)
    for (size_t d = 0; d < terms[i].size(); ++d) size[terms[i][d]] = ops[i].shape()[d];
  std::vector<char> labels;
  int64_t total = 1;
  for (auto& [l, n] : size) {
    labels.push_back(l);
    total *= n;
  }
  std::vector<std::vector<double>> values;
  for (const Array& a : ops) values.push_back(a.ToDoubles());
  int64_t out_size = 1;
  for (char l : out) out_size *= size[l];
  std::vector<double> result(static_cast<size_t>(out_size), 0);
  std::map<char, int64_t> at;
  for (int64_t i = 0; i < total; ++i) {
    int64_t rem = i;
    for (size_t k = labels.size(); k-- > 0;) {
      at[labels[k]] = rem % size[labels[k]];
      rem /= size[labels[k]];
    }
    double p = 1;
    for (size_t o = 0; o < ops.size(); ++o) {
      int64_t f = 0;
      for (size_t d = 0; d < terms[o].size(); ++d) f = f * ops[o].shape()[d] + at[terms[o][d]];
      p *= values[o][f];
    }
    int64_t f = 0;
    for (char l : out) f = f * size[l] + at[l];
    result[f] += p;
  }
  return result;
}

double Rtol(DType dtype) {
  return dtype == DType::kF64 ? 1e-13 : dtype == DType::kF32 ? 1e-5 : ops_test::Tolerance(dtype);
}

TEST(Linalg, MatMulOfTwoMatrices) {
  Array a = Array::FromVector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  Array b = Array::FromVector<float>({1, 0, 0, 1, 1, 1}, {3, 2});
  Array c = MatMul(a, b);
  EXPECT_EQ(c.ShapeString(), "float32[2,2]");
  EXPECT_EQ(c.ToDoubles(), (std::vector<double>{4, 5, 10, 11}));
}

TEST(Linalg, MatMulFollowsNumpysRulesForVectorsAndBatchBroadcasting) {
  std::mt19937 rng(1);
  struct Case {
    std::vector<int64_t> a, b, out;
    std::string spec;  // the same product as an einsum, for the reference
  };
  const Case cases[] = {
      {{7, 1, 2, 3}, {5, 3, 4}, {7, 5, 2, 4}, ""},
      {{3}, {3, 4}, {4}, "k,kn->n"},
      {{2, 3}, {3}, {2}, "mk,k->m"},
      {{3}, {3}, {}, "k,k->"},
      {{2, 5, 3}, {3, 4}, {2, 5, 4}, "bmk,kn->bmn"},
      {{5, 3}, {2, 3, 4}, {2, 5, 4}, "mk,bkn->bmn"},
      {{3}, {2, 3, 4}, {2, 4}, "k,bkn->bn"},
      {{2, 4, 3}, {3}, {2, 4}, "bmk,k->bm"},
  };
  for (DType dtype : {DType::kF32, DType::kF64, DType::kBF16, DType::kF16, DType::kI32, DType::kI64}) {
    for (const Case& c : cases) {
      Array a = ops_test::RandomArray(rng, dtype, c.a, -3, 3), b = ops_test::RandomArray(rng, dtype, c.b, -3, 3);
      Array y = MatMul(a, b);
      ASSERT_EQ(y.shape(), c.out) << a.ShapeString() << " x " << b.ShapeString();
      ASSERT_EQ(y.dtype(), dtype);
      std::vector<double> expected;
      if (c.spec.empty()) {
        // [7,1,2,3] x [5,3,4]: broadcast a over 5 and b over 7.
        Array ab = BroadcastTo(a, {7, 5, 2, 3}), bb = BroadcastTo(b, {7, 5, 3, 4});
        expected = ReferenceEinsum("xymk,ykn->xymn", {ab, Reshape(Slice(bb, {0, 0, 0, 0}, {1, 5, 3, 4}), {5, 3, 4})});
      } else {
        expected = ReferenceEinsum(c.spec, {a, b});
      }
      for (double& e : expected)
        e = ops_test::RoundTo(dtype, dtype == DType::kF64 || !IsFloating(dtype) ? e : static_cast<float>(e));
      ExpectValues(y, expected, Rtol(dtype), 1e-3, fmt::format("{} x {}", a.ShapeString(), b.ShapeString()));
    }
  }
}

TEST(Linalg, DotFollowsNumpyDot) {
  Array a = Array::Iota({2, 3, 4}, DType::kF64), b = Array::Iota({5, 4, 6}, DType::kF64);
  Array d = Dot(a, b);
  EXPECT_EQ(d.shape(), (std::vector<int64_t>{2, 3, 5, 6}));
  ExpectValues(d, ReferenceEinsum("ijk,lkm->ijlm", {a, b}), 1e-14);
  Array v = Array::FromVector<float>({1, 2, 3}, {3});
  EXPECT_EQ(Dot(v, v).ToDoubles(), std::vector<double>{14});
  EXPECT_EQ(Dot(v, Array::Scalar<float>(2)).ToDoubles(), (std::vector<double>{2, 4, 6}));
  EXPECT_EQ(Dot(Array::Iota({2, 3}, DType::kF32), v).ToDoubles(), (std::vector<double>{8, 26}));
  EXPECT_EQ(ErrorOf([&] { Dot(a, Array::Zeros({3, 2}, DType::kF64)); }),
            "TypeError: Dot: dot_general requires contracting dimensions to have the same shape, got (4,) and (3,).");
}

TEST(Linalg, DotGeneralWithRandomDimensionNumbersMatchesLoops) {
  std::mt19937 rng(17);
  const std::string letters = "abcdefgh";
  for (DType dtype : ops_test::kFloatTypes) {
    for (int trial = 0; trial < 15; ++trial) {
      // Choose labels: batch, contracting, lhs-free, rhs-free; then shuffle each operand's dimension order.
      int nb = rng() % 2, nc = rng() % 3, nl = rng() % 2 + (trial % 2), nr = rng() % 2;
      std::string batch = letters.substr(0, nb), con = letters.substr(2, nc), lf = letters.substr(5, nl),
                  rf = letters.substr(7, nr);
      if (lf.size() > 1) lf = "fg";
      std::string lhs_labels = batch + con + lf, rhs_labels = batch + con + rf;
      std::shuffle(lhs_labels.begin(), lhs_labels.end(), rng);
      std::shuffle(rhs_labels.begin(), rhs_labels.end(), rng);
      std::map<char, int64_t> size;
      for (char l : letters) size[l] = std::uniform_int_distribution<int64_t>(1, 4)(rng);
      std::vector<int64_t> ls, rs;
      for (char l : lhs_labels) ls.push_back(size[l]);
      for (char l : rhs_labels) rs.push_back(size[l]);
      Array lhs = ops_test::RandomArray(rng, dtype, ls), rhs = ops_test::RandomArray(rng, dtype, rs);
      DotDimensionNumbers dims;
      for (char l : batch) {
        dims.lhs_batch.push_back(static_cast<int>(lhs_labels.find(l)));
        dims.rhs_batch.push_back(static_cast<int>(rhs_labels.find(l)));
      }
      for (char l : con) {
        dims.lhs_contracting.push_back(static_cast<int>(lhs_labels.find(l)));
        dims.rhs_contracting.push_back(static_cast<int>(rhs_labels.find(l)));
      }
      std::string out = batch;
      for (char l : lhs_labels)
        if (lf.find(l) != std::string::npos) out += l;
      for (char l : rhs_labels)
        if (rf.find(l) != std::string::npos) out += l;
      Array y = DotGeneral(lhs, rhs, dims);
      std::vector<double> expected = ReferenceEinsum(lhs_labels + "," + rhs_labels + "->" + out, {lhs, rhs});
      for (double& e : expected) e = ops_test::RoundTo(dtype, dtype == DType::kF64 ? e : static_cast<float>(e));
      ExpectValues(y, expected, Rtol(dtype), 1e-3, lhs_labels + "," + rhs_labels + "->" + out);
    }
  }
}

TEST(Linalg, EinsumCommonContractions) {
  std::mt19937 rng(8);
  struct Case {
    std::string spec;
    std::vector<std::vector<int64_t>> shapes;
  };
  const Case cases[] = {
      {"bsd,df->bsf", {{2, 3, 4}, {4, 5}}},
      {"bhqd,bhkd->bhqk", {{2, 2, 3, 4}, {2, 2, 5, 4}}},
      {"bhqk,bhkd->bhqd", {{2, 2, 3, 5}, {2, 2, 5, 4}}},
      {"bsf,fd->bsd", {{2, 3, 5}, {5, 4}}},
      {"ij->ji", {{3, 4}}},
      {"ij->i", {{3, 4}}},
      {"ij->", {{3, 4}}},
      {"i,j->ij", {{3}, {4}}},
      {"ij,jk,kl->il", {{2, 3}, {3, 4}, {4, 5}}},
      {"ab,cd->", {{2, 3}, {4, 5}}},
      {"bqd,bkd->bqk", {{2, 3, 4}, {2, 6, 4}}},
      {"ecd,bsd->besc", {{3, 2, 4}, {2, 5, 4}}},
  };
  for (DType dtype : {DType::kF32, DType::kF64, DType::kBF16, DType::kI32}) {
    for (const Case& c : cases) {
      std::vector<Array> ops;
      for (const auto& s : c.shapes) ops.push_back(ops_test::RandomArray(rng, dtype, s, -3, 3));
      Array y = Einsum(c.spec, ops);
      std::vector<double> expected = ReferenceEinsum(c.spec, ops);
      // Several contractions in sequence round several times in 16-bit types.
      double rtol = c.shapes.size() > 2 && dtype == DType::kBF16 ? 0.05 : Rtol(dtype);
      ExpectValues(y, expected, rtol, 0.05, c.spec + " " + std::string(DTypeName(dtype)));
    }
  }
}

TEST(Linalg, EinsumImplicitOutputAndEllipsis) {
  Array a = Array::Iota({2, 3}, DType::kF64), b = Array::Iota({3, 4}, DType::kF64);
  ExpectValues(Einsum("ij,jk", a, b), ReferenceEinsum("ij,jk->ik", {a, b}), 0);
  ExpectValues(Einsum("ba", a), ReferenceEinsum("ba->ab", {a}), 0);  // implicit output is alphabetical
  Array x = Array::Iota({2, 5, 3}, DType::kF64);
  Array y = Einsum("...d,df->...f", x, b);
  EXPECT_EQ(y.shape(), (std::vector<int64_t>{2, 5, 4}));
  ExpectValues(y, ReferenceEinsum("xyd,df->xyf", {x, b}), 0);
  ExpectValues(Einsum("...d,df", x, b), ReferenceEinsum("xyd,df->xyf", {x, b}), 0);
  ExpectValues(Einsum("...d,df->f", x, b), ReferenceEinsum("xyd,df->f", {x, b}), 0);
}

TEST(Linalg, EinsumErrorsUseOptEinsumsWording) {
  Array a = Array::Zeros({2, 3}, DType::kF32), b = Array::Zeros({4, 5}, DType::kF32);
  EXPECT_EQ(ErrorOf([&] { Einsum("ij,jk->ik", a, b); }),
            "ValueError: Einsum: Size of label 'j' for operand 1 (4) does not match previous terms (3).");
  EXPECT_EQ(ErrorOf([&] { Einsum("ijk,jk->i", a, b); }),
            "ValueError: Einsum: Einstein sum subscript 'ijk' does not contain the correct number of indices for "
            "operand 0.");
  EXPECT_THAT(ErrorOf([&] { Einsum("ij->i", {a, b}); }),
              HasSubstr("Number of einsum subscripts must be equal to the number of operands"));
  EXPECT_EQ(ErrorOf([&] { Einsum("ij->iz", a); }),
            "ValueError: Einsum: Output character 'z' did not appear in the input");
  EXPECT_EQ(ErrorOf([&] { Einsum("ij->ii", a); }),
            "ValueError: Einsum: Output character 'i' appeared more than once in the output");
  EXPECT_EQ(ErrorOf([&] { Einsum("i1->i", a); }), "ValueError: Einsum: Character '1' is not a valid symbol.");
  EXPECT_THAT(ErrorOf([&] { Einsum("ii->i", Array::Zeros({3, 3}, DType::kF32)); }),
              HasSubstr("NotImplementedError: Einsum: label 'i' repeats within operand 0"));
  EXPECT_THAT(ErrorOf([&] { Einsum("..i...->i", a); }), HasSubstr("Invalid Ellipses"));
}

TEST(Linalg, MatMulAndDotGeneralErrorsUseJaxsWording) {
  Array a = Array::Zeros({2, 3}, DType::kF32), b = Array::Zeros({4, 5}, DType::kF32);
  EXPECT_EQ(
      ErrorOf([&] { MatMul(a, b); }),
      "TypeError: MatMul: dot_general requires contracting dimensions to have the same shape, got (3,) and (4,).");
  EXPECT_EQ(ErrorOf([&] { MatMul(Array::Scalar<float>(1), a); }),
            "ValueError: MatMul: matmul input operand 0 must have ndim at least 1, but it has ndim 0");
  EXPECT_EQ(ErrorOf([&] { MatMul(Array::Zeros({2, 2, 3}, DType::kF32), Array::Zeros({3, 3, 4}, DType::kF32)); }),
            "ValueError: MatMul: Incompatible shapes for broadcasting: shapes=[(2,), (3,)]");
  EXPECT_THAT(ErrorOf([&] { MatMul(Array::Zeros({2, 2}, DType::kBool), Array::Zeros({2, 2}, DType::kBool)); }),
              HasSubstr("does not accept bool"));
  EXPECT_EQ(ErrorOf([&] { DotGeneral(a, a, {{1}, {1}, {0}, {}}); }),
            "TypeError: DotGeneral: dot_general requires equal numbers of lhs_batch and rhs_batch dimensions, got "
            "lhs_batch (0,) and rhs_batch ().");
  EXPECT_EQ(ErrorOf([&] { DotGeneral(a, a, {{2}, {1}, {}, {}}); }),
            "TypeError: DotGeneral: dot_general requires lhs dimension numbers to be nonnegative and less than the "
            "number of axes of the lhs value, got lhs_batch of () and lhs_contracting of (2,) for lhs of rank 2");
  EXPECT_THAT(ErrorOf([&] { DotGeneral(a, a, {{1}, {5}, {}, {}}); }), HasSubstr("requires rhs dimension numbers"));
  EXPECT_THAT(ErrorOf([&] { DotGeneral(a, a, {{1, 1}, {0, 1}, {}, {}}); }),
              HasSubstr("lhs contracting dimensions to be distinct"));
  EXPECT_THAT(ErrorOf([&] { DotGeneral(a, a, {{1}, {1}, {1}, {0}}); }), HasSubstr("disjoint"));
  EXPECT_THAT(ErrorOf([&] { DotGeneral(a, b, {{1}, {1}, {0}, {0}}); }),
              HasSubstr("lhs batch dimensions and rhs batch dimensions to have the same shape, got (2,) and (4,)."));
}

TEST(Linalg, AbstractOperandsGiveAbstractResults) {
  Array x = Array::Abstract({8, 128, 512}, DType::kBF16), w = Array::Abstract({512, 2048}, DType::kBF16);
  EXPECT_EQ(MatMul(x, w).ShapeString(), "bfloat16[8,128,2048]");
  EXPECT_TRUE(MatMul(x, w).is_abstract());
  EXPECT_EQ(Einsum("bsd,df->bsf", x, w).ShapeString(), "bfloat16[8,128,2048]");
  Array q = Array::Abstract({2, 8, 16, 64}, DType::kF32);
  EXPECT_EQ(Einsum("bhqd,bhkd->bhqk", q, q).ShapeString(), "float32[2,8,16,16]");
  EXPECT_EQ(Dot(Array::Abstract({3, 4}, DType::kF32), Array::Abstract({5, 4, 6}, DType::kF32)).ShapeString(),
            "float32[3,5,6]");
}

template <typename A = Array>
void ExpectVaryingUnion() {
  if constexpr (!requires(const A& x) { x.varying_axes(); }) {
    GTEST_SKIP() << "Array has no varying_axes() in this build";
  } else {
    A a = A::Zeros({2, 3}, DType::kF32).WithVaryingAxes(0b001);
    A b = A::Zeros({3, 4}, DType::kF32).WithVaryingAxes(0b100);
    EXPECT_EQ(MatMul(a, b).varying_axes(), 0b101u);
    EXPECT_EQ(Einsum("ij,jk->ki", a, b).varying_axes(), 0b101u);
    EXPECT_EQ(Dot(a, b).varying_axes(), 0b101u);
  }
}

TEST(Linalg, ResultsCarryTheUnionOfTheOperandsVaryingAxes) { ExpectVaryingUnion(); }

TEST(Linalg, MegatronMlpShardsSumToTheUnshardedMlp) {
  // Column-parallel W1 (split on f) then row-parallel W2 (split on f): the partial outputs sum to the full MLP.
  std::mt19937 rng(33);
  Array x = ops_test::RandomArray(rng, DType::kF32, {2, 4, 8}), w1 = ops_test::RandomArray(rng, DType::kF32, {8, 16}),
        w2 = ops_test::RandomArray(rng, DType::kF32, {16, 8});
  Array full = MatMul(Gelu(Einsum("bsd,df->bsf", x, w1)), w2);
  Array total;
  for (int shard = 0; shard < 4; ++shard) {
    Array w1s = Slice(w1, {0, 4 * shard}, {8, 4 * shard + 4}), w2s = Slice(w2, {4 * shard, 0}, {4 * shard + 4, 8});
    Array partial = MatMul(Gelu(Einsum("bsd,df->bsf", x, w1s)), w2s);
    total = shard == 0 ? partial : Add(total, partial);
  }
  ExpectValues(total, full.ToDoubles(), 1e-5, 1e-5);
}

}  // namespace
}  // namespace spmdsim
