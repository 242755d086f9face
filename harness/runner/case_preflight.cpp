// Mistakes in what the user typed (a case line, a suite, --model), found once before any case
// runs: a model that is neither built in nor a folder, a pipeline its family does not run, a
// resolution the model has no input for. Each is one error (the run exits 2), not an ERROR
// outcome per case.
#include <map>

#include "compiled/faults.h"
#include "harness/core/format.h"
#include "harness/runner/case_runner.h"

namespace tp {
namespace {

// The first mistake of one kind, with how many cases share it.
struct Mistake {  // by its message
  std::string first_case;
  int cases = 0;
};

class Mistakes {
 public:
  void add(const std::string& message, const Case& c) {
    auto [it, fresh] = found_.try_emplace(message);
    if (fresh) {
      order_.push_back(message);
      it->second = Mistake{c.id(), 0};
    }
    ++it->second.cases;
  }
  Status status() const {
    if (order_.empty()) return Status();
    const std::string& message = order_.front();
    const Mistake& m = found_.at(message);
    const std::string where =
        m.cases == 1 ? "the case '" + m.first_case + "'"
                     : std::to_string(m.cases) + " cases, the first '" + m.first_case + "'";
    const std::string more =
        order_.size() > 1 ? " (and " + std::to_string(order_.size() - 1) + " more mistakes)" : "";
    return Error(message + " [" + where + "]" + more + "; nothing ran");
  }

 private:
  std::map<std::string, Mistake> found_;
  std::vector<std::string> order_;
};

// Every model a case names: its own, warm=, and the other models its pipeline's options name.
std::vector<std::pair<std::string, std::string>> named_models(const Case& c) {
  std::vector<std::pair<std::string, std::string>> names = {{"model", c.model}};
  if (!c.warm.empty()) names.emplace_back("warm", c.warm);
  if (const PipelineDescriptor* d = find_pipeline(c.pipeline))
    for (const OtherModel& other : d->models)
      if (std::string name = given_option(c.options, other.option); !name.empty())
        names.emplace_back(other.option, std::move(name));
  return names;
}

void check_resolutions(const Case& c, const Model& m, Mistakes& mistakes) {
  std::vector<std::pair<int64_t, int64_t>> sizes = c.stream;
  if (sizes.empty()) sizes.emplace_back(c.height, c.width);
  for (const auto& [h, w] : sizes)
    if (auto shape = m.family().input_shape(*m.config, c.pipeline, h, w, c.options); !shape.ok())
      mistakes.add(shape.error().message(), c);
}

}  // namespace

Status check_cases_before_running(const std::vector<const Case*>& cases, ModelCache& models) {
  Mistakes mistakes;
  for (const Case* c : cases) {
    bool models_ok = true;
    for (const auto& [key, name] : named_models(*c))
      if (auto m = models.get(name); !m.ok()) {
        mistakes.add(key + "=" + name + ": " + m.error().message(), *c);
        models_ok = false;
      }
    if (!models_ok) continue;
    const std::shared_ptr<const Model> model = *models.get(c->model);
    if (Status runs = check_family_runs(*model, c->pipeline); !runs.ok()) {
      mistakes.add("model=" + c->model + ": " + runs.error().message() +
                       "; leave such cases out (--filter) or name another model",
                   *c);
      continue;
    }
    check_resolutions(*c, *model, mistakes);
    if (auto faults = compiled::parse_faults(join_list(c->inject, ',')); !faults.ok())
      mistakes.add("inject=" + join_list(c->inject, '+') + ": " + faults.error().message(), *c);
  }
  return mistakes.status();
}

}  // namespace tp
