// What poot probe writes (probe.cpp): a device's DeviceInfo as device
// profile text (docs/device-profile.md), each figure under a comment naming
// where the API that was asked reported it.
#pragma once

#include <string>

#include "runtime/backend.h"

namespace poot {

std::string profileText(const rt::DeviceInfo& d);

}  // namespace poot
