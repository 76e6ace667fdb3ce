// What the runtime's tests share to reach lavapipe: the Vulkan backend on
// the lavapipe device (the Mesa shader cache off, so tests write nothing to
// $HOME), and compute shaders compiled at test time from GLSL with
// glslangValidator, for testing the backend and the Session apart from our
// own code generator.
#pragma once

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "ir/io.h"
#include "runtime/backends/vulkan.h"

namespace poot::testing {

inline std::unique_ptr<rt::Backend> lavapipe() {
  setenv("MESA_SHADER_CACHE_DISABLE", "true", 1);
  auto b = rt::createVulkanBackend({"lavapipe"});
  REQUIRE_MESSAGE(bool(b), (b ? "" : b.error().str()));
  return b.take();
}

// A compute shader compiled from GLSL for Vulkan 1.2, entry "main".
inline std::vector<uint8_t> glsl(const std::string& source) {
  static int count = 0;
  auto dir = std::filesystem::temp_directory_path() / ("poot-glsl-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::string stem = (dir / std::to_string(count++)).string();
  REQUIRE(bool(writeFileAtomic(stem + ".comp", source)));
  std::string cmd = "glslangValidator -V --target-env vulkan1.2 -S comp -o " + stem + ".spv " + stem + ".comp >" +
                    stem + ".log 2>&1";
  REQUIRE_MESSAGE(std::system(cmd.c_str()) == 0, *readFile(stem + ".log"));
  auto spv = readFile(stem + ".spv");
  REQUIRE(bool(spv));
  std::filesystem::remove_all(dir);
  return std::vector<uint8_t>(spv->begin(), spv->end());
}

}  // namespace poot::testing
