#include "common/registry/registry_union.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace triage::registry {
namespace {

// A verify phase whose entries return these classes ("" unknown), with these lines.
v1::ShardSpec Spec(const std::vector<std::string>& classes,
                   const std::vector<v1::RegistryOp>& ops) {
  v1::ShardSpec s;
  for (std::size_t i = 0; i < classes.size(); ++i) {
    auto* e = s.add_entries();
    e->set_key("m" + std::to_string(i));
    e->set_output_class(classes[i]);
  }
  for (const auto& op : ops) *s.add_pre_registry() = op;
  return s;
}

std::vector<std::string> Lines(const RegistryUnion& u) {
  std::vector<std::string> out;
  for (const auto& op : u.Ops()) {
    out.push_back((op.kind() == v1::RegistryOp::ADD ? "+" : "-") + op.cls() +
                  (op.attr().empty() ? "" : "." + op.attr()));
  }
  return out;
}

TEST(RegistryUnionTest, ShardsWhoseLinesNameOtherClassesThanTheirCompanyReturnShareOneFile) {
  RegistryUnion u;
  EXPECT_TRUE(u.Add(Spec({"GptOutput"}, {AddOp("GptOutput", "logits")})));
  EXPECT_TRUE(u.Add(Spec({"BertOutput"}, {AddOp("BertOutput", "logits")})));
  EXPECT_TRUE(u.Add(Spec({"Tensor", "tuple"}, {}))) << "no line for what it returns";
  EXPECT_TRUE(u.Add(Spec({"MgpOutput"}, {RemoveOp("MgpOutput"), AddOp("MgpOutput", "logits")})));
  EXPECT_TRUE(u.Add(Spec({"GptOutput"}, {AddOp("GptOutput", "logits")}))) << "the same line";
  EXPECT_EQ(Lines(u), (std::vector<std::string>{"+GptOutput.logits", "+BertOutput.logits",
                                                "-MgpOutput", "+MgpOutput.logits"}));
}

TEST(RegistryUnionTest, AShardNeverSeesALineItsOwnSpecDoesNotGiveIt) {
  {
    RegistryUnion u;
    ASSERT_TRUE(u.Add(Spec({"GptOutput"}, {AddOp("GptOutput", "logits")})));
    EXPECT_FALSE(u.Add(Spec({"GptOutput"}, {}))) << "it returns the class the line names";
    EXPECT_FALSE(u.Add(Spec({"GptOutput"}, {AddOp("GptOutput", "hidden")}))) << "another attribute";
    EXPECT_EQ(Lines(u), (std::vector<std::string>{"+GptOutput.logits"})) << "nothing changed";
  }
  {
    RegistryUnion u;
    ASSERT_TRUE(u.Add(Spec({"GptOutput"}, {})));
    EXPECT_FALSE(u.Add(Spec({"BertOutput"}, {AddOp("GptOutput", "logits")})))
        << "its line would reach a shard returning the class";
    EXPECT_TRUE(u.Add(Spec({"BertOutput"}, {AddOp("BertOutput", "logits")})));
  }
}

TEST(RegistryUnionTest, AShardWithAnEntryOfUnknownClassSharesOnlyTheSameLines) {
  RegistryUnion u;
  ASSERT_TRUE(u.Add(Spec({""}, {AddOp("Wave", "logits")})));
  EXPECT_FALSE(u.Add(Spec({"BertOutput"}, {AddOp("Wave", "logits"), AddOp("BertOutput", "x")})));
  EXPECT_TRUE(u.Add(Spec({"BertOutput"}, {AddOp("Wave", "logits")})));
  RegistryUnion v;
  ASSERT_TRUE(v.Add(Spec({"BertOutput"}, {AddOp("BertOutput", "x")})));
  EXPECT_FALSE(v.Add(Spec({"", "Tensor"}, {}))) << "it might return BertOutput";
  EXPECT_TRUE(v.Add(Spec({""}, {AddOp("BertOutput", "x")})));
}

}  // namespace
}  // namespace triage::registry
