// libFuzzer target: any bytes given to the plan reader must give a verified
// plan or a typed error, never a crash. Each input is read twice: as it is
// (almost always stopped by the checksum), and with its checksum sealed
// again (plan/plan_file.h), so the mutations reach the FlatBuffers verifier,
// the embedded graph and the record-by-record checks behind the checksum.
#include <cstdint>
#include <string>

#include "plan/plan_file.h"
#include "runtime/plan_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  (void)poot::rt::readPlanFile(bytes, "fuzz.plan");
  if (poot::sealPlanChecksum(bytes)) (void)poot::rt::readPlanFile(bytes, "sealed.plan");
  return 0;
}
