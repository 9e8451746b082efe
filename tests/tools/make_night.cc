// make_night: a real-size nightly result set for a tt-xla checkout, in the JUnit form tt-xla's
// runner writes (docs/fixture.md, "make_night").
//
//   make_night --repo CHECKOUT --out DEST [--nights N] [--archs n150,p150] [--jobs J]
//              [--new-entries N] [--seed S] [--summary FILE]
//
// Every test entry of every test-config file (the placeholders aside) gets one testcase per arch
// and night, named as the runner names it (test_all_models_torch[KEY], test_all_models_jax[KEY],
// test_llms_torch[KEY]), with the runner's properties (error_message, tags) and outcome element.
// What each test does is drawn from its key (a stable hash: the same checkout and seed give the
// same night) and spread over every row of the nightly rule table (docs/nightly.md): passes that
// promote, near misses that set a threshold, nonsense PCC, failures that demote or refresh a
// reason, hangs, crashes, host OOM on one arch or on all, tests that pass on one arch only,
// flaky nights, checks to enable or raise, stale guidance, tests without an entry that pass.
// The entry's YAML as resolved on the arch decides the runner's side of it, as the runner
// would: a NOT_SUPPORTED_SKIP entry is skipped, a KNOWN_FAILURE_XFAIL entry ends xfailed unless
// its process died or hung.
//
// Writes DEST/night-<n>/test-reports-<arch>-<job>/report.xml for nights 1..N (a later night has
// later timestamps); --summary FILE writes what was drawn as JSON ({"scenarios": {name: entry-
// archs}, "testcases": N, "new_keys": [...]}). Exit 0 when written; 1 on an error; 2 on usage.

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "common/inventory/inventory.h"
#include "common/inventory/key.h"
#include "common/nightly/record.h"
#include "common/util/strings.h"
#include "nlohmann/json.hpp"
#include "tests/support/pytest_xml.h"

namespace fs = std::filesystem;
using triage::util::StrAppend;
using triage::util::StrCat;

