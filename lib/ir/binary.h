// The .pgb binary form of a graph (schemas/graph.fbs) and reading a graph file
// in either form. A file is binary when it carries the FlatBuffer identifier
// "PGRF"; anything else is read as text.
#pragma once

#include <string>

#include "ir/diag.h"
#include "ir/graph.h"

namespace poot {

// `file` is used in diagnostics; a binary graph has no lines, so its errors
// name the table and index ("eqn 3", "value 7") in the message instead.
Expected<Graph> readBinaryGraph(const std::string& bytes, const std::string& file);
std::string writeBinaryGraph(const Graph& g);

bool isBinaryGraph(const std::string& bytes);

// Reads, parses and verifies a graph file of either form.
Expected<Graph> loadGraph(const std::string& path);

}  // namespace poot
