#include "reports/result.h"

namespace tp {

const char* outcome_name(Outcome o) {
  switch (o) {
    case Outcome::kPassed:
      return "PASSED";
    case Outcome::kFailed:
      return "FAILED";
    case Outcome::kMistrusted:
      return "MISTRUSTED";
    case Outcome::kSkipped:
      return "SKIPPED";
    case Outcome::kUnsupported:
      return "UNSUPPORTED";
    case Outcome::kError:
      return "ERROR";
  }
  return "?";
}

bool parse_outcome(const std::string& name, Outcome& out) {
  for (Outcome o : {Outcome::kPassed, Outcome::kFailed, Outcome::kMistrusted, Outcome::kSkipped,
                    Outcome::kUnsupported, Outcome::kError})
    if (name == outcome_name(o)) {
      out = o;
      return true;
    }
  return false;
}

}  // namespace tp