namespace {

using triage::inventory::Entry;
using triage::inventory::Value;
namespace tx = triage::nightly::testing;

[[noreturn]] void Die(const std::string& message) {
  std::cerr << "make_night: " << message << "\n";
  std::exit(1);
}

std::uint64_t Fnv(std::string_view s, std::uint64_t seed) {
  std::uint64_t h = 1469598103934665603ULL ^ (seed * 0x9E3779B97F4A7C15ULL);
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

// 0..n-1 from a key and a salt.
int Draw(std::string_view key, std::string_view salt, std::uint64_t seed, int n = 100) {
  return static_cast<int>(Fnv(StrCat(key, "|", salt), seed) % static_cast<std::uint64_t>(n));
}

// What a test does in one night on one arch.
enum class Does {
  kPass,          // runs to its end, PCC above the threshold
  kNearMiss,      // runs to its end, PCC a little below the threshold
  kNonsense,      // runs to its end, PCC far below (or nan)
  kFailAsBefore,  // fails with the error its reason names
  kFailNew,       // fails with another error
  kHang,          // outruns its timeout
  kCrash,         // its process aborts
  kOomKill,       // killed for host memory (SIGKILL)
  kSkipped,       // NOT_SUPPORTED_SKIP: the runner skips it
};

// A scenario: what the test does in the latest night on the first arch; `other_archs` on the
// others; `earlier` in the nights before the latest (the same when unset).
struct Scenario {
  Scenario() = default;
  Scenario(std::string n, Does l, std::optional<Does> other = std::nullopt,
           std::optional<Does> before = std::nullopt, bool stale = false)
      : name(std::move(n)), latest(l), other_archs(other), earlier(before), stale_guidance(stale) {}
  std::string name;
  Does latest = Does::kPass;
  std::optional<Does> other_archs;
  std::optional<Does> earlier;
  bool stale_guidance = false;  // the runner hints at a change the YAML has already
};

Scenario ForXfail(int d) {
  if (d < 22) return {"xfail_passes", Does::kPass};
  if (d < 29) return {"xfail_near_miss", Does::kNearMiss};
  if (d < 33) return {"xfail_nonsense_pcc", Does::kNonsense};
  if (d < 57) return {"xfail_fails_as_before", Does::kFailAsBefore};
  if (d < 70) return {"xfail_fails_otherwise", Does::kFailNew};
  if (d < 75) return {"xfail_hangs", Does::kHang};
  if (d < 80) return {"xfail_crashes", Does::kCrash};
  if (d < 84) return {"xfail_oom_one_arch", Does::kOomKill, Does::kPass};
  if (d < 87) return {"xfail_oom_everywhere", Does::kOomKill};
  if (d < 94) return {"xfail_passes_one_arch", Does::kPass, Does::kFailAsBefore};
  return {"xfail_flaky", Does::kPass, std::nullopt, Does::kFailAsBefore};
}

Scenario ForPassing(int d, bool check_off, bool low_threshold) {
  if (check_off && d < 50) return {"check_off_passes", Does::kPass};
  if (low_threshold && d < 50) return {"low_threshold_passes", Does::kPass};
  if (d < 50) return {"passes", Does::kPass};
  if (d < 55) return {"passes_stale_guidance", Does::kPass, std::nullopt, std::nullopt, true};
  if (d < 63) return {"near_miss", Does::kNearMiss};
  if (d < 67) return {"nonsense_pcc", Does::kNonsense};
  if (d < 79) return {"fails", Does::kFailNew};
  if (d < 82) return {"fails_one_arch", Does::kFailNew, Does::kPass};
  if (d < 85) return {"hangs", Does::kHang};
  if (d < 88) return {"crashes", Does::kCrash};
  if (d < 91) return {"oom_everywhere", Does::kOomKill};
  if (d < 94) return {"oom_one_arch", Does::kOomKill, Does::kPass};
  return {"fails_one_night", Does::kFailNew, std::nullopt, Does::kPass};
}

// Errors as tt-xla's runner reports them, several per stage so that failures form clusters;
// a few are long (the compiler's MLIR dumps), three OOM kinds share a long prefix.
struct ErrorKind {
  const char* stage;
  const char* text;  // {N} is replaced by a number drawn from the key
};
constexpr ErrorKind kErrors[] = {
    {"FAILED_RUNTIME",
     "RuntimeError: TT_FATAL @ /work/tt-metal/ttnn/cpp/ttnn/operations/conv/conv2d/"
     "conv2d_op_sharded_program_factory.cpp:{N}: input_tensor_a.memory_config().is_sharded()"},
    {"FAILED_RUNTIME", "RuntimeError: Bad StatusOr access: INTERNAL: Error code: 13"},
    {"FAILED_RUNTIME",
     "RuntimeError: TT_THROW @ /work/tt-metal/tt_metal/impl/allocator/bank_manager.cpp:{N}: "
     "tt::exception info: Out of Memory: Not enough space to allocate {N} B L1 buffer across 64 "
     "banks, where each bank needs to store {N} B"},
    {"FAILED_RUNTIME",
     "RuntimeError: TT_THROW @ /work/tt-metal/tt_metal/impl/allocator/bank_manager.cpp:{N}: "
     "tt::exception info: Out of Memory: Not enough space to allocate {N} B DRAM buffer across "
     "12 banks, where each bank needs to store {N} B"},
    {"FAILED_RUNTIME",
     "RuntimeError: TT_THROW @ /work/tt-metal/tt_metal/impl/allocator/bank_manager.cpp:{N}: "
     "tt::exception info: Out of Memory: Not enough space to allocate {N} B L1_SMALL buffer "
     "across 64 banks, where each bank needs to store {N} B"},
    {"FAILED_RUNTIME",
     "RuntimeError: TT_FATAL @ /work/tt-metal/ttnn/cpp/ttnn/operations/data_movement/reshape_view/"
     "reshape.cpp:{N}: tensor_shape.volume() == new_shape.volume()"},
    {"FAILED_TTMLIR_COMPILATION",
     "error: 'ttir.scatter' op Scatter dim must be the innermost dimension for reduce type sum"},
    {"FAILED_TTMLIR_COMPILATION",
     "ValueError: Error code: 13 while compiling the module: failed to legalize operation "
     "'stablehlo.reduce_window'"},
    {"FAILED_TTMLIR_COMPILATION",
     "error: failed to legalize operation 'ttir.gather' that was explicitly marked illegal: "
     "loc(\"gather.{N}\") %{N} = \"ttir.gather\"(%arg0, %arg1, %0) <{collapsed_slice_dims = "
     "array<i64: 0>, index_vector_dim = 1 : si64, indices_are_sorted = false, offset_dims = "
     "array<i64: 1>, operand_batching_dims = array<i64>, slice_sizes = array<i64: 1, 768>, "
     "start_index_map = array<i64: 0>, start_indices_batching_dims = array<i64>}> : "
     "(tensor<50257x768xbf16>, tensor<1x{N}xi32>, tensor<1x{N}x768xbf16>) -> "
     "tensor<1x{N}x768xbf16> loc(\"gather.{N}\") note: see current operation: %{N} = "
     "\"ttir.gather\"(%arg0, %arg1, %0) <{collapsed_slice_dims = array<i64: 0>, index_vector_dim "
     "= 1 : si64, indices_are_sorted = false, offset_dims = array<i64: 1>, operand_batching_dims "
     "= array<i64>, slice_sizes = array<i64: 1, 768>, start_index_map = array<i64: 0>, "
     "start_indices_batching_dims = array<i64>}> : (tensor<50257x768xbf16>, tensor<1x{N}xi32>, "
     "tensor<1x{N}x768xbf16>) -> tensor<1x{N}x768xbf16> and the module's other {N} operations "
     "that use the same indices, which the pass does not lower either, nor their consumers in "
     "the attention blocks of every layer of the decoder stack, each of which repeats the same "
     "pattern with a different embedding table and the same index tensor"},
    {"FAILED_FE_COMPILATION",
     "torch._dynamo.exc.Unsupported: call_function BuiltinVariable(setattr) [UserDefinedObject"
     "Variable, ConstantVariable, TensorVariable] {}"},
    {"FAILED_FE_COMPILATION",
     "NotImplementedError: Could not run 'aten::_local_scalar_dense' with arguments from the "
     "'Meta' backend"},
    {"FAILED_FE_COMPILATION",
     "TypeError: forward() got an unexpected keyword argument 'cache_position'"},
};

std::string Fill(std::string_view text, std::string_view key, std::uint64_t seed) {
  std::string out;
  int n = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text.substr(i).starts_with("{N}")) {
      StrAppend(&out, 16 + Draw(key, StrCat("n", n++), seed, 9000));
      i += 2;
    } else {
      out.push_back(text[i]);
    }
  }
  return out;
}

