// Tests against the real tt-xla test-config files in ../shared/data (read at run time, never
// copied into the project; each test skips with a message when the folder is absent).

#include <map>
#include <random>
#include <set>
#include <string>

#include "agent/playbooks/catalog.h"
#include "common/classify/classify.h"
#include "common/diff/apply_diff.h"
#include "common/diff/unified_diff.h"
#include "common/inventory/editor.h"
#include "common/inventory/inventory.h"
#include "common/inventory/schema.h"
#include "common/util/strings.h"
#include "common/util/text.h"
#include "gtest/gtest.h"
#include "tests/support/test_support.h"

namespace triage::inventory {
namespace {

std::vector<std::filesystem::path> AllYaml(const std::filesystem::path& root) {
  std::vector<std::filesystem::path> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(root)) {
    if (e.is_regular_file() && e.path().extension() == ".yaml") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(RealData, AllThirteenFilesLoadAndValidate) {
  TRIAGE_REQUIRE_SHARED_DATA(dir);
  WorkTreeSource source(dir / "head");
  auto inv = LoadInventory(source);
  ASSERT_TRUE(inv.ok()) << inv.status();
  EXPECT_EQ(inv->documents.size(), 13u);
  // The key grammar is the runner's: today's, read from def test_all_models_torch's decorators.
  EXPECT_EQ(inv->grammar.source, "tests/runner/test_models.py:344");
  EXPECT_EQ(inv->grammar.Pattern(), DefaultKeyGrammar().Pattern());
  for (const Document& doc : inv->documents) {
    EXPECT_TRUE(doc.ok()) << doc.path() << ": " << doc.diagnostics().front().ToString();
  }
  // What tt-xla's own loader misses in these files: one key defined in two jax files.
  std::vector<std::string> errors;
  for (const auto& d : inv->diagnostics) {
    if (d.severity == util::Severity::kError) errors.push_back(d.ToString());
  }
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_NE(errors[0].find("duplicate key 'falcon/jax-3_3B_Base-single_device-inference' also "
                           "defined in tests/runner/test_config/jax/"
                           "test_config_inference_data_parallel.yaml:11"),
            std::string::npos)
      << errors[0];
  size_t training = 0;
  for (const auto& ref : inv->TestEntries()) {
    ASSERT_TRUE(ref.entry->parts.has_value()) << ref.entry->key;
    if (ref.entry->parts->run_mode == "training") ++training;
  }
  EXPECT_GT(training, 400u);
}

TEST(RealData, EveryFileRoundTripsByteIdentically) {
  TRIAGE_REQUIRE_SHARED_DATA(dir);
  for (const auto& path : AllYaml(dir)) {
    const std::string bytes = testing::ReadFileOrDie(path);
    Document doc = Document::Parse(path.filename().string(), bytes);
    auto out = ApplyEdits(doc, std::vector<EntryEdit>{});
    ASSERT_TRUE(out.ok()) << path << ": " << out.status();
    EXPECT_EQ(*out, bytes) << path;
    // Re-setting every entry's status to its own value changes nothing either.
    std::vector<EntryEdit> same;
    for (const Entry& e : doc.entries()) {
      if (const Value* status = e.Field("status"))
        same.push_back({e.key, {}, {{"status", *status}}, {}});
    }
    out = ApplyEdits(doc, same);
    ASSERT_TRUE(out.ok()) << path << ": " << out.status();
    EXPECT_EQ(*out, bytes) << path;
  }
}

// A real file saved with CRLF line endings is one error for the file, not one per line.
TEST(RealData, CrlfCopyOfARealFileIsOneError) {
  TRIAGE_REQUIRE_SHARED_DATA(dir);
  const auto path =
      dir / "head/tests/runner/test_config/torch/test_config_training_single_device.yaml";
  const std::string bytes = testing::ReadFileOrDie(path);
  std::string crlf;
  std::size_t lines = 0;
  for (char c : bytes) {
    if (c == '\n') {
      crlf += '\r';
      ++lines;
    }
    crlf += c;
  }
  ASSERT_GT(lines, 1000u);
  Document doc = Document::Parse("test_config_training_single_device.yaml", crlf);
  ASSERT_EQ(doc.diagnostics().size(), 1u);
  EXPECT_EQ(doc.diagnostics()[0].ToString(),
            util::StrCat("test_config_training_single_device.yaml:1:", bytes.find('\n') + 1,
                         ": uses CRLF line endings (first at line 1, ", lines,
                         " line(s) in all); test-config files use LF only"));
}

// Random edits on the real files: re-parsing shows exactly the intended changes, every line
// outside the edited entries is byte-identical, and the diff applies with git.
TEST(RealData, RandomEditsChangeExactlyWhatWasAsked) {
  TRIAGE_REQUIRE_SHARED_DATA(dir);
  std::mt19937 rng(20261122);
  const std::vector<std::string> reasons = {
      "TT_FATAL: DRAM Auto slice could not find valid slice configuration (assert.hpp:104)",
      "error: 'ttir.sum' op Reduce dimensions are not unique",
      "He said \"no\" \\ C:\\tmp # not a comment: really",
      "caf\xC3\xA9 \xE2\x80\x94 em dash `code` (#8931) https://x/y?z=1",
      "RuntimeError: mat1 and mat2 must have the same dtype, but got Float and BFloat16"};
  const std::vector<std::string> statuses = {"EXPECTED_PASSING", "KNOWN_FAILURE_XFAIL",
                                             "NOT_SUPPORTED_SKIP", "known_failure_xfail"};
  const std::vector<std::string> stages = {"FAILED_RUNTIME", "FAILED_TTMLIR_COMPILATION",
                                           "FAILED_FE_COMPILATION"};
  int total_edits = 0;
  for (const auto& path : AllYaml(dir)) {
    const std::string bytes = testing::ReadFileOrDie(path);
    const std::string rel = path.lexically_relative(dir).string();
    Document doc = Document::Parse(rel, bytes);
    ASSERT_TRUE(doc.ok());
    if (doc.entries().empty()) continue;
    for (int round = 0; round < 4; ++round) {
      std::vector<EntryEdit> edits;
      std::map<std::string, Value> expected;  // key -> entry value after the edits
      for (int k = 0; k < 12; ++k) {
        const Entry& e = doc.entries()[rng() % doc.entries().size()];
        if (!expected.count(e.key)) expected[e.key] = e.value;
        Value& want = expected[e.key];
        EntryEdit edit{e.key, {}, {}, {}};
        Value* target = &want;
        if (rng() % 4 == 0) {
          edit.arch = rng() % 2 ? "n150" : "p150";
          Value* overrides = nullptr;
          for (auto& item : want.map)
            if (item.key == "arch_overrides") overrides = &item.value;
          if (overrides == nullptr) {
            Value m;
            m.kind = Value::Kind::kMap;
            want.map.push_back({"arch_overrides", {}, m});
            overrides = &want.map.back().value;
          }
          Value* arch = nullptr;
          for (auto& item : overrides->map)
            if (item.key == *edit.arch) arch = &item.value;
          if (arch == nullptr) {
            Value m;
            m.kind = Value::Kind::kMap;
            overrides->map.push_back({*edit.arch, {}, m});
            arch = &overrides->map.back().value;
          }
          target = arch;
        }
        auto set = [&](const std::string& name, Value v) {
          edit.set.push_back({name, v});
          for (auto& item : target->map) {
            if (item.key == name) {
              item.value = v;
              return;
            }
          }
          target->map.push_back({name, {}, v});
        };
        switch (rng() % 4) {
          case 0:
            set("status", Value::String(statuses[rng() % statuses.size()]));
            set("bringup_status", Value::String(stages[rng() % stages.size()]));
            set("reason", Value::String(reasons[rng() % reasons.size()]));
            break;
          case 1:
            set("status", Value::String("EXPECTED_PASSING"));
            set("assert_pcc", Value::Bool(false));
            edit.del = {"bringup_status", "reason"};
            break;
          case 2:
            set("markers", Value::List({Value::String("notimeout"), Value::String("push")}));
            set("required_pcc", Value::Float(0.97));
            break;
          default:
            set("reason", Value::String(reasons[rng() % reasons.size()]));
        }
        for (const auto& d : edit.del) {
          std::erase_if(target->map, [&](const MapItem& i) { return i.key == d; });
        }
        if (target->map.empty()) {  // nothing left: the editor refuses; keep the edit valid
          set("status", Value::String("EXPECTED_PASSING"));
        }
        edits.push_back(std::move(edit));
        ++total_edits;
      }
      auto out = ApplyEdits(doc, edits);
      ASSERT_TRUE(out.ok()) << rel << ": " << out.status();
      Document after = Document::Parse(rel, *out);
      ASSERT_TRUE(after.ok()) << rel;
      ASSERT_EQ(after.entries().size(), doc.entries().size());
      // Everything outside the edited entries is byte-identical, in order.
      auto skeleton = [&](const Document& d) {
        std::string s;
        int skip_to = -1;
        for (int i = 0; i < d.line_count(); ++i) {
          if (i <= skip_to) continue;
          bool edited = false;
          for (const Entry& e : d.entries()) {
            if (e.first_line == i && expected.count(e.key)) {
              s += "<" + e.key + ">\n";
              skip_to = e.last_line;
              edited = true;
              break;
            }
          }
          if (!edited) s += std::string(d.Line(i)) + "\n";
        }
        return s;
      };
      EXPECT_EQ(skeleton(after), skeleton(doc)) << rel;
      for (size_t i = 0; i < doc.entries().size(); ++i) {
        const Entry& a = after.entries()[i];
        auto it = expected.find(a.key);
        const Value& want = it == expected.end() ? doc.entries()[i].value : it->second;
        // Order-insensitive comparison of the fields.
        ASSERT_EQ(a.value.map.size(), want.map.size()) << rel << " " << a.key;
        for (const auto& item : want.map) {
          const Value* got = a.value.Find(item.key);
          ASSERT_NE(got, nullptr) << rel << " " << a.key << " lost " << item.key;
          if (item.value.is_map()) {
            for (const auto& arch : item.value.map) {
              const Value* g = got->Find(arch.key);
              ASSERT_NE(g, nullptr) << a.key << " arch " << arch.key;
              for (const auto& f : arch.value.map) {
                ASSERT_NE(g->Find(f.key), nullptr) << a.key << " " << arch.key << "." << f.key;
                EXPECT_EQ(*g->Find(f.key), f.value) << a.key << " " << arch.key << "." << f.key;
              }
            }
          } else {
            EXPECT_EQ(*got, item.value) << rel << " " << a.key << " " << item.key;
          }
        }
      }
      if (round == 0) {
        testing::TempDir tmp;
        testing::WriteFileOrDie(tmp.path() / rel, bytes);
        testing::WriteFileOrDie(tmp.path() / "p.patch", diff::UnifiedDiff(rel, bytes, *out));
        std::string log;
        ASSERT_EQ(testing::RunCommand({"git", "apply", "p.patch"}, tmp.path(), &log), 0) << log;
        EXPECT_EQ(testing::ReadFileOrDie(tmp.path() / rel), *out) << rel;
      }
    }
  }
  EXPECT_GE(total_edits, 500);
}

// The nightly sweep's two additions on the real files (docs/nightly.md, section 4): a changed
// PCC line with a trailing comment, and a new entry appended in the file's style. The result
// re-parses with the same entries plus the new one, only the intended lines change, and the
// patch the merge would build from the blocks applies with git.
TEST(RealData, NewEntryAndCommentedPccLineOnEachKindOfFile) {
  TRIAGE_REQUIRE_SHARED_DATA(dir);
  struct Case {
    std::string file;
    bool blank_lines;  // the file separates its entries by a blank line
  };
  const Case cases[] = {
      {"torch/test_config_inference_single_device.yaml", true},
      {"torch/test_config_training_single_device.yaml", false},
      {"jax/test_config_inference_single_device.yaml", true},
      {"torch_llm/test_config_inference_single_device.yaml", true},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.file);
    const std::string rel = "tests/runner/test_config/" + c.file;
    const std::string bytes = testing::ReadFileOrDie(dir / "head" / rel);
    Document doc = Document::Parse(rel, bytes);
    ASSERT_TRUE(doc.ok());
    ASSERT_GT(doc.entries().size(), 10u);

    // The PCC line: an entry's own required_pcc (one with an inline comment when there is
    // one), else a new required_pcc on the first entry.
    const Entry* target = nullptr;
    for (const Entry& e : doc.entries()) {
      const Value* pcc = e.Field("required_pcc");
      if (pcc == nullptr) continue;
      int line = -1;
      for (const auto& item : e.value.map) {
        if (item.key == "required_pcc") line = item.key_pos.line;
      }
      if (target == nullptr || doc.Line(line).find('#') != std::string_view::npos) target = &e;
      if (doc.Line(line).find('#') != std::string_view::npos) break;
    }
    const bool had_pcc = target != nullptr;
    if (target == nullptr) target = &doc.entries().front();
    std::string old_pcc_line;
    int field_col = target->value.map.front().key_pos.col;
    for (const auto& item : target->value.map) {
      if (item.key == "required_pcc") {
        old_pcc_line = std::string(doc.Line(item.key_pos.line));
        field_col = item.key_pos.col;
      }
    }
    EntryEdit pcc{target->key, {}, {{"required_pcc", Value::Float(0.96)}}, {}};
    pcc.comments = {{"required_pcc", "pcc 0.9688 on n150"}};

    // The new entry: the last entry's key under a new model path (same grammar, run mode and
    // parallelism), with fields in the order given.
    const std::string new_key = "zz_nightly_new/" + doc.entries().back().key;
    EntryEdit create{new_key,
                     {},
                     {{"status", Value::String("EXPECTED_PASSING")},
                      {"markers", Value::List({Value::String("nightly")})}},
                     {}};
    create.create = true;

    const std::vector<EntryEdit> edits = {create, pcc};
    EditDetail detail;
    auto out = ApplyEdits(doc, edits, &detail);
    ASSERT_TRUE(out.ok()) << out.status();

    // Re-parses with the same entries, in order, plus the new one at the end.
    Document after = Document::Parse(rel, *out);
    ASSERT_TRUE(after.ok()) << after.diagnostics().front().ToString();
    ASSERT_EQ(after.entries().size(), doc.entries().size() + 1);
    for (std::size_t i = 0; i < doc.entries().size(); ++i) {
      const Entry& a = doc.entries()[i];
      const Entry& b = after.entries()[i];
      ASSERT_EQ(a.key, b.key);
      if (a.key != target->key) {
        EXPECT_EQ(a.value, b.value) << a.key;
        continue;
      }
      ASSERT_NE(b.Field("required_pcc"), nullptr);
      EXPECT_EQ(*b.Field("required_pcc"), Value::Float(0.96));
      EXPECT_EQ(b.value.map.size(), a.value.map.size() + (had_pcc ? 0 : 1));
    }
    const Entry& added = after.entries().back();
    EXPECT_EQ(added.key, new_key);
    ASSERT_EQ(added.value.map.size(), 2u);
    EXPECT_EQ(added.value.map[0].key, "status");
    EXPECT_EQ(added.value.map[1].key, "markers");
    // Only comments and blank lines follow it.
    for (int l = added.last_line + 1; l < after.line_count(); ++l) {
      EXPECT_TRUE(util::IsBlankOrComment(after.Line(l))) << after.Line(l);
    }
    EXPECT_TRUE(out->ends_with("\n") && !out->ends_with("\n\n")) << "one final newline";

    // Only the intended lines changed: the PCC line (replaced or added) and the new entry's
    // lines, with a blank line before it in files that separate their entries by one.
    // A link the old line's comment carried (a tracking issue) stays after the new comment.
    const std::string pad(field_col, ' ');
    std::string kept_links;
    if (had_pcc && old_pcc_line.find('#') != std::string::npos) {
      const std::string comment = old_pcc_line.substr(old_pcc_line.find('#'));
      std::size_t at = 0;
      while ((at = comment.find("http", at)) != std::string::npos) {
        const std::size_t end = comment.find_first_of(" \t", at);
        const std::string link = comment.substr(at, end == std::string::npos ? end : end - at);
        if (link.starts_with("https://") || link.starts_with("http://")) kept_links += " " + link;
        at = end == std::string::npos ? comment.size() : end;
      }
    }
    std::multiset<std::string> want_added = {
        pad + "required_pcc: 0.96 # pcc 0.9688 on n150" + kept_links, "  " + new_key + ":",
        "    status: EXPECTED_PASSING", "    markers: [nightly]"};
    if (c.blank_lines) want_added.insert("");
    std::multiset<std::string> want_removed;
    if (had_pcc) want_removed.insert(old_pcc_line);
    std::multiset<std::string> got_added, got_removed;
    const std::string full = diff::UnifiedDiff(rel, bytes, *out);
    for (std::string_view l : util::SplitLines(full)) {
      if (l.starts_with("+++") || l.starts_with("---")) continue;
      if (l.starts_with("+")) got_added.insert(std::string(l.substr(1)));
      if (l.starts_with("-")) got_removed.insert(std::string(l.substr(1)));
    }
    EXPECT_EQ(got_added, want_added) << full;
    EXPECT_EQ(got_removed, want_removed) << full;

    // The merge's patch (from the blocks) applies with git and gives the result.
    std::vector<diff::Region> regions;
    for (const auto& b : detail.blocks) {
      regions.push_back({b.old_first, b.old_end, b.new_first, b.new_end});
    }
    const std::string patch = diff::UnifiedDiffOfRegions(rel, bytes, *out, regions);
    auto files = diff::SplitDiff(patch);
    ASSERT_TRUE(files.ok()) << files.status();
    ASSERT_EQ(files->size(), 1u);
    auto applied = diff::ApplyFileDiff(bytes, files->front());
    ASSERT_TRUE(applied.ok()) << applied.status();
    EXPECT_EQ(*applied, *out);
    testing::TempDir tmp;
    std::string log;
    ASSERT_EQ(testing::RunCommand({"git", "init", "-q", "."}, tmp.path(), &log), 0) << log;
    testing::WriteFileOrDie(tmp.path() / rel, bytes);
    testing::WriteFileOrDie(tmp.path() / "p.patch", patch);
    ASSERT_EQ(testing::RunCommand({"git", "apply", "--check", "p.patch"}, tmp.path(), &log), 0)
        << log;
  }
}

TEST(RealData, ClassifierSelectsExactlyTheLiveUnpackEntries) {
  TRIAGE_REQUIRE_SHARED_DATA(dir);
  const auto path = dir / "sweep-parents/unpack_parent_test_config_training_single_device.yaml";
  const std::string bytes = testing::ReadFileOrDie(path);
  Document doc = Document::Parse(
      "tests/runner/test_config/torch/test_config_training_single_device.yaml", bytes);
  ASSERT_TRUE(doc.ok());
  std::set<std::string> selected;
  int not_implemented = 0, no_handler = 0;
  for (const Entry& e : doc.entries()) {
    auto c = playbooks::DefaultClassifier().Classify(e);
    if (c.match && c.match->playbook == "unpack_forward_output") {
      selected.insert(e.key);
      (c.match->flavor == "no_handler" ? no_handler : not_implemented)++;
    }
  }
  EXPECT_EQ(selected.size(), 66u);
  EXPECT_EQ(not_implemented, 59);
  EXPECT_EQ(no_handler, 7);
  // The 10 commented-out blocks that carry the same reason are not entries.
  int commented = 0;
  std::string block_key;
  for (const auto& line : util::SplitLines(bytes)) {
    std::string_view l = line;
    if (l.starts_with("  # ") && l.ends_with("-single_device-training:")) {
      block_key = std::string(l.substr(4, l.size() - 5));
    } else if (!block_key.empty() && l.starts_with("  #") &&
               l.find("unpack_forward_output") != std::string_view::npos) {
      ++commented;
      EXPECT_EQ(selected.count(block_key), 0u) << block_key;
      block_key.clear();
    } else if (!l.starts_with("  #")) {
      block_key.clear();
    }
  }
  EXPECT_EQ(commented, 10);
}

TEST(RealData, ClassifierOnTheOtherSweepParents) {
  TRIAGE_REQUIRE_SHARED_DATA(dir);
  auto count = [&](const char* file, const char* playbook) {
    Document doc =
        Document::Parse("tests/runner/test_config/torch/test_config_training_single_device.yaml",
                        testing::ReadFileOrDie(dir / "sweep-parents" / file));
    EXPECT_TRUE(doc.ok());
    std::map<std::string, int> flavors;
    for (const Entry& e : doc.entries()) {
      auto c = playbooks::DefaultClassifier().Classify(e);
      if (c.match && c.match->playbook == playbook) flavors[c.match->flavor]++;
    }
    return flavors;
  };
  auto bf16 = count("bf16_parent_test_config_training_single_device.yaml", "dtype_bfloat16");
  EXPECT_EQ(bf16["op_not_implemented"], 4);  // deformable_im2col x4 (centernet)
  EXPECT_EQ(bf16["cross_dtype"], 2);         // speecht5 mat1/mat2, densenet index put
  auto inputs = count("inputs_parent_test_config_training_single_device.yaml", "missing_inputs");
  // Eight reasons, five flavors; 24 live entries: the 19 of the five reasons the landed sweep
  // worked on (it changed 18), plus EOFError (stale) and four ModuleNotFoundErrors, three of
  // them a transformers-version failure the probe tells apart from a missing model package.
  EXPECT_EQ(inputs["decoder_input_ids"], 6);
  EXPECT_EQ(inputs["detection_targets"], 2);
  EXPECT_EQ(inputs["stale_suspect"], 11);  // 6 "Model expects targets", 4 NoneType.max, 1 EOF
  EXPECT_EQ(inputs["batchnorm_single_value"], 1);
  EXPECT_EQ(inputs["missing_package"], 4);
}

}  // namespace
}  // namespace triage::inventory
