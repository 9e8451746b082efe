// remediation_sim: coding agents remediating the failing tests of the largest public remediation
// run, modelled two ways on the same seeded workload (bench/remediation_sim.h).
//
// The workload. Every number below is drawn from the seed with std::mt19937_64 (specified bit for
// bit by the standard) and distributions written here (the standard library's are not portable).
// - Tests: 1,221, as in the public run.
// - Fingerprints: the public figures (631 distinct, 102 shared, the largest 111 tests) count
//   mentions and do not add up to 1,221 tests, so they are a target, not a constraint. The largest
//   fingerprint has 111 tests; the other 101 shared ones take sizes from a discrete power law
//   P(s) ~ s^-2.15 on 2..110 (Zipf-like: rank-size with an exponent near 1), drawn stratified (one
//   draw per 1/101 of the distribution) so the total varies little between seeds. 2.15 makes the
//   expected distinct count about 631. The tests left are singletons. Tests are assigned to
//   fingerprints at random, so a fingerprint's tests need not share hardware.
// - Hardware: n150 600, p150 380, n300 18, none (CPU only) 87; the 136 the public counts leave
//   out are split over n150 and p150 in proportion (83 and 53). Assigned at random.
// - A pytest run of a test: lognormal, median 260 s (the public median), sigma 0.8, at most 3 h;
//   every run of one test takes its duration (a test's CI duration is what the farm knows).
// - A full remediation session: thinking and editing lognormal, median 30 min, sigma 0.7, at most
//   6 h, spread evenly before its pytest runs; runs 1 + geometric (another with probability 2/3,
//   mean 3), at most 8 (the remediation skill bounds its attempts; mean 2.88 with the bound).
//   Outcomes in the public run's proportions, 490 : 223 : 440 : 38 (pass, xfail with a reason,
//   failed with a diagnosis, nothing to fix); a "nothing to fix" session runs once and thinks a
//   quarter as long. Outcomes do not change the session's length otherwise.
// - Per test, drawn once: whether, as a follower, its lead's result does not carry to it (20 %).
//
// One host (the public shape). Every test gets its own full session, in the workload's (random)
// order, from a pool of `host_agents` agents. The host is taken to have every hardware kind; each
// pytest run of a device test needs one of its `host_devices` devices for itself, granted FIFO; a
// CPU-only test's runs need none. An agent that waits for a device is alive, holding a worktree:
// the wait counts in its hours. Agent-hours are the sum of session wall times.
//
// The farm. Each machine is one agent owning one device of its class (a cpu machine none); it
// never waits for a device, and holds it while it thinks. A fingerprint's lead is its test with
// the shortest pytest run (the quickest to iterate on; the farm knows CI's durations); it runs a
// full session on a machine of its hardware. When it ends, each follower runs a confirmation on
// its own hardware: 150 s of agent work and one pytest run. After a pass the follower applies the
// fix; after any other outcome it checks that it fails the same way and takes the lead's xfail
// reason or diagnosis: the public run's "failed" sessions mostly filed a problem without a fix,
// and its agents found the same bug again and again, so a second full diagnosis of one failure
// adds little. When the lead's result does not carry to it (20 %), the follower's agent goes on
// to remediate it in full, in the same session. A passing lead with followers (a cluster's lead:
// the farm plans no wave for a singleton) also runs a wave: up to 8 pytest runs of other tests of
// the lead's hardware, device time with no agent session. Scheduling
// is list scheduling: a machine that is free takes ready work of its own class, leads before
// followers before wave runs, and CPU-only work when it has none of its own (cpu machines take only
// that). Among leads the longest expected first: the lead's expected session (mean thinking + mean
// runs x its test's duration) plus its followers' expected confirmations; among followers and wave
// runs likewise their expected length. Followers are ready when their lead ends. Device-hours, in
// both: pytest time of tests that need a device.

#include "bench/remediation_sim.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <deque>
#include <functional>
#include <numbers>
#include <numeric>
#include <queue>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

