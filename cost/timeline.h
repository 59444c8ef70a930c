// StepTimeline: the time of one step of many devices, each running its own op list on a compute stream and
// communication streams, with asynchronous collectives (start / wait, like XLA's async collectives and NCCL
// on a side stream) and point-to-point sends (pipeline activations).
//
// Every device's program is a list of TimelineOps, executed in order:
//   Compute(seconds)           the compute stream runs for `seconds` (slower while communication of the same
//                              device is in flight: see comm_slowdown below)
//   Start(handle, group, s)    a collective on a registered group, on one of the device's communication
//                              streams. It starts when every member has issued it and each member's stream is
//                              free (the latest of those), and lasts `s` (the same for every member). The k-th
//                              Start of a device on a group matches the k-th Start of every other member.
//   Wait(handle)               the compute stream waits until the collective started with `handle` ends.
//   Send(peer, tag, s)         a transfer of `s` seconds on the device's p2p stream, from when the compute stream
//                              issues it and the stream is free (eager: the receiver need not have posted yet).
//   Recv(peer, tag)            the compute stream waits until the matching Send (same sender, receiver, tag) has
//                              arrived.
// A synchronous collective is Start immediately followed by Wait.
//
// Reported per device: when it finished, how long its compute stream computed, how long it waited for
// collectives (exposed communication), how long collectives ran in total (so hidden = total - exposed, summed
// per category), and how long it waited for pipeline receives. Categories are the caller's labels (small
// integers) for the breakdown.
//
// Compute slowed by communication: communication kernels occupy part of the device (NCCL runs one CTA per
// channel on an SM). A compute op may carry its own durations with a collective in flight and with only sends
// in flight (`seconds_with_collective`, `seconds_with_p2p`: its waves recounted on the SMs left, the wave
// effect); it then progresses at seconds / that duration while such communication of the same device runs.
// An op without them progresses at (1 - comm_slowdown) of its speed (docs/model.md gives the sources).
//
// Host launch: an op may carry `host_seconds`, the time the host takes to launch it (eager PyTorch's dispatch
// and launch). The host issues a device's ops in program order and runs ahead of the device; an op starts no
// earlier than the host has launched it, and the compute stream's wait for the host is reported (host_wait).
//
// Example: two devices, each Compute(1 ms), Start(h, G, 2 ms), Compute(1 ms), Wait(h), Compute(1 ms), with
// comm_slowdown 0: the collective runs [1, 3] ms, the second compute [1, 2] ms, the wait 1 ms exposed, the
// device ends at 4 ms; exposed 1 ms, hidden 1 ms.
//
// Errors: programs that cannot finish (a Wait on a handle never started, a Recv without its Send, members
// issuing collectives in different orders) throw Error(kInvalidArgument) naming the first blocked devices and
// what they wait for. Thread safety: none (one thread builds and runs a StepTimeline); distinct timelines are
// independent.
#ifndef SPMDSIM_COST_TIMELINE_H_
#define SPMDSIM_COST_TIMELINE_H_

#include <cstdint>
#include <string>
#include <vector>

namespace spmdsim {

struct TimelineOp {
  enum class Kind : uint8_t { kCompute, kStart, kWait, kSend, kRecv };
  Kind kind = Kind::kCompute;
  uint8_t category = 0;  // the caller's label for the breakdown (< StepTimeline::kMaxCategories)
  uint8_t stream = 0;    // kStart: communication stream 0 or 1 of the device (sends use their own stream)
  int32_t group = -1;    // kStart: a group from AddGroup
  int64_t peer = -1;     // kSend / kRecv: the other device's position
  int64_t tag = 0;       // kStart / kWait: the device's handle; kSend / kRecv: the message tag
  double seconds = 0;    // kCompute, kStart, kSend
  // kCompute: its duration while a collective (resp. only sends) of the device is in flight; < 0: seconds /
  // (1 - comm_slowdown). REQUIRES >= seconds when set.
  double seconds_with_collective = -1;
  double seconds_with_p2p = -1;
  double host_seconds = 0;  // kCompute, kStart: the host's launch time (0: none)

  static TimelineOp Compute(double seconds, uint8_t category) {
    return {Kind::kCompute, category, 0, -1, -1, 0, seconds};
  }
  // A compute op with its durations under communication and its host launch time.
  static TimelineOp Compute(double seconds, uint8_t category, double with_collective, double with_p2p,
                            double host_seconds) {
    return {Kind::kCompute, category, 0, -1, -1, 0, seconds, with_collective, with_p2p, host_seconds};
  }
  static TimelineOp Start(int64_t handle, int32_t group, double seconds, uint8_t category, uint8_t stream = 0,
                          double host_seconds = 0) {
    return {Kind::kStart, category, stream, group, -1, handle, seconds, -1, -1, host_seconds};
  }
  static TimelineOp Wait(int64_t handle, uint8_t category) { return {Kind::kWait, category, 0, -1, -1, handle, 0}; }
  static TimelineOp Send(int64_t peer, int64_t tag, double seconds, uint8_t category) {
    return {Kind::kSend, category, 0, -1, peer, tag, seconds};
  }
  static TimelineOp Recv(int64_t peer, int64_t tag, uint8_t category) {
    return {Kind::kRecv, category, 0, -1, peer, tag, 0};
  }
};

// When one op ran, for a schedule (StepTimeline::Run's `intervals`): Compute its busy interval on the compute
// stream; Start the collective's interval on its communication stream; Send the transfer on the p2p stream; Wait
// and Recv the compute stream's wait (start == end when it did not wait). An op with a host launch time also has
// the compute stream's wait for the host before it was issued, [host_wait_start, host_wait_end] (equal: none).
// Seconds from the step's start.
struct OpInterval {
  double start = 0, end = 0;
  double host_wait_start = 0, host_wait_end = 0;
};

struct DeviceTimes {
  double end = 0;                 // the latest of its streams
  double compute = 0;             // compute stream busy (slowdown included)
  double exposed_comm = 0;        // compute stream waiting at Wait
  double comm = 0;                // collectives' durations (each counted once per member)
  double pipeline_wait = 0;       // compute stream waiting at Recv
  double host_wait = 0;           // compute stream waiting for the host to launch its next op
  std::vector<double> compute_by_category, exposed_by_category, comm_by_category;
};

class StepTimeline {
 public:
  static constexpr int kMaxCategories = 16;

  // REQUIRES: num_devices >= 1; 0 <= comm_slowdown < 1. Throws Error(kInvalidArgument) otherwise.
  StepTimeline(int64_t num_devices, double comm_slowdown);

  // Registers a group of distinct positions; returns its id. Throws Error(kInvalidArgument) for an empty group,
  // a repeated or out-of-range position.
  int32_t AddGroup(std::vector<int64_t> positions);

  // The device's program (replaces any earlier one). REQUIRES: 0 <= position < num_devices.
  void SetProgram(int64_t position, std::vector<TimelineOp> ops);
  std::vector<TimelineOp>& program(int64_t position);

  // Runs every program to its end; returns each device's times. Throws as in the file comment.
  // With `intervals`: also when each op ran, (*intervals)[device][op index] (OpInterval), for a trace.
  std::vector<DeviceTimes> Run(std::vector<std::vector<OpInterval>>* intervals = nullptr);

 private:
  std::vector<std::vector<int64_t>> groups_;
  std::vector<std::vector<TimelineOp>> programs_;
  double comm_slowdown_;
};

}  // namespace spmdsim

#endif  // SPMDSIM_COST_TIMELINE_H_
