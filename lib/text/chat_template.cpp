// ChatTemplate over the Jinja subset (jinja_*.cpp): the Failures those
// throw become TextError values here, at the only boundary they cross.
#include "text/chat_template.h"

#include <nlohmann/json.hpp>

#include "text/jinja_ast.h"
#include "text/jinja_eval.h"

namespace poot::text {

struct ChatTemplate::Parsed {
  jinja::Body body;
};

TextResult<ChatTemplate> ChatTemplate::parse(const std::string& source) {
  try {
    ChatTemplate t;
    t.parsed_ = std::make_shared<const Parsed>(Parsed{jinja::parse(source)});
    return t;
  } catch (const jinja::Failure& f) {
    return f.error;
  }
}

TextResult<std::string> ChatTemplate::render(std::string_view variablesJson, const RenderLimits& limits) const {
  if (!parsed_) return TextError{TextErrorKind::Template, "no template to render"};
  try {
    auto vars = nlohmann::ordered_json::parse(variablesJson);
    if (!vars.is_object()) return TextError{TextErrorKind::BadInput, "the template's variables are not a JSON object"};
    jinja::Dict values;
    for (const auto& [name, v] : vars.items()) values.emplace_back(name, jinja::fromJson(v));
    return jinja::Renderer(limits, std::move(values)).render(parsed_->body);
  } catch (const jinja::Failure& f) {
    return f.error;
  } catch (const nlohmann::json::exception& e) {
    return TextError{TextErrorKind::BadInput, std::string("the template's variables are not JSON: ") + e.what()};
  }
}

}  // namespace poot::text
