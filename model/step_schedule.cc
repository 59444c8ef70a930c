// The recorded schedule's names (model/step_schedule.h).
#include "model/step_schedule.h"

namespace spmdsim {

std::string_view StepStreamName(StepEvent::Stream stream) {
  switch (stream) {
    case StepEvent::Stream::kCompute:
      return "compute";
    case StepEvent::Stream::kCollectives0:
      return "collectives 0";
    case StepEvent::Stream::kCollectives1:
      return "collectives 1";
    case StepEvent::Stream::kSends:
      return "sends";
  }
  return "?";
}

std::string_view StepEventKindName(StepEvent::Kind kind) {
  switch (kind) {
    case StepEvent::Kind::kCompute:
      return "compute";
    case StepEvent::Kind::kCommunication:
      return "communication";
    case StepEvent::Kind::kExposed:
      return "exposed";
    case StepEvent::Kind::kBubble:
      return "bubble";
    case StepEvent::Kind::kHostWait:
      return "host wait";
  }
  return "?";
}

}  // namespace spmdsim
