#pragma once

// The form of a YAML reason: one line that names the innermost error and carries nothing that
// differs between machines or runs, so that the same failure reads the same everywhere and two
// reasons can be compared byte for byte. The rules and examples are in docs/junit.md ("Form of a
// reason").

#include <cstddef>
#include <string>
#include <string_view>

namespace triage::junit {

inline constexpr std::size_t kMaxReasonBytes = 300;

// One line of evidence (or a reason already written) -> its reason form, in this order:
//  1. only the first non-blank line is read; colour codes (ESC[..m, pytest's "#x1B[..m") and
//     surrounding whitespace go;
//  2. a logger's header goes: a leading timestamp, then "| "-separated columns such as
//     "critical |   Always | " (when a timestamp or a log level was among them), loguru's
//     "module:function:line - ", glog's "F0601 10:00:00.123456  4242 file.cc:12] ";
//  3. the innermost error on the line is kept: a Python exception type in front of a device error
//     (TT_FATAL, TT_THROW, "Fatal Python error:", "error: ", "Out of Memory", "ElementsAttr") is
//     dropped, and so is a wrapper whose message carries another exception after ": "
//     ("BackendCompilerFailed: backend='tt' raised: ValueError: x" -> "ValueError: x");
//  4. absolute paths become the file's basename ("/home/u/tt-metal/x/conv2d.cpp:88" ->
//     "conv2d.cpp:88"), a bare home directory "~"; memory addresses (0x and 9 or more hex
//     digits) become "0x…"; process and thread ids after "pid"/"tid" become "…";
//  5. the result is cut at a UTF-8 boundary when longer than max_bytes (0: never cut).
// Numbers that describe the model or the op (shapes, sizes, page sizes, line numbers) stay.
// Idempotent: NormalizeReason(NormalizeReason(x)) == NormalizeReason(x).
std::string NormalizeReason(std::string_view line, std::size_t max_bytes = kMaxReasonBytes);

// The failure-cluster key of a reason (docs/report.md, "Failure clusters"): its NormalizeReason
// form (never cut) with source paths reduced to their file names and every number written "N",
// so that one bug seen on models of different shapes, sizes or op sites reads the same
// ("Expected more than 1 value per channel when training, got input size torch.Size([N, N, N,
// N])"). Digits inside a name stay (conv2d, float32); hex numbers read "0xN". Idempotent.
std::string ReasonSignature(std::string_view reason);

// A failure cluster's stable id: "c-" and 8 hex digits of the FNV-1a hash of its signature, so
// that a tracking-issue file or a sweep's selection can name a cluster across sweeps.
std::string ClusterId(std::string_view signature);
// The id of the cluster a reason falls in (an empty reason: the signature "(no reason)").
std::string ClusterIdOfReason(std::string_view reason);

// "SIGABRT" for 6, "SIGSEGV" for 11, ...; "" for numbers without a standard Linux name.
std::string_view SignalName(int signal);

// A crash's reason: "crashed with signal 6 (SIGABRT)", then " during <where>" when the evidence
// shows where the process was ("TT-MLIR compilation": CrashWhere), then ": <message>" when the
// crash left a message that says more than the signal (the message goes through
// NormalizeReason). signal 0 (unknown) reads "crashed". Cut at max_bytes like NormalizeReason.
std::string CrashReason(int signal, std::string_view where, std::string_view message,
                        std::size_t max_bytes = kMaxReasonBytes);
std::string CrashReason(int signal, std::string_view message,
                        std::size_t max_bytes = kMaxReasonBytes);

// The words a crash reason uses for a bringup stage: "FE compilation" for
// FAILED_FE_COMPILATION, "TT-MLIR compilation" for FAILED_TTMLIR_COMPILATION, "runtime execution"
// for FAILED_RUNTIME; "" for anything else.
std::string_view CrashWhere(std::string_view stage);

}  // namespace triage::junit
