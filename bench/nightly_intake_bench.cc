// nightly_intake_bench: the nightly intake (common/nightly/intake.h, ReadNightlyRun) over a
// real-size synthetic result set, as directories and as archives.
//
// It writes --runs runs (nights) of --archs archs (n150, p150, n300-llmbox, ...) with
// --testcases testcases each, in the shape of tt-xla's nightly CI: per arch about 20 JUnit files
// (one per CI job, test-reports-<arch>-<job>/report.xml), every testcase with the runner's
// properties (a `tags` literal of about 1.4 KB, error_message when there is a reason), a failure
// traceback of several KB on about 15% of them, and a few KB of <system-out> on each. Each run is
// written twice: as a directory, and as one .tar.gz of the same files.
//
// Then it reads every run --reps times in each form and prints the medians: seconds, testcases
// per second, MB/s of XML (uncompressed), and the peak RSS (getrusage) before and after reading,
// next to the size of the records kept in memory and of the XML read: memory follows the
// records, not the files. Figures are printed, never asserted (the machine is shared).

#include <archive.h>
#include <archive_entry.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "common/nightly/intake.h"
#include "common/util/strings.h"
#include "tests/support/pytest_xml.h"

namespace fs = std::filesystem;
using triage::util::StrAppend;
using triage::util::StrCat;

