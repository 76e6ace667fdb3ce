// The .pg text form of a graph: parser and printer. docs/graph-format.md is the
// specification. Printing is canonical, so print(parse(t)) == t for any t that
// print produced. The parser checks the grammar, names and attribute syntax;
// the verifier (graph.h) checks the rules of the IR.
#pragma once

#include <string>
#include <string_view>

#include "ir/diag.h"
#include "ir/graph.h"

namespace poot {

// `file` is used in diagnostics only.
Expected<Graph> parseGraph(std::string_view text, const std::string& file);
std::string printGraph(const Graph& g);

// An attribute value as the text form prints it: 3, 0.125, true, dense,
// [0, 2, 1, 3].
std::string formatAttr(const AttrValue& v);

// Number formatting shared with other printers: the shortest text that reads
// back as the same double ("0.125", "3", "-inf", "nan", "1e-05").
std::string formatNumber(double v);

}  // namespace poot