// The entry's field as resolved on the arch.
const Value* On(const Entry& e, std::string_view name, std::string_view arch) {
  return e.FieldForArch(name, arch);
}

double Threshold(const Entry* e, std::string_view arch) {
  const Value* v = e ? On(*e, "required_pcc", arch) : nullptr;
  if (v == nullptr) return 0.99;
  if (v->kind == Value::Kind::kFloat) return v->number;
  if (v->kind == Value::Kind::kInt) return static_cast<double>(v->integer);
  return 0.99;
}

bool CheckOn(const Entry* e, std::string_view arch) {
  const Value* v = e ? On(*e, "assert_pcc", arch) : nullptr;
  return v == nullptr || v->kind != Value::Kind::kBool || v->boolean;
}

std::string Pcc(double v) {
  if (std::isnan(v)) return "nan";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6f", v);
  return buf;
}

// One test of the night: its key, test function, entry (nullptr: no entry) and scenario.
struct Test {
  std::string key;
  std::string function;
  const Entry* entry = nullptr;
  std::string parallelism;
  std::string run_mode;
  std::string llm_phase;
};

struct Options {
  std::uint64_t seed = 1;
  int nights = 2;
};

// The testcase of a test on an arch in a night.
tx::Case MakeCase(const Test& t, const std::string& arch, bool first_arch, int night,
                  const Options& opt, std::map<std::string, int>& drawn) {
  const std::string status(t.entry ? t.entry->StatusForArch(arch) : "UNSPECIFIED");
  const bool latest = night == opt.nights;
  Scenario sc;
  if (status == "NOT_SUPPORTED_SKIP") {
    sc = {"skipped", Does::kSkipped};
  } else if (status == "KNOWN_FAILURE_XFAIL") {
    sc = ForXfail(Draw(t.key, "scenario", opt.seed));
  } else if (t.entry == nullptr) {
    // A test without an entry: passes everywhere, or on the first arch only.
    sc = Draw(t.key, "new", opt.seed) < 75
             ? Scenario{"new_test_passes", Does::kPass}
             : Scenario{"new_test_passes_one_arch", Does::kPass, Does::kFailNew};
  } else {
    sc = ForPassing(Draw(t.key, "scenario", opt.seed), !CheckOn(t.entry, arch),
                    Threshold(t.entry, arch) < 0.985);
  }
  Does does = sc.latest;
  if (!first_arch && sc.other_archs) does = *sc.other_archs;
  if (!latest && sc.earlier) does = *sc.earlier;
  if (latest) ++drawn[sc.name];

  const double threshold = Threshold(t.entry, arch);
  const bool check_on = CheckOn(t.entry, arch);
  tx::Tags tags;
  tags.test_name = t.function;
  tags.specific_test_case = StrCat(t.function, "[", t.key, "]");
  tags.model_name = StrCat("pt_", t.key.substr(0, t.key.find('/')), "_hf");
  tags.run_mode = t.run_mode;
  tags.run_phase = t.llm_phase.empty() ? "default" : t.llm_phase;
  tags.parallelism = t.parallelism;
  tags.arch = StrCat("'", arch, "'");
  tags.model_test_status = StrCat("ModelTestStatus.", status);
  tags.pcc_threshold = Pcc(threshold);
  tags.pcc_assertion_enabled = check_on ? "True" : "False";

  tx::Case c;
  c.name = tags.specific_test_case;
  const int seconds = 20 + Draw(t.key, StrCat("time", arch), opt.seed, 580);
  c.time = StrCat(seconds, ".", Draw(t.key, StrCat("ms", night), opt.seed, 1000));
  const bool xfail = status == "KNOWN_FAILURE_XFAIL";
  const std::string old_reason(t.entry ? t.entry->StringField("reason") : "");
  const std::string old_stage(t.entry ? t.entry->StringField("bringup_status") : "");
  const ErrorKind& err = kErrors[Draw(t.key, "error", opt.seed, std::size(kErrors))];
  const std::string xfail_message = old_reason.empty() ? "KNOWN_FAILURE_XFAIL" : old_reason;

  switch (does) {
    case Does::kSkipped: {
      tags.pcc.clear();
      tags.bringup_status = "NOT_STARTED";
      const std::string why = StrCat("NOT_SUPPORTED_SKIP: ", old_reason);
      c.time = "0.001";
      c.error_message = why;
      c.outcome = tx::OutcomeXml("skipped", "pytest.skip", why,
                                 StrCat("tests/runner/test_models.py:343: ", why));
      break;
    }
    case Does::kPass:
    case Does::kNearMiss:
    case Does::kNonsense: {
      double pcc =
          std::min(0.9999, threshold + 0.0075 + Draw(t.key, "pcc", opt.seed, 20) / 10000.0);
      if (does == Does::kNearMiss) {
        pcc = threshold - 0.006 - Draw(t.key, "miss", opt.seed, 12) / 1000.0;
      } else if (does == Does::kNonsense) {
        pcc = Draw(t.key, "nan", opt.seed) < 30 ? NAN : 0.05 + Draw(t.key, "low", opt.seed) / 400.0;
      }
      tags.pcc = Pcc(pcc);
      const bool passed = does == Does::kPass || !check_on;
      tags.bringup_status = passed && does == Does::kPass ? "PASSED" : "INCORRECT_RESULT";
      if (!check_on && does != Does::kPass) tags.bringup_status = "PASSED";
      if (xfail) tags.guidance.push_back("RM_XFAIL");
      if (!check_on && does == Does::kPass) tags.guidance.push_back("ENABLE_PCC");
      if (check_on && threshold < 0.985 && does == Does::kPass)
        tags.guidance.push_back("RAISE_PCC");
      if (sc.stale_guidance) tags.guidance.push_back("RAISE_PCC_099");
      if (xfail) {
        c.outcome = tx::OutcomeXml("skipped", "pytest.xfail", xfail_message, "");
      } else if (!passed) {
        const std::string msg =
            StrCat("AssertionError: PCC comparison failed. Calculated: pcc=", Pcc(pcc),
                   ". Required: pcc=", Pcc(threshold), ".");
        c.error_message = msg;
        c.outcome = tx::OutcomeXml(
            "failure", "", msg,
            StrCat("tests/runner/test_models.py:343: in test_all_models\nE   ", msg));
      }
      break;
    }
    case Does::kFailAsBefore:
    case Does::kFailNew: {
      tags.pcc.clear();
      std::string error = Fill(err.text, t.key, opt.seed);
      std::string stage = err.stage;
      if (does == Does::kFailAsBefore && !old_reason.empty()) {
        error = old_reason;
        if (!old_stage.empty()) stage = old_stage;
      }
      tags.bringup_status = stage;
      tags.failing_reason = "'UNKNOWN'";
      c.error_message = error;
      if (xfail) {
        c.outcome = tx::OutcomeXml("skipped", "pytest.xfail", xfail_message, "");
      } else {
        c.outcome = tx::OutcomeXml(
            "failure", "", error.substr(0, error.find('\n')),
            StrCat("tests/runner/test_models.py:343: in test_all_models\n", "E   ", error));
      }
      break;
    }
    case Does::kHang: {
      tags.pcc.clear();
      tags.bringup_status = "UNKNOWN";
      c.time = "3600.21";
      c.outcome = tx::OutcomeXml("failure", "", "Failed: Timeout >3600.0s",
                                 "+++++++++++++++++++ Timeout +++++++++++++++++++\n"
                                 "~~~~ Stack of MainThread ~~~~\nE   Failed: Timeout >3600.0s");
      break;
    }
    case Does::kCrash:
    case Does::kOomKill: {
      tags.reduced = true;
      tags.bringup_status = "UNKNOWN";
      const int sig = does == Does::kCrash ? 6 : 9;
      const std::string crash =
          StrCat("tests/runner/test_models.py:343: running the test CRASHED with signal ", sig);
      c.outcome =
          tx::OutcomeXml("error", "", StrCat("failed on teardown with \"", crash, "\""), crash);
      break;
    }
  }
  c.tags = tags.Literal();
  return c;
}

