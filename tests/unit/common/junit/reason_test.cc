// The form of a reason (NormalizeReason, CrashReason) and the reason rules of Classify that
// depend on more than one line: exception chains and crashes (docs/junit.md).

#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "common/junit/junit.h"
#include "common/junit/reason.h"
#include "common/junit/verdict.h"
#include "common/util/text.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace triage::junit {
namespace {

// ---------------------------------------------------------------------------------------------
// NormalizeReason

struct NormalizeCase {
  std::string name;
  std::string input;
  std::string expected;
};

void PrintTo(const NormalizeCase& c, std::ostream* os) { *os << c.name; }

std::vector<NormalizeCase> NormalizeCases() {
  return {
      // --- whitespace, colour, one line
      {"ColourAndWhitespace", "  \x1b[31mTT_FATAL @ eltwise.cpp:5: x\x1b[0m  ",
       "TT_FATAL @ eltwise.cpp:5: x"},
      {"PytestEscapedColour", "#x1B[31mTT_THROW @ device.cpp:9: bad core#x1B[0m",
       "TT_THROW @ device.cpp:9: bad core"},
      {"FirstLineOnly", "\nKeyError: 'logits'\nsecond line", "KeyError: 'logits'"},

      // --- logger headers
      {"TtMetalLoggerHeader",
       "2025-06-01 10:03:12.001 | critical |          Always | TT_FATAL @ "
       "/home/ci/tt-metal/ttnn/cpp/ttnn/operations/conv/conv2d/conv2d.cpp:88: input.dtype() == "
       "DataType::BFLOAT16",
       "TT_FATAL @ conv2d.cpp:88: input.dtype() == DataType::BFLOAT16"},
      {"TtMetalLoggerWithoutTimestamp",
       "                 Always | FATAL    | TT_THROW @ device.cpp:77: timeout",
       "TT_THROW @ device.cpp:77: timeout"},
      {"TtMetalLoggerKeepsItsFileAndLine",
       "2025-09-10 14:03:22.512 | critical |          Always | DRAM Auto slice could not find "
       "valid slice configuration on output dimension 1 (assert.hpp:104)",
       "DRAM Auto slice could not find valid slice configuration on output dimension 1 "
       "(assert.hpp:104)"},
      {"LoguruHeader",
       "2025-06-01 10:00:00.123 | ERROR    | tt_torch.backend.backend:compile:212 - error: "
       "'ttir.conv2d' op expected bias shape",
       "error: 'ttir.conv2d' op expected bias shape"},
      {"BracketedHeader", "[2025-06-01 10:00:00.123] [critical] [Metal] TT_FATAL @ a.cpp:1: y",
       "TT_FATAL @ a.cpp:1: y"},
      {"GlogFatal",
       "F0000 00:00:1717000000.123456   48213 computation_client.cc:240] Check failed: "
       "handle->HasValue()",
       "Check failed: handle->HasValue()"},
      {"GlogError",
       "E0601 10:00:00.123456  4242 pjrt_stream_executor_client.cc:2809] Execution of replica 0 "
       "failed: INTERNAL: Error code: 13",
       "Execution of replica 0 failed: INTERNAL: Error code: 13"},
      {"BarInAMessageIsNoHeader", "Shape | dtype mismatch", "Shape | dtype mismatch"},

      // --- the innermost error on the line
      {"TypeBeforeTtFatal", "RuntimeError: TT_FATAL @ matmul.cpp:12: a == b",
       "TT_FATAL @ matmul.cpp:12: a == b"},
      {"LandedShortTtFatal", "RuntimeError: TT_FATAL conv2d", "TT_FATAL conv2d"},
      {"TypeBeforeMlirError",
       "RuntimeError: error: 'ttir.gather' op failed to verify operand shapes",
       "error: 'ttir.gather' op failed to verify operand shapes"},
      {"TypeBeforeOom",
       "RuntimeError: Out of Memory: Not enough space to allocate 1048576 B DRAM buffer across 12 "
       "banks",
       "Out of Memory: Not enough space to allocate 1048576 B DRAM buffer across 12 banks"},
      {"TypeBeforeElementsAttr",
       "RuntimeError: ElementsAttr does not provide iteration facilities for type `int`, see "
       "attribute: dense<4294967295> : tensor<ui32>",
       "ElementsAttr does not provide iteration facilities for type `int`, see attribute: "
       "dense<4294967295> : tensor<ui32>"},
      {"FatalPythonErrorInARuntimeError",
       "RuntimeError: Fatal Python error: Aborted during torch_xla.sync after forward pass.",
       "Fatal Python error: Aborted during torch_xla.sync after forward pass."},
      {"FatalPythonErrorInsideAMessage",
       "RuntimeError: torch_xla.sync failed: Fatal Python error: Segmentation fault",
       "Fatal Python error: Segmentation fault"},
      {"WrapperAroundDeviceError",
       "torch._dynamo.exc.BackendCompilerFailed: backend='tt' raised: RuntimeError: TT_THROW @ "
       "device.cpp:9: bad core",
       "TT_THROW @ device.cpp:9: bad core"},
      {"WrapperAroundFrontendError",
       "torch._dynamo.exc.BackendCompilerFailed: backend='tt' raised: ValueError: Node arity "
       "mismatch; expected 15, but got 16.",
       "ValueError: Node arity mismatch; expected 15, but got 16."},
      {"WrapperStartingWithTheInner",
       "torch._dynamo.exc.InternalTorchDynamoError: AttributeError: 'NoneType' object has no "
       "attribute 'max'",
       "AttributeError: 'NoneType' object has no attribute 'max'"},
      {"FrontendErrorKeepsItsType",
       "RuntimeError: mat1 and mat2 must have the same dtype, but got BFloat16 and Float",
       "RuntimeError: mat1 and mat2 must have the same dtype, but got BFloat16 and Float"},
      {"SentenceIsNoNesting",
       "ModuleNotFoundError: Could not import module 'SeamlessM4TModel'. RuntimeError: function "
       "'_has_torch_function' already has a docstring",
       "ModuleNotFoundError: Could not import module 'SeamlessM4TModel'. RuntimeError: function "
       "'_has_torch_function' already has a docstring"},
      {"StatusCodesAreNoTypes", "RuntimeError: Bad StatusOr access: INTERNAL: Error code: 13",
       "RuntimeError: Bad StatusOr access: INTERNAL: Error code: 13"},
      {"BareErrorIsNoType", "ValueError: Error: bad input", "ValueError: Error: bad input"},
      {"PccLineUnchanged",
       "AssertionError: Evaluation result 0 failed: PCC comparison failed. Calculated: pcc=nan "
       "(invalid value). Required: pcc=0.99.",
       "AssertionError: Evaluation result 0 failed: PCC comparison failed. Calculated: pcc=nan "
       "(invalid value). Required: pcc=0.99."},
      {"TimeoutUnchanged", "Failed: Timeout >600.0s", "Failed: Timeout >600.0s"},

      // --- paths
      {"PytestTmpPath",
       "FileNotFoundError: [Errno 2] No such file or directory: "
       "'/tmp/pytest-of-ci/pytest-12/test_all_models_torch_yolo0/weights.pt'",
       "FileNotFoundError: [Errno 2] No such file or directory: 'weights.pt'"},
      {"HomeCachePath",
       "OSError: /home/alice/.cache/huggingface/hub/models--bert-base does not appear to have a "
       "file named config.json",
       "OSError: models--bert-base does not appear to have a file named config.json"},
      {"TildePath", "RuntimeError: unexpected EOF in ~/.cache/torch/hub/checkpoints/resnet50.pth.",
       "RuntimeError: unexpected EOF in resnet50.pth."},
      {"HomeDirectoryItself", "PermissionError: [Errno 13] Permission denied: '/home/alice'",
       "PermissionError: [Errno 13] Permission denied: '~'"},
      {"WorkspacePathInMlirLocation",
       "loc(\"/localdev/ci/work/tt-xla/python_package/model.py\":12:3): error: 'ttir.conv2d' op "
       "expected bias shape",
       "loc(\"model.py\":12:3): error: 'ttir.conv2d' op expected bias shape"},
      {"RelativePathKept",
       "TT_FATAL @ tt_metal/impl/buffers/circular_buffer.cpp:88: CB page size 64 should be "
       "greater than the config tensor page size 132",
       "TT_FATAL @ tt_metal/impl/buffers/circular_buffer.cpp:88: CB page size 64 should be "
       "greater than the config tensor page size 132"},
      {"UrlKept",
       "Out of Memory: Not enough space to allocate 36126720 B L1 buffer across 24 banks "
       "https://github.com/tenstorrent/tt-xla/issues/918",
       "Out of Memory: Not enough space to allocate 36126720 B L1 buffer across 24 banks "
       "https://github.com/tenstorrent/tt-xla/issues/918"},
      {"DivisionKept", "ValueError: expected 3/4 of 1024 / 2 elements",
       "ValueError: expected 3/4 of 1024 / 2 elements"},
      // One step uncovers what another removes: the form is a fixed point.
      {"PathBeforeAnException", "/ws/x/RuntimeError: TT_FATAL @ a.cpp:1: b",
       "TT_FATAL @ a.cpp:1: b"},

      // --- addresses and ids
      {"FaulthandlerThread", "Current thread 0x00007f3a2b1c4740 (most recent call first):",
       "Current thread 0x… (most recent call first):"},
      {"ObjectAddress", "TypeError: cannot pickle '_thread.lock' object at 0x7f3a2b1c4740",
       "TypeError: cannot pickle '_thread.lock' object at 0x…"},
      {"DeviceAddressKept", "TT_FATAL @ allocator.cpp:210: address 0x1a000 is not aligned",
       "TT_FATAL @ allocator.cpp:210: address 0x1a000 is not aligned"},
      {"MlirHexConstantKept",
       "error: 'ttir.constant' op value dense<\"0x0000803F0000803F\"> : tensor<2xf32> mismatch",
       "error: 'ttir.constant' op value dense<\"0x0000803F0000803F\"> : tensor<2xf32> mismatch"},
      {"DataLoaderPid", "RuntimeError: DataLoader worker (pid 48213) is killed by signal: Aborted.",
       "RuntimeError: DataLoader worker (pid …) is killed by signal: Aborted."},
      {"DataLoaderPids",
       "RuntimeError: DataLoader worker (pid(s) 48213, 48214) exited unexpectedly",
       "RuntimeError: DataLoader worker (pid(s) …) exited unexpectedly"},
      {"ThreadId", "TT_THROW @ hw_command_queue.cpp:301: worker tid=4123 hung",
       "TT_THROW @ hw_command_queue.cpp:301: worker tid=… hung"},
      {"WordEndingInPidKept", "ValueError: rapid 12 steps", "ValueError: rapid 12 steps"},

      // --- numbers that describe the model or the op stay
      {"CircularBufferNumbersKept",
       "Statically allocated circular buffers on core range [(x=0,y=0) - (x=7,y=7)] grow to "
       "2003264 B which is beyond max L1 size of 1499136 B",
       "Statically allocated circular buffers on core range [(x=0,y=0) - (x=7,y=7)] grow to "
       "2003264 B which is beyond max L1 size of 1499136 B"},
      {"PageSizesKept",
       "TT_FATAL: CB page size 64 should be greater than the config tensor page size 132 "
       "(assert.hpp:104)",
       "TT_FATAL: CB page size 64 should be greater than the config tensor page size 132 "
       "(assert.hpp:104)"},
  };
}

class NormalizeReasonTest : public ::testing::TestWithParam<NormalizeCase> {};

TEST_P(NormalizeReasonTest, Form) {
  EXPECT_EQ(NormalizeReason(GetParam().input), GetParam().expected);
}

TEST_P(NormalizeReasonTest, Idempotent) {
  EXPECT_EQ(NormalizeReason(GetParam().expected), GetParam().expected);
}

INSTANTIATE_TEST_SUITE_P(Cases, NormalizeReasonTest, ::testing::ValuesIn(NormalizeCases()),
                         [](const auto& p) { return p.param.name; });

// The same failure seen on two machines reads the same.
TEST(NormalizeReasonTest, SameFailureOnTwoMachines) {
  EXPECT_EQ(NormalizeReason("RuntimeError: TT_FATAL @ /home/alice/tt-metal/ttnn/cpp/ttnn/"
                            "operations/matmul/matmul.cpp:120: a.dtype() == b.dtype()"),
            NormalizeReason("2025-07-02 08:15:00.456 | critical |          Always | TT_FATAL @ "
                            "/opt/ci/tt-metal/ttnn/cpp/ttnn/operations/matmul/matmul.cpp:120: "
                            "a.dtype() == b.dtype()"));
  EXPECT_EQ(NormalizeReason("TypeError: cannot pickle 'Tensor' object at 0x7f3a2b1c4740 in "
                            "/tmp/pytest-of-alice/pytest-3/t0/cache.pkl"),
            NormalizeReason("TypeError: cannot pickle 'Tensor' object at 0x55d0c0ffee00 in "
                            "/tmp/pytest-of-ci/pytest-41/t0/cache.pkl"));
}

TEST(NormalizeReasonTest, CutAtUtf8Boundary) {
  // 18 ASCII bytes, then an em dash (3 bytes) that straddles the 20-byte limit.
  std::string line = "ValueError: abcdef\xe2\x80\x94tail";
  EXPECT_EQ(NormalizeReason(line, 20), "ValueError: abcdef");
  EXPECT_EQ(NormalizeReason(line, 0), line);
  // The cut comes after the paths are shortened: the whole basename fits.
  EXPECT_EQ(NormalizeReason("TT_FATAL @ /very/long/absolute/path/to/the/source/x.cpp:1: y", 22),
            "TT_FATAL @ x.cpp:1: y");
}

// ---------------------------------------------------------------------------------------------
// SignalName, CrashReason

TEST(CrashReasonTest, SignalNames) {
  EXPECT_EQ(SignalName(4), "SIGILL");
  EXPECT_EQ(SignalName(6), "SIGABRT");
  EXPECT_EQ(SignalName(7), "SIGBUS");
  EXPECT_EQ(SignalName(8), "SIGFPE");
  EXPECT_EQ(SignalName(9), "SIGKILL");
  EXPECT_EQ(SignalName(11), "SIGSEGV");
  EXPECT_EQ(SignalName(15), "SIGTERM");
  EXPECT_EQ(SignalName(0), "");
  EXPECT_EQ(SignalName(42), "");
}

struct CrashCase {
  std::string name;
  int signal;
  std::string message;
  std::string expected;
};

void PrintTo(const CrashCase& c, std::ostream* os) { *os << c.name; }

class CrashReasonTest : public ::testing::TestWithParam<CrashCase> {};

TEST_P(CrashReasonTest, Form) {
  EXPECT_EQ(CrashReason(GetParam().signal, GetParam().message), GetParam().expected);
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CrashReasonTest,
    ::testing::ValuesIn(std::vector<CrashCase>{
        {"Abort", 6, "", "crashed with signal 6 (SIGABRT)"},
        {"Segfault", 11, "", "crashed with signal 11 (SIGSEGV)"},
        {"Kill", 9, "", "crashed with signal 9 (SIGKILL)"},
        {"UnnamedSignal", 42, "", "crashed with signal 42"},
        {"UnknownSignal", 0, "", "crashed"},
        {"UnknownSignalWithMessage", 0, "Fatal Python error: Cannot recover from stack overflow.",
         "crashed: Fatal Python error: Cannot recover from stack overflow."},
        {"MessageIsNormalized", 6,
         "2025-06-01 10:03:12.001 | critical |          Always | TT_THROW @ "
         "/home/ci/tt-metal/tt_metal/impl/device/device.cpp:712: Device 0 timed out",
         "crashed with signal 6 (SIGABRT): TT_THROW @ device.cpp:712: Device 0 timed out"},
        {"BlankMessage", 8, "   ", "crashed with signal 8 (SIGFPE)"},
    }),
    [](const auto& p) { return p.param.name; });

TEST(CrashReasonTest, CutAtMaxBytes) {
  EXPECT_EQ(CrashReason(6, "TT_FATAL @ a.cpp:1: long message", 41),
            "crashed with signal 6 (SIGABRT): TT_FATAL");
}

// ---------------------------------------------------------------------------------------------
// Classify: chains and crashes

constexpr std::string_view kKey = "m/pytorch-v-single_device-training";

TestCase Failure(std::string message, std::string text,
                 std::vector<std::pair<std::string, std::string>> props = {}) {
  TestCase tc;
  tc.key = std::string(kKey);
  tc.name = "test_all_models_torch[" + tc.key + "]";
  tc.outcome = Outcome::kFailed;
  tc.message = std::move(message);
  tc.text = std::move(text);
  tc.properties = std::move(props);
  return tc;
}

TestCase Missing() {
  TestCase tc;
  tc.key = std::string(kKey);
  tc.outcome = Outcome::kMissing;
  return tc;
}

VerifyContext Log(std::string log, int exit_signal = 0) {
  VerifyContext ctx;
  ctx.log_text = std::move(log);
  ctx.exit_signal = exit_signal;
  return ctx;
}

struct ReasonCase {
  std::string name;
  std::optional<TestCase> tc;  // nullopt: no testcase at all
  VerifyContext ctx;
  Verdict verdict;
  std::string reason;
  std::string reason_source;
  int signal = 0;
};

void PrintTo(const ReasonCase& c, std::ostream* os) { *os << c.name; }

constexpr char kDirectCause[] =
    "\nThe above exception was the direct cause of the following exception:\n\n";
constexpr char kDuringHandling[] =
    "\nDuring handling of the above exception, another exception occurred:\n\n";

// The first exception of a pytest chain: the frame, the E lines, the location line.
std::string Link(std::string e_lines, std::string where) {
  return "    def compile(gm):\n>       return backend(gm)\n\n" + e_lines + "\n\n" + where + "\n";
}

std::vector<ReasonCase> ChainCases() {
  std::vector<ReasonCase> c;
  const std::string arity = "ValueError: Node arity mismatch; expected 15, but got 16.";
  const std::string arity_link =
      Link("E   " + arity, "python_package/tt_torch/backend/passes.py:41: ValueError");
  // torch's wrapper: its message is "backend='tt' raised:" followed by the wrapped error.
  const std::string backend_failed =
      Link("E   torch._dynamo.exc.BackendCompilerFailed: backend='tt' raised:\nE   " + arity +
               "\nE   \nE   Set TORCH_LOGS=\"+dynamo\" and TORCHDYNAMO_VERBOSE=1 for more "
               "information",
           "tests/runner/test_models.py:160: BackendCompilerFailed");

  c.push_back({"DirectCauseRepeatedMessage",
               Failure("RuntimeError: Failed to compile graph: Node arity mismatch; expected 15, "
                       "but got 16.",
                       arity_link + kDirectCause +
                           Link("E   RuntimeError: Failed to compile graph: Node arity mismatch; "
                                "expected 15, but got 16.",
                                "tests/runner/test_models.py:160: RuntimeError")),
               VerifyContext{}, Verdict::kFailure, arity, "failure_text"});
  c.push_back({"WrapperCarriesTheInnerLine",
               Failure("x", arity_link + kDirectCause + backend_failed), VerifyContext{},
               Verdict::kFailure, arity, "failure_text"});
  c.push_back(
      {"ThreeLinksInnermostWins",
       Failure("x", Link("E   KeyError: 'logits'", "loader.py:12: KeyError") + kDirectCause +
                        Link("E   AttributeError: unpack failed: 'logits'",
                             "training_utils.py:30: AttributeError") +
                        kDirectCause +
                        Link("E   RuntimeError: test body failed: unpack failed: "
                             "'logits'",
                             "tests/runner/test_models.py:160: RuntimeError")),
       VerifyContext{}, Verdict::kFailure, "KeyError: 'logits'", "failure_text"});
  c.push_back(
      {"DirectCauseOuterSaysMore",
       Failure("x", Link("E   KeyError: 'logits'", "loader.py:12: KeyError") + kDirectCause +
                        Link("E   RuntimeError: unpack_forward_output found no tensor in "
                             "MgpstrOutput",
                             "training_utils.py:30: RuntimeError")),
       VerifyContext{}, Verdict::kFailure,
       "RuntimeError: unpack_forward_output found no tensor in MgpstrOutput", "failure_text"});
  c.push_back({"DuringHandlingAnotherError",
               Failure("x", Link("E   AttributeError: 'tuple' object has no attribute 'logits'",
                                 "training_utils.py:30: AttributeError") +
                                kDuringHandling +
                                Link("E   TypeError: unpack_forward_output returned tuple, not a "
                                     "torch.Tensor",
                                     "tests/runner/test_models.py:66: TypeError")),
               VerifyContext{}, Verdict::kFailure,
               "TypeError: unpack_forward_output returned tuple, not a torch.Tensor",
               "failure_text"});
  c.push_back(
      {"DuringHandlingWrapper",
       Failure("x", Link("E   NotImplementedError: Could not run 'aten::_foreach_add_.Scalar' "
                         "with arguments from the 'XLA' backend.",
                         "torch/_ops.py:1116: NotImplementedError") +
                        kDuringHandling +
                        Link("E   RuntimeError: training step failed: Could not run "
                             "'aten::_foreach_add_.Scalar' with arguments from the 'XLA' backend.",
                             "tests/runner/test_models.py:160: RuntimeError")),
       VerifyContext{}, Verdict::kFailure,
       "NotImplementedError: Could not run 'aten::_foreach_add_.Scalar' with arguments from the "
       "'XLA' backend.",
       "failure_text"});
  // The inner message counts only as the whole text after a ": ".
  c.push_back({"MessageInsideASentenceIsNoWrap",
               Failure("x", Link("E   KeyError: 'x'", "loader.py:12: KeyError") + kDirectCause +
                                Link("E   RuntimeError: shape mismatch for 'x' in layer 3",
                                     "tests/runner/test_models.py:160: RuntimeError")),
               VerifyContext{}, Verdict::kFailure,
               "RuntimeError: shape mismatch for 'x' in layer 3", "failure_text"});
  // triage_error holds the outermost exception's first line; the traceback shows what it wraps.
  c.push_back({"TriageErrorOfAWrapper",
               Failure("x", arity_link + kDirectCause + backend_failed,
                       {{"triage_error", "BackendCompilerFailed: backend='tt' raised:"}}),
               VerifyContext{}, Verdict::kFailure, arity, "failure_text"});
  c.push_back({"TrustedErrorMessageOfAWrapper",
               Failure("x", arity_link + kDirectCause + backend_failed,
                       {{"error_message", "backend='tt' raised:"}}),
               VerifyContext{}, Verdict::kFailure, arity, "failure_text"});
  c.push_back({"TriageErrorOfAnotherExceptionKept",
               Failure("x", arity_link + kDirectCause + backend_failed,
                       {{"triage_error", "KeyError: 'logits'"}}),
               VerifyContext{}, Verdict::kFailure, "KeyError: 'logits'", "triage_error"});
  c.push_back({"TriageErrorCarryingAFatalPythonError",
               Failure("x", "E   RuntimeError: x",
                       {{"triage_error",
                         "RuntimeError: Fatal Python error: Aborted during torch_xla.sync after "
                         "forward pass."}}),
               VerifyContext{}, Verdict::kFailure,
               "Fatal Python error: Aborted during torch_xla.sync after forward pass.",
               "triage_error"});
  // A native Python traceback in the captured output: the same chain rule.
  {
    TestCase tc = Failure("RuntimeError: Error code: 13", "E   RuntimeError: Error code: 13");
    tc.system_err =
        "Traceback (most recent call last):\n  File \"/home/ci/tt-xla/passes.py\", line 41, in "
        "run\n    raise ValueError(msg)\n" +
        arity + "\n" + kDirectCause +
        "Traceback (most recent call last):\n  File \"/home/ci/tt-xla/backend.py\", line 88, "
        "in compile\n    raise RuntimeError(f\"compile failed: {e}\") from e\n"
        "RuntimeError: compile failed: Node arity mismatch; expected 15, but got 16.\n";
    c.push_back({"ChainInTheCapturedOutput", tc, VerifyContext{}, Verdict::kFailure, arity, "log"});
  }
  return c;
}

// A crash in a native run (no --forked): pytest dies, no XML, the log holds the last words.
// Paths, the thread id and the progress line differ from machine to machine.
std::string NoXmlCrashLog(std::string_view home, std::string_view thread) {
  return "============================= test session starts ==============================\n"
         "collected 1 item\n\n"
         "tests/runner/test_models.py terminate called after throwing an instance of "
         "'std::runtime_error'\n"
         "  what():  TT_FATAL @ " +
         std::string(home) +
         "/tt-metal/ttnn/cpp/ttnn/operations/conv/conv2d/conv2d_utils.cpp:512: in_channels % 32 "
         "== 0\ninfo:\nConv2d input channels must be a multiple of 32\nbacktrace:\n"
         " --- tt::tt_metal::Program::compile()\n"
         "Fatal Python error: Aborted\n\nCurrent thread " +
         std::string(thread) + " (most recent call first):\n  File \"" + std::string(home) +
         "/tt-xla/venv/lib/python3.11/site-packages/torch_xla/torch_xla.py\", line 88 in sync\n";
}

// The same crash under pytest-forked: the testcase says CRASHED, this test's section of the
// summary holds the child's stderr. Another test crashed differently after it.
std::string ForkedCrashLog(std::string_view home) {
  return "=================================== FAILURES ===================================\n"
         "___________ test_all_models_torch[" +
         std::string(kKey) +
         "] ___________\n"
         "tests/runner/test_models.py:160: running the test CRASHED with signal 6\n"
         "------------------------------- captured stderr --------------------------------\n"
         "terminate called after throwing an instance of 'std::runtime_error'\n"
         "  what():  TT_FATAL @ " +
         std::string(home) +
         "/tt-metal/ttnn/cpp/ttnn/operations/conv/conv2d/conv2d_utils.cpp:512: in_channels % 32 "
         "== 0\ninfo:\nConv2d input channels must be a multiple of 32\n"
         "Fatal Python error: Aborted\n\n"
         "_______ test_all_models_torch[other/pytorch-single_device-training] _______\n"
         "tests/runner/test_models.py:160: running the test CRASHED with signal 11\n"
         "------------------------------- captured stderr --------------------------------\n"
         "2025-06-01 10:09:00.000 | critical |          Always | TT_THROW @ "
         "/home/ci/tt-metal/tt_metal/impl/device/device.cpp:712: Device 0 timed out\n"
         "Fatal Python error: Segmentation fault\n\n"
         "=========================== short test summary info ============================\n";
}

constexpr std::string_view kConvCrash =
    "crashed with signal 6 (SIGABRT): TT_FATAL @ conv2d_utils.cpp:512: in_channels % 32 == 0";

std::vector<ReasonCase> CrashCases() {
  std::vector<ReasonCase> c;
  c.push_back({"NoXmlTerminateWithTtFatal", std::nullopt,
               Log(NoXmlCrashLog("/home/alice", "0x00007f3a2b1c4740")), Verdict::kCrash,
               std::string(kConvCrash), "log", 6});
  c.push_back({"NoXmlSameCrashOtherMachine", Missing(),
               Log(NoXmlCrashLog("/opt/ci", "0x00007f11aa22b740") + "Aborted (core dumped)\n", 6),
               Verdict::kCrash, std::string(kConvCrash), "log", 6});
  c.push_back({"ForkedSameCrashFromTheLogSection",
               Failure("tests/runner/test_models.py:160: running the test CRASHED with signal 6",
                       "tests/runner/test_models.py:160: running the test CRASHED with signal 6"),
               Log(ForkedCrashLog("/localdev/bob")), Verdict::kCrash, std::string(kConvCrash),
               "log", 6});
  {
    TestCase tc =
        Failure("running the test CRASHED with signal 11",
                "tests/runner/test_models.py:160: running the test CRASHED with signal 11");
    tc.system_err =
        "Fatal Python error: Segmentation fault\n\nCurrent thread 0x00007f3a2b1c4740 (most "
        "recent call first):\n  File \"/home/ci/x.py\", line 3 in f\n";
    c.push_back({"ForkedSystemErrNamesOnlyTheSignal", tc, VerifyContext{}, Verdict::kCrash,
                 "crashed with signal 11 (SIGSEGV)", "failure_text", 11});
  }
  {
    TestCase tc =
        Failure("running the test CRASHED with signal 6",
                "tests/runner/test_models.py:160: running the test CRASHED with signal 6");
    tc.system_err =
        "terminate called after throwing an instance of 'std::bad_alloc'\n"
        "  what():  std::bad_alloc\n";
    c.push_back({"ForkedTerminateWhat", tc, VerifyContext{}, Verdict::kCrash,
                 "crashed with signal 6 (SIGABRT): std::bad_alloc", "log", 6});
  }
  c.push_back({"ForkedNothingElse",
               Failure("running the test CRASHED with signal 6",
                       "tests/runner/test_models.py:160: running the test CRASHED with signal 6"),
               Log("tests/runner/test_models.py F\n"), Verdict::kCrash,
               "crashed with signal 6 (SIGABRT)", "failure_text", 6});
  c.push_back(
      {"NoXmlGlogCheckFailure", std::nullopt,
       Log("tests/runner/test_models.py F0000 00:00:1717000000.123456   48213 "
           "computation_client.cc:240] Check failed: handle->HasValue() Trying to access XLA data "
           "for tensor with ID 645 while an async operation is in flight\n"
           "*** Check failure stack trace: ***\n"
           "    @     0x7f3a2b1c4740  absl::log_internal::LogMessageFatal::~LogMessageFatal()\n"
           "Fatal Python error: Aborted\n"),
       Verdict::kCrash,
       "crashed with signal 6 (SIGABRT): Check failed: handle->HasValue() Trying to access XLA "
       "data for tensor with ID 645 while an async operation is in flight",
       "log", 6});
  c.push_back({"NoXmlFatalPythonErrorWithText", std::nullopt,
               Log("Fatal Python error: PyThreadState_Get: the function must be called with the "
                   "GIL held, but the GIL is released\nPython runtime state: initialized\n"),
               Verdict::kCrash,
               "crashed with signal 6 (SIGABRT): Fatal Python error: PyThreadState_Get: the "
               "function must be called with the GIL held, but the GIL is released",
               "log", 6});
  c.push_back({"NoXmlFloatingPoint", std::nullopt,
               Log("tests/runner/test_models.py Fatal Python error: Floating point exception\n", 8),
               Verdict::kCrash, "crashed with signal 8 (SIGFPE)", "log", 8});
  c.push_back({"KilledAfterALoggedTtThrow", Missing(),
               Log("2025-06-01 10:00:00.000 | critical |          Always | TT_THROW @ "
                   "/home/ci/tt-metal/tt_metal/impl/dispatch/hardware_command_queue.cpp:301: "
                   "TIMEOUT: device timeout, potential hang detected\n",
                   9),
               Verdict::kCrash,
               "crashed with signal 9 (SIGKILL): TT_THROW @ hardware_command_queue.cpp:301: "
               "TIMEOUT: device timeout, potential hang detected",
               "log", 9});
  // One abort, reported four ways: the reasons are byte-identical.
  c.push_back({"AbortByFaulthandler", std::nullopt,
               Log("tests/runner/test_models.py Fatal Python error: Aborted\n\nCurrent thread "
                   "0x00007f3a2b1c4740 (most recent call first):\n"),
               Verdict::kCrash, "crashed with signal 6 (SIGABRT)", "log", 6});
  c.push_back({"AbortByTheShell", std::nullopt,
               Log("tests/runner/test_models.py .Aborted (core dumped)\n"), Verdict::kCrash,
               "crashed with signal 6 (SIGABRT)", "log", 6});
  c.push_back({"AbortByExitSignal", Missing(), Log("", 6), Verdict::kCrash,
               "crashed with signal 6 (SIGABRT)", "log", 6});
  c.push_back({"AbortByPytestForked",
               Failure("running the test CRASHED with signal 6",
                       "tests/runner/test_models.py:160: running the test CRASHED with signal 6"),
               VerifyContext{}, Verdict::kCrash, "crashed with signal 6 (SIGABRT)", "failure_text",
               6});
  return c;
}

class ClassifyReasonTableTest : public ::testing::TestWithParam<ReasonCase> {};

TEST_P(ClassifyReasonTableTest, Reason) {
  const ReasonCase& c = GetParam();
  Finding f = Classify(c.tc ? &*c.tc : nullptr, c.ctx);
  EXPECT_EQ(VerdictName(f.verdict), VerdictName(c.verdict));
  EXPECT_EQ(f.reason, c.reason);
  EXPECT_EQ(f.reason_source, c.reason_source);
  EXPECT_EQ(f.signal, c.signal);
  if (f.verdict == Verdict::kCrash) {
    EXPECT_EQ(Decide(f).reason, c.reason);
    EXPECT_EQ(Decide(f).status, "NOT_SUPPORTED_SKIP");
  }
}

INSTANTIATE_TEST_SUITE_P(Chains, ClassifyReasonTableTest, ::testing::ValuesIn(ChainCases()),
                         [](const auto& p) { return p.param.name; });
INSTANTIATE_TEST_SUITE_P(Crashes, ClassifyReasonTableTest, ::testing::ValuesIn(CrashCases()),
                         [](const auto& p) { return p.param.name; });

// Every reason Classify produces is already in its form.
TEST(ClassifyReasonTableTest, ReasonsAreNormalized) {
  std::vector<ReasonCase> all = ChainCases();
  for (ReasonCase& c : CrashCases()) all.push_back(std::move(c));
  for (const ReasonCase& c : all) {
    Finding f = Classify(c.tc ? &*c.tc : nullptr, c.ctx);
    EXPECT_EQ(NormalizeReason(f.reason), f.reason) << c.name;
  }
}

// The failure-cluster key: one bug on models of different sizes reads the same; names keep
// their digits; different errors stay apart.
TEST(ReasonSignature, NumbersVaryNamesDoNot) {
  struct Case {
    std::string a, b;
    bool same;
  };
  const std::vector<Case> cases = {
      {"ValueError: Expected more than 1 value per channel when training, got input size "
       "torch.Size([1, 256, 1, 1])",
       "ValueError: Expected more than 1 value per channel when training, got input size "
       "torch.Size([1, 8, 1, 1])",
       true},
      {"TT_THROW @ tt_metal/impl/program/program.cpp:902: Statically allocated circular buffers "
       "grow to 1572864 B which is beyond max L1 size of 1499136 B",
       "TT_THROW @ /home/ci/tt-metal/tt_metal/impl/program/program.cpp:910: Statically allocated "
       "circular buffers grow to 2097152 B which is beyond max L1 size of 1499136 B",
       true},
      {"error: 'ttir.conv2d' op expected bias shape", "error: 'ttir.conv3d' op expected bias shape",
       false},
      {"RuntimeError: expected scalar type BFloat16 but found Float",
       "RuntimeError: expected scalar type Float but found BFloat16", false},
      {"Out of Memory: Not enough space to allocate 0x1F00 B",
       "Out of Memory: Not enough space "
       "to allocate 0x2000 B",
       true},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(ReasonSignature(c.a) == ReasonSignature(c.b), c.same)
        << ReasonSignature(c.a) << " vs " << ReasonSignature(c.b);
    EXPECT_EQ(ReasonSignature(ReasonSignature(c.a)), ReasonSignature(c.a)) << "idempotent";
  }
  EXPECT_EQ(ReasonSignature("ValueError: got torch.Size([1, 256, 1, 1]) on float32"),
            "ValueError: got torch.Size([N, N, N, N]) on float32");
}

}  // namespace
}  // namespace triage::junit