namespace triage::fleetsim::remediation {
namespace {

constexpr int kTests = 1221;
constexpr int kSharedFingerprints = 102;
constexpr int kLargestFingerprint = 111;
constexpr double kSizeExponent = 2.15;
constexpr int kPublicHardware[] = {600, 380, 18, 87};  // n150, p150, n300, none
constexpr double kRunMedianS = 260, kRunSigma = 0.8, kRunCapS = 3 * 3600.0;
constexpr double kThinkMedianS = 30 * 60.0, kThinkSigma = 0.7, kThinkCapS = 6 * 3600.0;
constexpr double kAnotherAttempt = 2.0 / 3.0;
constexpr int kMaxAttempts = 8;
constexpr double kOutcomeWeights[] = {490, 223, 440, 38};
constexpr double kNothingThinks = 0.25;
constexpr double kConfirmS = 150;
constexpr double kNotCarried = 0.20;
constexpr int kWaveRuns = 8;
constexpr double kPublicActiveHours = 123;

// Hardware classes of tests; a machine's class is the same, with kNone for a cpu machine.
enum Hw : int { kN150, kP150, kN300, kNone, kHwCount };
constexpr const char* kHwName[] = {"n150", "p150", "n300", "none"};
constexpr const char* kMachineName[] = {"n150", "p150", "n300", "cpu"};
enum Outcome : int { kPass, kXfail, kFailed, kNothing };

std::string Fmt(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string Fmt(const char* format, ...) {
  va_list args, again;
  va_start(args, format);
  va_copy(again, args);
  std::string out(std::max(0, std::vsnprintf(nullptr, 0, format, args)), '\0');
  std::vsnprintf(out.data(), out.size() + 1, format, again);
  va_end(again);
  va_end(args);
  return out;
}

uint64_t SplitMix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// One stream of draws per purpose, so that a change to one does not move the others.
class Rng {
 public:
  Rng(uint64_t seed, uint64_t stream) : engine_(SplitMix(seed ^ SplitMix(stream))) {}
  double Uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }  // [0, 1)
  int Index(int n) { return std::min(n - 1, static_cast<int>(Uniform() * n)); }
  double Normal() {  // Box-Muller, the cosine half
    const double u1 = 1.0 - Uniform();
    const double u2 = Uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
  }
  double LogNormal(double median, double sigma, double cap) {
    return std::min(cap, median * std::exp(sigma * Normal()));
  }
  template <typename T>
  void Shuffle(std::vector<T>& v) {
    for (int i = static_cast<int>(v.size()) - 1; i > 0; --i) std::swap(v[i], v[Index(i + 1)]);
  }

 private:
  std::mt19937_64 engine_;
};

struct Test {
  int hw = kN150;
  double run_s = 0;    // one pytest run
  double think_s = 0;  // a full session's thinking and editing, all attempts
  int attempts = 1;
  int outcome = kPass;
  bool not_carried = false;  // as a follower, its lead's result does not hold for it
  int fingerprint = -1;
  double Full() const { return think_s + attempts * run_s; }
  double DeviceRuns(int runs) const { return hw == kNone ? 0 : runs * run_s; }
};

struct Fingerprint {
  std::vector<int> tests;  // the lead first
  std::vector<int> wave;   // if its lead passes: other tests of the lead's hardware
};

struct Workload {
  std::vector<Test> tests;
  std::vector<Fingerprint> fingerprints;
  int hw_tests[kHwCount] = {};
  int largest = 0, shared = 0, shared_tests = 0, singletons = 0;
};

double MeanAttempts() {
  double mean = 0, p = 1;
  for (int a = 1; a < kMaxAttempts; ++a, p *= kAnotherAttempt)
    mean += a * p * (1 - kAnotherAttempt);
  return mean + kMaxAttempts * p;
}

double MeanThinkS() { return kThinkMedianS * std::exp(kThinkSigma * kThinkSigma / 2); }

// What the farm's scheduler expects of a session: it knows the test's duration, not the agent.
double ExpectedFull(const Test& t) { return MeanThinkS() + MeanAttempts() * t.run_s; }
double ExpectedFollower(const Test& t) {
  return kConfirmS + t.run_s + kNotCarried * ExpectedFull(t);
}

// The shared fingerprints' sizes: the largest, then one stratified draw per 1/(n-1) of the
// power law on 2..largest-1.
std::vector<int> SharedSizes(Rng& rng) {
  std::vector<double> cdf;
  double total = 0;
  for (int s = 2; s < kLargestFingerprint; ++s) total += std::pow(s, -kSizeExponent);
  double acc = 0;
  for (int s = 2; s < kLargestFingerprint; ++s) {
    cdf.push_back(acc += std::pow(s, -kSizeExponent) / total);
  }
  std::vector<int> sizes = {kLargestFingerprint};
  const int n = kSharedFingerprints - 1;
  for (int k = 0; k < n; ++k) {
    const double u = (k + rng.Uniform()) / n;
    const auto i = std::lower_bound(cdf.begin(), cdf.end(), u) - cdf.begin();
    sizes.push_back(2 + static_cast<int>(std::min<std::ptrdiff_t>(i, cdf.size() - 1)));
  }
  return sizes;
}

Workload Generate(uint64_t seed) {
  Workload w;
  w.tests.resize(kTests);

  int hw_counts[kHwCount];
  std::copy(std::begin(kPublicHardware), std::end(kPublicHardware), hw_counts);
  const int rest = kTests - std::accumulate(hw_counts, hw_counts + kHwCount, 0);
  const int rest_n150 = static_cast<int>(
      std::lround(rest * double(hw_counts[kN150]) / (hw_counts[kN150] + hw_counts[kP150])));
  hw_counts[kN150] += rest_n150;
  hw_counts[kP150] += rest - rest_n150;
  std::vector<int> hw;
  for (int c = 0; c < kHwCount; ++c) hw.insert(hw.end(), hw_counts[c], c);
  Rng hw_rng(seed, 1);
  hw_rng.Shuffle(hw);

  Rng rng(seed, 2);
  const double weights =
      std::accumulate(std::begin(kOutcomeWeights), std::end(kOutcomeWeights), 0.0);
  for (int i = 0; i < kTests; ++i) {
    Test& t = w.tests[i];
    t.hw = hw[i];
    ++w.hw_tests[t.hw];
    t.run_s = rng.LogNormal(kRunMedianS, kRunSigma, kRunCapS);
    t.think_s = rng.LogNormal(kThinkMedianS, kThinkSigma, kThinkCapS);
    while (t.attempts < kMaxAttempts && rng.Uniform() < kAnotherAttempt) ++t.attempts;
    double u = rng.Uniform() * weights;
    t.outcome = kPass;
    while (t.outcome < kNothing && u >= kOutcomeWeights[t.outcome]) {
      u -= kOutcomeWeights[t.outcome++];
    }
    t.not_carried = rng.Uniform() < kNotCarried;
    if (t.outcome == kNothing) {
      t.attempts = 1;
      t.think_s *= kNothingThinks;
    }
  }

  Rng fp_rng(seed, 3);
  std::vector<int> ids(kTests);
  std::iota(ids.begin(), ids.end(), 0);
  fp_rng.Shuffle(ids);
  std::size_t next = 0;
  for (int size : SharedSizes(fp_rng)) {
    size = std::min<int>(size, kTests - static_cast<int>(next));
    if (size < 2) break;
    w.fingerprints.push_back({{ids.begin() + next, ids.begin() + next + size}, {}});
    next += size;
    ++w.shared;
    w.shared_tests += size;
    w.largest = std::max(w.largest, size);
  }
  for (; next < ids.size(); ++next) w.fingerprints.push_back({{ids[next]}, {}});
  w.singletons = static_cast<int>(w.fingerprints.size()) - w.shared;
  w.largest = std::max(w.largest, 1);

  std::vector<std::vector<int>> by_hw(kHwCount);
  for (int i = 0; i < kTests; ++i) by_hw[w.tests[i].hw].push_back(i);
  Rng wave_rng(seed, 4);
  for (int f = 0; f < static_cast<int>(w.fingerprints.size()); ++f) {
    Fingerprint& fp = w.fingerprints[f];
    for (int i : fp.tests) w.tests[i].fingerprint = f;
    std::iter_swap(fp.tests.begin(),
                   std::min_element(fp.tests.begin(), fp.tests.end(), [&](int a, int b) {
                     return w.tests[a].run_s < w.tests[b].run_s;
                   }));
    std::vector<int> others;
    for (int i : by_hw[w.tests[fp.tests[0]].hw]) {
      if (w.tests[i].fingerprint != f) others.push_back(i);
    }
    const int n = std::min<int>(kWaveRuns, static_cast<int>(others.size()));
    for (int k = 0; k < n; ++k) {
      std::swap(others[k], others[k + wave_rng.Index(static_cast<int>(others.size()) - k)]);
      fp.wave.push_back(others[k]);
    }
  }
  return w;
}

struct Fleet {
  int machines[kHwCount] = {};  // kNone counts cpu machines
  std::string label;            // the counts as written, joined with '+'
};

bool ParseFleet(const std::string& spec, Fleet* fleet, std::string* error) {
  const std::string usage = "fleet '" + spec +
                            "': each part is a count from 1 to 9999 and a machine class (n150, "
                            "p150, n300, cpu), joined with '+', e.g. 16n150+16p150+4n300";
  std::size_t start = 0;
  while (true) {
    const std::size_t end = std::min(spec.find('+', start), spec.size());
    const std::string part = spec.substr(start, end - start);
    std::size_t digits = 0;
    while (digits < part.size() && std::isdigit(static_cast<unsigned char>(part[digits]))) {
      ++digits;
    }
    const auto cls =
        std::find(std::begin(kMachineName), std::end(kMachineName), part.substr(digits));
    const int count = digits == 0 || digits > 4 ? 0 : std::stoi(part.substr(0, digits));
    if (count < 1 || cls == std::end(kMachineName)) {
      *error = usage;
      return false;
    }
    fleet->machines[cls - std::begin(kMachineName)] += count;
    fleet->label += (fleet->label.empty() ? "" : "+") + std::to_string(count);
    if (end == spec.size()) return true;
    start = end + 1;
  }
}

struct Event {
  double t;
  uint64_t seq;
  int who;
  bool operator>(const Event& o) const { return std::tie(t, seq) > std::tie(o.t, o.seq); }
};
using Events = std::priority_queue<Event, std::vector<Event>, std::greater<>>;

struct HostFigures {
  Figures f;
  double wait_hours = 0;
  double device_busy_s = 0;
};

// The public shape: host_agents agents, host_devices devices, every test a full session.
HostFigures RunOneHost(const Workload& w, const Options& o) {
  struct Agent {
    int test = -1, runs = 0;
    bool running = false;  // the event due is the end of a pytest run, not of thinking
    double start = 0, asked = 0;
  };
  HostFigures out;
  std::vector<Agent> agents(o.host_agents);
  Events events;
  uint64_t seq = 0;
  int next = 0, free_devices = o.host_devices;
  std::deque<int> waiting;
  auto think = [&](int a, double t) {
    const Test& test = w.tests[agents[a].test];
    agents[a].running = false;
    events.push({t + test.think_s / test.attempts, seq++, a});
  };
  auto run = [&](int a, double t) {
    const Test& test = w.tests[agents[a].test];
    agents[a].running = true;
    out.device_busy_s += test.DeviceRuns(1);
    events.push({t + test.run_s, seq++, a});
    if (o.trace) {
      std::fprintf(stderr, "[one-host] %10.1f s agent %2d test %4d run %d/%d%s (waited %.0f s)\n",
                   t, a, agents[a].test, agents[a].runs + 1, test.attempts,
                   test.hw == kNone ? " on the CPU" : " on a device", t - agents[a].asked);
    }
  };
  auto begin = [&](int a, double t) {
    if (next >= kTests) return;
    agents[a] = {next++, 0, false, t, t};
    think(a, t);
  };
  for (int a = 0; a < o.host_agents; ++a) begin(a, 0);
  while (!events.empty()) {
    const Event e = events.top();
    events.pop();
    Agent& agent = agents[e.who];
    const Test& test = w.tests[agent.test];
    agent.asked = e.t;
    if (!agent.running) {
      if (test.hw == kNone) {
        run(e.who, e.t);
      } else if (free_devices > 0) {
        --free_devices;
        run(e.who, e.t);
      } else {
        waiting.push_back(e.who);
      }
      continue;
    }
    if (test.hw != kNone) {
      if (waiting.empty()) {
        ++free_devices;
      } else {
        const int b = waiting.front();
        waiting.pop_front();
        out.wait_hours += (e.t - agents[b].asked) / 3600;
        run(b, e.t);
      }
    }
    if (++agent.runs < test.attempts) {
      think(e.who, e.t);
      continue;
    }
    out.f.agent_hours += (e.t - agent.start) / 3600;
    out.f.makespan_hours = e.t / 3600;
    ++out.f.sessions;
    if (o.trace) {
      std::fprintf(stderr, "[one-host] %10.1f s agent %2d test %4d ends after %.0f s\n", e.t, e.who,
                   agent.test, e.t - agent.start);
    }
    begin(e.who, e.t);
  }
  out.f.tests = kTests;
  out.f.device_hours = out.device_busy_s / 3600;
  return out;
}

struct FarmFigures {
  Figures f;
  int leads = 0, passed = 0, confirmed = 0, alone = 0, wave_runs = 0, machines = 0;
  double busy_s = 0;
  // Work only machines of a class can do (its tests' sessions, confirmations and wave runs).
  double class_s[kHwCount] = {};
};

enum Kind : int { kLead, kFollower, kWave, kKinds };
constexpr const char* kKindName[] = {"lead", "follower", "wave run"};

struct Item {
  double key;  // expected length, longest first
  int id;      // then the earlier made
  int kind, test;
  double duration;
  bool operator<(const Item& o) const { return std::tie(key, o.id) < std::tie(o.key, id); }
};

FarmFigures RunFarm(const Workload& w, const Fleet& fleet, const Options& o) {
  FarmFigures out;
  std::vector<int> machine_class;
  for (int c = 0; c < kHwCount; ++c) {
    machine_class.insert(machine_class.end(), fleet.machines[c], c);
  }
  out.machines = static_cast<int>(machine_class.size());
  std::vector<Item> running(machine_class.size());
  std::vector<bool> busy(machine_class.size(), false);
  std::priority_queue<Item> pools[kHwCount][kKinds];
  int ids = 0;
  auto add = [&](int hw, int kind, int test, double key, double duration) {
    pools[hw][kind].push({key, ids++, kind, test, duration});
  };
  for (const Fingerprint& fp : w.fingerprints) {
    const Test& lead = w.tests[fp.tests[0]];
    double key = ExpectedFull(lead);
    for (std::size_t k = 1; k < fp.tests.size(); ++k) key += ExpectedFollower(w.tests[fp.tests[k]]);
    add(lead.hw, kLead, fp.tests[0], key, lead.Full());
    out.f.device_hours += lead.DeviceRuns(lead.attempts) / 3600;
  }
  Events events;
  uint64_t seq = 0;
  auto finish = [&](const Item& item, double t) {
    if (item.kind != kLead) return;
    const Test& lead = w.tests[item.test];
    const Fingerprint& fp = w.fingerprints[lead.fingerprint];
    ++out.leads;
    for (std::size_t k = 1; k < fp.tests.size(); ++k) {
      const Test& f = w.tests[fp.tests[k]];
      add(f.hw, kFollower, fp.tests[k], ExpectedFollower(f),
          kConfirmS + f.run_s + (f.not_carried ? f.Full() : 0));
      out.f.device_hours += f.DeviceRuns(1 + (f.not_carried ? f.attempts : 0)) / 3600;
      ++(f.not_carried ? out.alone : out.confirmed);
    }
    if (lead.outcome != kPass) return;
    ++out.passed;
    // The farm plans a wave for a cluster's lead only: a fix no other test shares has none.
    if (fp.tests.size() < 2) return;
    for (int i : fp.wave) {
      add(lead.hw, kWave, i, w.tests[i].run_s, w.tests[i].run_s);
      out.f.device_hours += lead.hw == kNone ? 0 : w.tests[i].run_s / 3600;
      ++out.wave_runs;
    }
    if (o.trace) std::fprintf(stderr, "[farm] %10.1f s test %4d's fix passed\n", t, item.test);
  };
  auto dispatch = [&](double t) {
    for (std::size_t m = 0; m < machine_class.size(); ++m) {
      if (busy[m]) continue;
      const int own = machine_class[m];
      for (int hw : {own, static_cast<int>(kNone)}) {
        int kind = 0;
        while (kind < kKinds && pools[hw][kind].empty()) ++kind;
        if (kind == kKinds) continue;
        running[m] = pools[hw][kind].top();
        pools[hw][kind].pop();
        busy[m] = true;
        events.push({t + running[m].duration, seq++, static_cast<int>(m)});
        if (running[m].kind != kWave) out.f.agent_hours += running[m].duration / 3600;
        if (running[m].kind != kWave) ++out.f.sessions;
        out.busy_s += running[m].duration;
        out.class_s[w.tests[running[m].test].hw] += running[m].duration;
        if (o.trace) {
          std::fprintf(stderr, "[farm] %10.1f s %s machine %2zu: %s test %4d (%s), %.0f s\n", t,
                       kMachineName[own], m, kKindName[running[m].kind], running[m].test,
                       kHwName[w.tests[running[m].test].hw], running[m].duration);
        }
        break;
      }
    }
  };
  dispatch(0);
  while (!events.empty()) {
    const double t = events.top().t;
    while (!events.empty() && events.top().t == t) {
      const int m = events.top().who;
      events.pop();
      busy[m] = false;
      finish(running[m], t);
    }
    out.f.makespan_hours = t / 3600;
    dispatch(t);
  }
  out.f.tests = kTests;
  return out;
}

}  // namespace

Result Run(const Options& o, std::string* error) {
  std::string ignored;
  if (error == nullptr) error = &ignored;
  error->clear();
  Fleet fleet;
  if (!ParseFleet(o.fleet, &fleet, error)) return {};
  if (o.host_agents < 1 || o.host_devices < 1) {
    *error = Fmt("the one host needs at least one agent and one device (%d agents, %d devices)",
                 o.host_agents, o.host_devices);
    return {};
  }
  const Workload w = Generate(o.seed);
  for (int c : {kN150, kP150, kN300}) {
    if (w.hw_tests[c] > 0 && fleet.machines[c] == 0) {
      *error = Fmt("fleet '%s' has no %s machine; the workload's %d %s tests need one",
                   o.fleet.c_str(), kHwName[c], w.hw_tests[c], kHwName[c]);
      return {};
    }
  }
  const HostFigures host = RunOneHost(w, o);
  const FarmFigures farm = RunFarm(w, fleet, o);

  Result r;
  r.one_host = host.f;
  r.farm = farm.f;
  std::string& s = r.table;
  const double weights =
      std::accumulate(std::begin(kOutcomeWeights), std::end(kOutcomeWeights), 0.0);
  s +=
      Fmt("remediation workload, seed %llu: %d tests; %zu fingerprints, the largest %d tests, %d "
          "shared by %d tests, %d singletons; hardware",
          static_cast<unsigned long long>(o.seed), kTests, w.fingerprints.size(), w.largest,
          w.shared, w.shared_tests, w.singletons);
  for (int c = 0; c < kHwCount; ++c) {
    s += Fmt(" %s %d%s", kHwName[c], w.hw_tests[c], c + 1 < kHwCount ? "," : "\n");
  }
  s +=
      Fmt("model: a full session thinks %.0f min (median) and runs pytest %.2f times (mean, "
          "at most %d) of %.0f s (median); outcomes %.0f %% pass, %.0f %% xfail, %.0f %% "
          "failed, %.0f %% nothing to fix\n",
          kThinkMedianS / 60, MeanAttempts(), kMaxAttempts, kRunMedianS,
          100 * kOutcomeWeights[kPass] / weights, 100 * kOutcomeWeights[kXfail] / weights,
          100 * kOutcomeWeights[kFailed] / weights, 100 * kOutcomeWeights[kNothing] / weights);
  s +=
      Fmt("one host: %d agents share %d devices (every kind), FIFO; farm: one agent per machine; a "
          "follower confirms in %.0f s + 1 run, %.0f %% remediate alone; waves of %d runs\n",
          o.host_agents, o.host_devices, kConfirmS, 100 * kNotCarried, kWaveRuns);
  s += Fmt("%-10s %9s %12s %13s %11s\n", "", "sessions", "agent-hours", "device-hours",
           "makespan h");
  for (const auto& [name, f] : {std::pair{"one-host", r.one_host}, std::pair{"farm", r.farm}}) {
    s += Fmt("%-10s %9d %12.1f %13.1f %11.1f\n", name, f.sessions, f.agent_hours, f.device_hours,
             f.makespan_hours);
  }
  s +=
      Fmt("one host: %.1f of its agent-hours (%.0f %%) wait for a device; its devices run pytest "
          "%.0f %% of the makespan\n",
          host.wait_hours, 100 * host.wait_hours / std::max(host.f.agent_hours, 1e-9),
          100 * host.device_busy_s / 3600 / std::max(o.host_devices * host.f.makespan_hours, 1e-9));
  s +=
      Fmt("farm %s: %d leads (%d passed), %d followers confirmed, %d remediated alone, %d wave "
          "runs; machines busy %.0f %% of the makespan\n",
          o.fleet.c_str(), farm.leads, farm.passed, farm.confirmed, farm.alone, farm.wave_runs,
          100 * farm.busy_s / 3600 / std::max(farm.machines * farm.f.makespan_hours, 1e-9));
  // A lower bound of any schedule on this fleet: each class's own work over its machines.
  double bound = 0;
  std::string per_class;
  for (int c : {kN150, kP150, kN300}) {
    if (fleet.machines[c] == 0) continue;
    const double h = farm.class_s[c] / 3600 / fleet.machines[c];
    bound = std::max(bound, h);
    per_class += Fmt("%s%s %.1f h", per_class.empty() ? "" : ", ", kHwName[c], h);
  }
  s +=
      Fmt("farm bound: each class's work over its machines (%s): no schedule on this fleet ends "
          "before %.1f h, %.1fx shorter than the one host\n",
          per_class.c_str(), bound, r.one_host.makespan_hours / std::max(bound, 1e-9));
  if (r.farm.makespan_hours < bound * 0.999) {
    s += Fmt("farm bound: not a lower bound: the farm ended at %.2f h, before %.2f h\n",
             r.farm.makespan_hours, bound);
  }
  s += Fmt("calibration: one-host makespan %.1f h; the public run took %.0f active hours\n",
           r.one_host.makespan_hours, kPublicActiveHours);
  s +=
      Fmt("remediation: agent-hours one-per-test %.1f, farm %.1f (%.1fx fewer); makespan one host "
          "%.1f h, farm %s %.1f h (%.1fx shorter)\n",
          r.one_host.agent_hours, r.farm.agent_hours,
          r.one_host.agent_hours / std::max(r.farm.agent_hours, 1e-9), r.one_host.makespan_hours,
          fleet.label.c_str(), r.farm.makespan_hours,
          r.one_host.makespan_hours / std::max(r.farm.makespan_hours, 1e-9));
  return r;
}

}  // namespace triage::fleetsim::remediation