// A key of a test without an entry, next to an existing one: its variant with a suffix.
std::string NewKey(const triage::inventory::KeyParts& p) {
  std::string key = StrCat(p.model_path, "/", p.framework, "-",
                           p.variant.empty() ? "nightly_new" : StrCat(p.variant, "_nightly_new"));
  if (!p.llm_params.empty()) StrAppend(&key, "-", p.llm_params);
  StrAppend(&key, "-", p.parallelism);
  if (!p.mesh.empty()) StrAppend(&key, "-", p.mesh);
  StrAppend(&key, "-", p.run_mode);
  return key;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "make_night: a real-size nightly result set for a tt-xla checkout (every entry, "
      "every arch, outcomes over every rule of the nightly table)"};
  std::string repo, out, archs_flag = "n150,p150", summary;
  int jobs = 10, new_entries = 40;
  Options opt;
  app.add_option("--repo", repo, "tt-xla checkout (its tests/runner/test_config is read)")
      ->required();
  app.add_option("--out", out, "where the nights go (must not exist or be empty)")->required();
  app.add_option("--nights", opt.nights, "nights, oldest first")->check(CLI::Range(1, 14));
  app.add_option("--archs", archs_flag, "archs, comma-separated");
  app.add_option("--jobs", jobs, "JUnit files (CI jobs) per arch and night")
      ->check(CLI::Range(1, 200));
  app.add_option("--new-entries", new_entries, "tests without an entry")
      ->check(CLI::Range(0, 5000));
  app.add_option("--seed", opt.seed, "what the tests do is drawn from their keys and this seed");
  app.add_option("--summary", summary, "write what was drawn as JSON");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  std::vector<std::string> archs;
  for (std::size_t at = 0; at <= archs_flag.size();) {
    std::size_t comma = archs_flag.find(',', at);
    if (comma == std::string::npos) comma = archs_flag.size();
    if (comma > at) archs.push_back(archs_flag.substr(at, comma - at));
    at = comma + 1;
  }
  if (archs.empty()) Die("--archs: no arch");
  std::error_code ec;
  if (fs::exists(out) && !fs::is_empty(out, ec)) Die(StrCat(out, ": exists and is not empty"));

  triage::inventory::WorkTreeSource source{fs::path(repo)};
  auto inv = triage::inventory::LoadInventory(source);
  if (!inv.ok()) Die(StrCat(repo, ": ", inv.status().ToString()));

  std::vector<Test> tests;
  std::vector<std::string> new_keys;
  for (const auto& ref : inv->TestEntries()) {
    if (!ref.entry->parts) continue;
    Test t;
    t.key = ref.entry->key;
    t.function = std::string(triage::nightly::TestFunctionOfFile(ref.document->path()));
    t.entry = ref.entry;
    t.parallelism = ref.entry->parts->parallelism;
    t.run_mode = ref.entry->parts->run_mode;
    const std::string& llm = ref.entry->parts->llm_params;
    t.llm_phase = llm.substr(0, llm.find('-'));
    tests.push_back(t);
  }
  // Tests without an entry: siblings of every n-th entry that is not skipped.
  const std::size_t every =
      new_entries > 0 ? std::max<std::size_t>(1, tests.size() / new_entries) : 0;
  for (std::size_t i = 0;
       every > 0 && i < tests.size() && new_keys.size() < static_cast<std::size_t>(new_entries);
       i += every) {
    Test t = tests[i];
    t.key = NewKey(*t.entry->parts);
    t.entry = nullptr;
    new_keys.push_back(t.key);
    tests.push_back(t);
  }

  std::map<std::string, int> drawn;
  int testcases = 0;
  for (int night = 1; night <= opt.nights; ++night) {
    const std::string stamp = StrCat("2026-11-", 10 + 2 * night, "T02:13:44.123456+00:00");
    for (std::size_t a = 0; a < archs.size(); ++a) {
      std::vector<std::vector<tx::Case>> files(jobs);
      for (std::size_t i = 0; i < tests.size(); ++i) {
        files[i * jobs / tests.size()].push_back(
            MakeCase(tests[i], archs[a], a == 0, night, opt, drawn));
        ++testcases;
      }
      for (int j = 0; j < jobs; ++j) {
        const fs::path dir =
            fs::path(out) / StrCat("night-", night) / StrCat("test-reports-", archs[a], "-", j + 1);
        fs::create_directories(dir, ec);
        if (ec) Die(StrCat(dir.string(), ": ", ec.message()));
        std::ofstream f(dir / "report.xml", std::ios::binary);
        f << tx::Report(files[j], stamp);
        if (!f) Die(StrCat((dir / "report.xml").string(), ": cannot write"));
      }
    }
  }
  std::cout << "make_night: " << opt.nights << " night(s) x " << archs.size()
            << " arch(s): " << testcases << " testcases of " << tests.size() << " tests ("
            << new_keys.size() << " without an entry) in " << out << "\n";
  if (!summary.empty()) {
    nlohmann::json j = {{"scenarios", drawn}, {"testcases", testcases}, {"new_keys", new_keys}};
    std::ofstream f(summary);
    f << j.dump(2) << "\n";
    if (!f) Die(StrCat(summary, ": cannot write"));
  }
  return 0;
}
