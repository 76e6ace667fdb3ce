// A model as one folder (`pootc package` writes it, `poot serve` and `poot
// generate` read it): the paged prefill and decode plans of one model for
// one device, the model's config, tokenizer and generation config as
// published, and manifest.json saying what is there (docs/runtime.md, 'A
// model as one folder'):
//   {"format": "poot-package", "version": 1, "poot": "0.1.0", "plan_format": 2,
//    "profile": {"name": "lavapipe", "target": "spirv"},
//    "config": {"file": "config.json", "fnv1a64": "..."},
//    "plans": {"prefill": {"file": "prefill.plan", "batch": 2, "tokens": 16, "capacity": 256, "pool_slots": 1024},
//              "decode": {"file": "decode.plan", "batch": 4, "tokens": 1, "capacity": 256, "pool_slots": 1024}},
//    "files": ["config.json", "tokenizer.json", ...]}
// "files" lists every file of the folder but the manifest, plans included.
#pragma once

namespace poot::package {

inline constexpr const char* kManifest = "manifest.json";
inline constexpr const char* kFormat = "poot-package";
inline constexpr int kVersion = 1;
inline constexpr const char* kConfig = "config.json";
inline constexpr const char* kPrefillPlan = "prefill.plan";
inline constexpr const char* kDecodePlan = "decode.plan";
inline constexpr const char* kMixedPlan = "mixed.plan";
// Copied from the model's directory when there, in this order.
inline constexpr const char* kModelFiles[] = {"generation_config.json", "tokenizer.json", "tokenizer_config.json"};

}  // namespace poot::package