namespace {

using triage::nightly::testing::XmlAttr;
using triage::nightly::testing::XmlText;

[[noreturn]] void Die(const std::string& message) {
  std::cerr << "nightly_intake_bench: " << message << "\n";
  std::exit(1);
}

double PeakRssMb() {
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<double>(usage.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

constexpr const char* kArchs[] = {"n150",          "p150",         "n300-llmbox", "n300",
                                  "qb2-blackhole", "galaxy-wh-6u", "p300"};
constexpr const char* kGroups[] = {"red", "priority", "generality"};
constexpr const char* kTasks[] = {"cv_image_cls", "nlp_causal_lm", "cv_obj_det", "audio_asr"};
constexpr const char* kStages[] = {"FAILED_FE_COMPILATION", "FAILED_TTMLIR_COMPILATION",
                                   "FAILED_RUNTIME"};

// One testcase of the runner, in the pytest xunit1 form.
std::string Testcase(std::mt19937& rng, int run, const std::string& arch, int index) {
  std::uniform_int_distribution<int> percent(0, 99);
  const int kind = percent(rng);
  // 80% torch, 10% jax, 10% LLM decode/prefill.
  std::string function = "test_all_models_torch";
  std::string key = StrCat("model_", index, "/pytorch-variant_", index % 7, "-single_device-",
                           index % 5 == 0 ? "training" : "inference");
  std::string phase = "default";
  if (kind < 10) {
    function = "test_all_models_jax";
    key = StrCat("jax_model_", index, "/jax-base-single_device-inference");
  } else if (kind < 20) {
    function = "test_llms_torch";
    phase = index % 2 == 0 ? "llm_decode" : "llm_prefill";
    key = StrCat("llm_", index, "/causal_lm/pytorch-", index % 3, ".5B_Instruct-", phase, "-seq_",
                 phase == "llm_decode" ? 1 : 128, "-batch_1-single_device-mesh_default-",
                 "inference");
  }
  const std::string name = StrCat(function, "[", key, "]");
  // Outcomes: 70% passed, 10% xfailed, 15% failed, 5% skipped; a night changes a few of them.
  int outcome = (index * 37 + run * (percent(rng) < 5 ? 11 : 0)) % 100;
  const bool failed = outcome >= 70 && outcome < 85;
  const bool xfailed = outcome >= 85 && outcome < 95;
  const bool skipped = outcome >= 95;
  const char* stage = kStages[index % 3];
  const double pcc = 0.95 + (percent(rng) / 2000.0);

  std::string tags = StrCat(
      "{'test_name': '", function, "', 'specific_test_case': '", name,
      "', 'category': 'Category.MODEL_TEST', 'model_name': 'pt_model_", index, "_", index % 7, "_",
      kTasks[index % 4], "_hf', 'model_info': {'model': 'model_", index, "', 'variant': 'variant_",
      index % 7, "', 'group': '", kGroups[index % 3], "', 'task': '", kTasks[index % 4],
      "', 'source': 'huggingface', 'framework': 'pytorch', 'priority': 'P1', 'description': "
      "'A model of the nightly set, loaded from its hub with pretrained weights and its "
      "default inputs', 'url': 'https://huggingface.co/org/model_",
      index, "-variant_", index % 7,
      "', 'license': 'apache-2.0', 'parameters': '124M', 'input_shape': '(1, 3, 224, 224)', "
      "'dtype_override': 'torch.bfloat16', 'owner': 'tt-xla', 'tracking_issue': "
      "'https://github.com/tenstorrent/tt-xla/issues/",
      1000 + index % 900,
      "'}, 'execution_pass': 'ExecutionPass.FORWARD', 'run_mode': 'inference', 'run_phase': '",
      phase, "', 'bringup_status': '", failed ? stage : "PASSED",
      "', 'model_test_status': 'ModelTestStatus.",
      xfailed   ? "KNOWN_FAILURE_XFAIL"
      : skipped ? "NOT_SUPPORTED_SKIP"
                : "EXPECTED_PASSING",
      "', 'failing_reason': {'name': ",
      failed ? "'UNSUPPORTED_OP', 'description': 'The op is not supported by the "
               "compiler for these shapes and dtypes', 'component': 'tt-mlir', 'summary': "
               "'aten.scatter_reduce not lowered'"
             : "None, 'description': None, 'component': None, 'summary': None",
      "}, 'parallelism': 'single_device', 'arch': '", arch,
      "', 'seq_len': None, 'batch_size': None, 'weights_dtype': 'bfloat16', "
      "'model_size_billions': 0.124439808");
  if (!failed && !skipped) {
    StrAppend(&tags, ", 'pcc': ", pcc,
              ", 'atol': 0.03125, 'comparison_passed': True, 'comparison_error_message': None, "
              "'pcc_threshold': 0.99, 'atol_threshold': 0.05, 'pcc_assertion_enabled': True, "
              "'atol_assertion_enabled': False");
  }
  StrAppend(&tags, ", 'guidance': [", xfailed ? "'RM_XFAIL'" : "", "]}");

  std::string out =
      StrCat("    <testcase classname=\"tests.runner.test_models\" name=\"", XmlAttr(name),
             "\" file=\"tests/runner/test_models.py\" line=\"343\" time=\"",
             10 + percent(rng) * 3.7, "\">\n      <properties>\n");
  std::string error_message;
  if (failed) {
    error_message = StrCat(
        "RuntimeError: TT_FATAL @ /tt-metal/ttnn/cpp/ttnn/operations/conv2d.cpp:", index % 400,
        ": input.dtype() == DataType::BFLOAT16\ninfo:\nbacktrace:");
  } else if (xfailed) {
    error_message =
        "Out of Memory: Not enough space to allocate 2097152 B DRAM buffer across 12 "
        "banks, where each bank needs to store 174763 B";
  } else if (skipped) {
    error_message = "Hang - https://github.com/tenstorrent/tt-xla/issues/1234";
  }
  if (!error_message.empty()) {
    StrAppend(&out, "        <property name=\"error_message\" value=\"", XmlAttr(error_message),
              "\" />\n");
  }
  StrAppend(&out, "        <property name=\"tags\" value=\"", XmlAttr(tags), "\" />\n",
            "        <property name=\"owner\" value=\"tt-xla\" />\n",
            "        <property name=\"group\" value=\"", kGroups[index % 3], "\" />\n",
            "      </properties>\n");
  if (failed) {
    std::string traceback =
        StrCat("request = <FixtureRequest for <Function ", name, ">>\n\n",
               "    def test_all_models_torch(test_entry, run_mode, record_property, request):\n");
    const int frames = 20 + percent(rng) / 5;
    for (int f = 0; f < frames; ++f) {
      StrAppend(&traceback, "python_package/tt_torch/backend/frame_", f, ".py:", 100 + f,
                ": in forward\n    return self._call_impl(*args, **kwargs)\n");
    }
    StrAppend(&traceback, "E   ", error_message,
              "\n\npython_package/tt_torch/backend/backend.py:212: "
              "RuntimeError");
    StrAppend(&out, "      <failure message=\"", XmlAttr(error_message), "\">", XmlText(traceback),
              "</failure>\n");
  } else if (xfailed) {
    StrAppend(&out, "      <skipped type=\"pytest.xfail\" message=\"", XmlAttr(error_message),
              "\" />\n");
  } else if (skipped) {
    StrAppend(&out, "      <skipped type=\"pytest.skip\" message=\"", XmlAttr(error_message),
              "\">tests/runner/test_models.py:343: ", XmlText(error_message), "</skipped>\n");
  }
  out += "      <system-out>";
  const int log_lines = 25 + percent(rng) / 2;
  for (int l = 0; l < log_lines; ++l) {
    StrAppend(&out, "2026-11-27 02:", 10 + l % 50, ":", 10 + l % 49,
              ".123 | info     |   Device | Compiling graph ", l, " of model_", index, " (", l * 17,
              " ops)\n");
  }
  out += "</system-out>\n    </testcase>\n";
  return out;
}

struct Figures {
  std::int64_t testcases = 0;
  std::int64_t records = 0;
  std::uint64_t xml_bytes = 0;
  std::uint64_t record_bytes = 0;
};

// Reads every run once; returns the seconds it took.
double ReadAll(const std::vector<fs::path>& runs, Figures& figures) {
  figures = {};
  std::vector<triage::v1::NightlyRun> kept;  // as the caller keeps them: memory is the records
  const auto start = std::chrono::steady_clock::now();
  for (const fs::path& path : runs) {
    absl::StatusOr<triage::v1::NightlyRun> run = triage::nightly::ReadNightlyRun(path);
    if (!run.ok()) Die(std::string(run.status().message()));
    figures.testcases += run->testcases();
    figures.records += run->records_size();
    figures.record_bytes += run->SpaceUsedLong();
    kept.push_back(std::move(*run));
  }
  const auto end = std::chrono::steady_clock::now();
  return std::chrono::duration<double>(end - start).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.size() % 2 == 1 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"nightly_intake_bench: ReadNightlyRun over a real-size synthetic result set"};
  int runs = 7, archs = 3, testcases = 3000, reps = 3, files_per_arch = 20;
  std::string dir;
  bool keep = false;
  app.add_option("--runs", runs, "runs (nights)")->check(CLI::Range(1, 100));
  app.add_option("--archs", archs, "archs per run (n150, p150, n300-llmbox, ...)")
      ->check(CLI::Range(1, 7));
  app.add_option("--testcases", testcases, "testcases per arch and run")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--files", files_per_arch, "JUnit files per arch (CI jobs)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--reps", reps, "reads of the whole set per form")->check(CLI::Range(1, 100));
  app.add_option("--dir", dir, "where to write the set (default: a temporary directory)");
  app.add_flag("--keep", keep, "keep the written set");
  CLI11_PARSE(app, argc, argv);

  fs::path root = dir.empty() ? fs::temp_directory_path() /
                                    StrCat("nightly-intake-bench-", static_cast<int>(getpid()))
                              : fs::path(dir);
  fs::create_directories(root);

  // --- the set ---------------------------------------------------------------------------
  const auto gen_start = std::chrono::steady_clock::now();
  std::vector<fs::path> dir_runs, archive_runs;
  std::uint64_t xml_bytes = 0, archive_bytes = 0;
  int files = 0;
  std::mt19937 rng(20261127);
  for (int r = 0; r < runs; ++r) {
    const std::string label = StrCat("2026-11-", 10 + r);
    const fs::path run_dir = root / "dirs" / label;
    const fs::path archive_path = root / "archives" / StrCat(label, ".tar.gz");
    fs::create_directories(archive_path.parent_path());
    struct archive* a = archive_write_new();
    archive_write_set_format_pax_restricted(a);
    archive_write_add_filter_gzip(a);
    if (archive_write_open_filename(a, archive_path.c_str()) != ARCHIVE_OK) {
      Die(StrCat(archive_path.string(), ": ", archive_error_string(a)));
    }
    for (int ai = 0; ai < archs; ++ai) {
      const std::string arch = kArchs[ai];
      for (int f = 0; f < files_per_arch; ++f) {
        const int first = testcases * f / files_per_arch;
        const int last = testcases * (f + 1) / files_per_arch;
        std::string body;
        for (int i = first; i < last; ++i) body += Testcase(rng, r, arch, i);
        const std::string xml = StrCat(
            "<?xml version=\"1.0\" encoding=\"utf-8\"?>\n<testsuites>\n  <testsuite "
            "name=\"pytest\" errors=\"0\" failures=\"0\" skipped=\"0\" tests=\"",
            last - first, "\" time=\"3012.5\" timestamp=\"", label, "T0", f % 10, ":13:44.",
            100000 + ai, "+00:00\" hostname=\"", arch, "-ci-", f, "\">\n", body,
            "  </testsuite>\n</testsuites>\n");
        const std::string rel = StrCat("test-reports-", arch, "-", f, "/report.xml");
        fs::create_directories((run_dir / rel).parent_path());
        std::ofstream(run_dir / rel, std::ios::binary) << xml;
        struct archive_entry* e = archive_entry_new();
        archive_entry_set_pathname(e, rel.c_str());
        archive_entry_set_filetype(e, AE_IFREG);
        archive_entry_set_perm(e, 0644);
        archive_entry_set_size(e, static_cast<la_int64_t>(xml.size()));
        if (archive_write_header(a, e) != ARCHIVE_OK ||
            archive_write_data(a, xml.data(), xml.size()) != static_cast<la_ssize_t>(xml.size())) {
          Die(StrCat(archive_path.string(), ": ", archive_error_string(a)));
        }
        archive_entry_free(e);
        xml_bytes += xml.size();
        ++files;
      }
    }
    archive_write_close(a);
    archive_write_free(a);
    archive_bytes += fs::file_size(archive_path);
    dir_runs.push_back(run_dir);
    archive_runs.push_back(archive_path);
  }
  const double gen_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - gen_start).count();
  const double rss_before = PeakRssMb();
  const double mb = static_cast<double>(xml_bytes) / 1e6;
  std::printf(
      "set: %d runs x %d archs x %d testcases = %lld testcases in %d files per form; XML %.1f MB "
      "(%.1f KB per testcase), archives %.1f MB; written in %.1f s to %s\n",
      runs, archs, testcases, static_cast<long long>(runs) * archs * testcases, files, mb,
      static_cast<double>(xml_bytes) / 1e3 / (static_cast<double>(runs) * archs * testcases),
      static_cast<double>(archive_bytes) / 1e6, gen_seconds, root.c_str());

  // --- reads -----------------------------------------------------------------------------
  std::printf("\n| form | median s | testcases/s | MB/s of XML | records | records in memory |\n");
  std::printf("|---|---:|---:|---:|---:|---:|\n");
  for (const auto& [form, paths] :
       {std::make_pair("directory", &dir_runs), std::make_pair("tar.gz", &archive_runs)}) {
    std::vector<double> seconds;
    Figures figures;
    for (int i = 0; i < reps; ++i) seconds.push_back(ReadAll(*paths, figures));
    const double median = Median(seconds);
    std::printf("| %s | %.2f | %.0f | %.1f | %lld | %.1f MB |\n", form, median,
                static_cast<double>(figures.testcases) / median, mb / median,
                static_cast<long long>(figures.records),
                static_cast<double>(figures.record_bytes) / 1e6);
  }
  std::printf(
      "\npeak RSS: %.1f MB before reading (after writing the set), %.1f MB after every "
      "read (%d reps per form)\n",
      rss_before, PeakRssMb(), reps);

  if (!keep && dir.empty()) {
    std::error_code ec;
    fs::remove_all(root, ec);
  }
  return 0;
}
