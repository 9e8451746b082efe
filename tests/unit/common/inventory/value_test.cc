#include "common/inventory/value.h"

#include <cmath>

#include "gtest/gtest.h"

namespace triage::inventory {
namespace {

TEST(ResolvePlainScalar, Yaml11LikePyYaml) {
  using K = Value::Kind;
  struct Case {
    const char* text;
    K kind;
  };
  const Case cases[] = {
      {"", K::kNull},        {"~", K::kNull},
      {"null", K::kNull},    {"true", K::kBool},
      {"False", K::kBool},   {"yes", K::kBool},
      {"off", K::kBool},     {"0", K::kInt},
      {"-12", K::kInt},      {"1_000", K::kInt},
      {"0x1F", K::kInt},     {"0.98", K::kFloat},
      {"1.", K::kFloat},     {".5", K::kFloat},
      {"1.0e+3", K::kFloat}, {".inf", K::kFloat},
      {".nan", K::kFloat},   {"1e3", K::kString},
      {"n150", K::kString},  {"EXPECTED_PASSING", K::kString},
      {"maybe", K::kString}, {"0.5B", K::kString},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(ResolvePlainScalar(c.text).kind, c.kind) << "'" << c.text << "'";
  }
  EXPECT_FALSE(ResolvePlainScalar("no").boolean);
  EXPECT_EQ(ResolvePlainScalar("0x1F").integer, 31);
  EXPECT_EQ(ResolvePlainScalar("017").integer, 15);
  EXPECT_DOUBLE_EQ(ResolvePlainScalar("0.98").number, 0.98);
  EXPECT_TRUE(std::isnan(ResolvePlainScalar(".nan").number));
}

TEST(Value, FloatRenderingStaysAFloat) {
  EXPECT_EQ(Value::Float(0.98).string, "0.98");
  EXPECT_EQ(Value::Float(100).string, "100.0");
  EXPECT_EQ(ResolvePlainScalar(Value::Float(1e20).string).kind, Value::Kind::kFloat);
}

TEST(Value, EqualityIgnoresPositionAndStyle) {
  Value a = Value::String("x");
  a.pos = {3, 4};
  a.quoted = true;
  EXPECT_EQ(a, Value::String("x"));
  EXPECT_NE(Value::Int(1), Value::Float(1.0));
  EXPECT_EQ(Value::List({Value::String("a")}).DebugString(), "[a]");
}

}  // namespace
}  // namespace triage::inventory
