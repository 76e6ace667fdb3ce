// Plan signatures: who wrote a plan, not only that its bytes are whole.
// The plan's checksum catches accidental corruption, but anyone who edits a
// plan can recompute it; a signature can only be made with a secret key.
// Ed25519 through libsodium, detached: `pootc compile --sign NAME.key`
// writes PLAN.sig beside PLAN (the plan's bytes are those of an unsigned
// compile), and a loader given trusted public keys (`--trust NAME.pub`)
// refuses a plan without a .sig, signed by a key it was not given, or whose
// bytes changed after signing, before it parses anything in the plan.
// docs/plan-file.md states what each guarantees and what neither does.
//
// Files (text, one header line and one line of hex):
//   NAME.pub   `poot-ed25519-public-key ID` and the 32-byte key
//   NAME.key   `poot-ed25519-secret-key ID` and libsodium's 64-byte secret
//              key (seed, then the public key); written mode 0600
//   PLAN.sig   `poot-plan-signature ID` and the 64-byte signature
// ID: 16 hex digits, the first 8 bytes of BLAKE2b-256 of the public key,
// so a .sig names the key that made it. What is signed: the bytes
// "poot-plan-signature-v1", a zero byte, then BLAKE2b-512 of the plan file.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "ir/diag.h"

namespace poot::rt {

struct PublicKey {
  std::array<unsigned char, 32> bytes{};
  std::string id;    // 16 hex digits
  std::string file;  // where it was read, for messages
};
using TrustedKeys = std::vector<PublicKey>;

// PLAN.sig for a plan at `planPath`.
inline std::string signaturePath(const std::string& planPath) { return planPath + ".sig"; }

// A public key file; a Format error naming the file and line when it is
// not one.
Expected<PublicKey> loadPublicKey(const std::string& path);

// Each file's public key, in order (the first error stops).
Expected<TrustedKeys> loadTrustedKeys(const std::vector<std::string>& paths);

// A new key pair as NAME.key (mode 0600) and NAME.pub. Refuses (Io) when
// either exists: a key is never replaced. Returns the key's id.
Expected<std::string> writeKeyPair(const std::string& name);

// The .sig text for these plan bytes, signed with the secret key file.
Expected<std::string> signPlan(const std::string& planBytes, const std::string& keyPath);

// ok() when `sigPath` exists and holds a signature of `planBytes` by one
// of `trusted` (which is not empty); a Trust error otherwise (Format when
// the .sig is malformed). `planPath` names the plan in messages.
Status verifyPlan(const std::string& planBytes, const std::string& planPath, const std::string& sigPath,
                  const TrustedKeys& trusted);

}  // namespace poot::rt
