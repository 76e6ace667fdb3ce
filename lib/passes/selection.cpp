// selection: placeholder until the matcher lands; changes nothing.
#include "passes/pass.h"

namespace poot {

Expected<bool> runSelection(Graph&, PassContext&) { return false; }

}  // namespace poot
