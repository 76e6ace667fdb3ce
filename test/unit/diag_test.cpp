// Unit tests of a diagnostic's two printed forms (lib/ir/diag.h): the text
// line with a refusal's check in brackets, and the JSON line: its fields in
// their order, the figures as an object, and strings escaped (quotes,
// backslashes, control characters; invalid UTF-8 replaced, valid UTF-8 kept).
#include <doctest/doctest.h>

#include <string>

#include "ir/diag.h"

using namespace poot;

TEST_CASE("diag: a refusal's text names its check, its JSON every field and figure") {
  Error e = makeError(ErrorKind::Capability, Loc{"g.pg", 16, 8}, "attention needs 2056 bytes");
  e.capability = "AttentionLds";
  e.figures = {{"lane_bytes", int64_t(2056)}, {"op", "Attention"}};
  CHECK(e.str() == "g.pg:16:8: error: attention needs 2056 bytes [AttentionLds]");
  CHECK(e.json() == R"({"file":"g.pg","line":16,"column":8,"item":"","severity":"error","kind":"AttentionLds",)"
                    R"("message":"attention needs 2056 bytes","figures":{"lane_bytes":2056,"op":"Attention"}})");

  // Without a check the kind is the ErrorKind's name, and the text has no brackets.
  Error w = makeError(ErrorKind::Format, Loc{"g.pgb", 0, 0, "eqn 3"}, "bad record");
  w.severity = Severity::Warning;
  CHECK(w.str() == "g.pgb:eqn 3: warning: bad record");
  CHECK(w.json() == R"({"file":"g.pgb","line":0,"column":0,"item":"eqn 3","severity":"warning","kind":"Format",)"
                    R"("message":"bad record","figures":{}})");
  CHECK(kindName(ErrorKind::Memory) == std::string("Memory"));
  CHECK(severityName(Severity::Note) == std::string("note"));
}

TEST_CASE("diag: JSON escapes what a message or file name may hold") {
  Error e = makeError(ErrorKind::Syntax, Loc{"dir \"a\"\\b.pg", 1, 2},
                      std::string("got '\t\n\x01' then \xc3\xa9 and \xff\xfe"));
  // é is kept; the two bytes that are no UTF-8 become U+FFFD each.
  CHECK(e.json() == R"({"file":"dir \"a\"\\b.pg","line":1,"column":2,"item":"","severity":"error","kind":"Syntax",)"
                    R"("message":"got '\t\n\u0001' then )" "\xc3\xa9" R"( and )" "\xef\xbf\xbd\xef\xbf\xbd"
                    R"(","figures":{}})");
  // One line, whatever the message held.
  CHECK(e.json().find('\n') == std::string::npos);
}
