#include "sim/array.h"

#include <gtest/gtest.h>

namespace spmdsim {
namespace {

TEST(Array, FromVectorKeepsShapeAndValues) {
  Array a = Array::FromVector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(a.ShapeString(), "float32[2,3]");
  EXPECT_EQ(a.data<float>()[4], 5.0f);
}

}  // namespace
}  // namespace spmdsim
