// Plan signatures (signature.h): Ed25519 and BLAKE2b from libsodium, key
// and signature files as text.
#include "runtime/signature.h"

#include <fcntl.h>
#include <sodium.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <mutex>

#include "ir/io.h"

namespace poot::rt {
namespace {

constexpr const char* kPublicHeader = "poot-ed25519-public-key";
constexpr const char* kSecretHeader = "poot-ed25519-secret-key";
constexpr const char* kSignatureHeader = "poot-plan-signature";
constexpr char kDomain[] = "poot-plan-signature-v1";  // and its terminating zero byte
constexpr size_t kMaxFileBytes = 4096;                // every file here is far smaller

Status sodiumReady() {
  static int status = 0;
  static std::once_flag once;
  std::call_once(once, [] { status = sodium_init(); });
  if (status < 0) return makeError(ErrorKind::Capability, {}, "libsodium could not be initialized");
  return ok();
}

std::string toHex(const unsigned char* p, size_t n) {
  std::string out(2 * n + 1, '\0');
  sodium_bin2hex(out.data(), out.size(), p, n);
  out.pop_back();
  return out;
}

std::string keyId(const unsigned char* pk) {
  unsigned char h[32];
  crypto_generichash(h, sizeof h, pk, crypto_sign_PUBLICKEYBYTES, nullptr, 0);
  return toHex(h, 8);
}

// A key or signature file: a regular file of at most kMaxFileBytes whose
// first line is `HEADER ID` (ID 16 hex digits) and whose second line is
// exactly 2 * n hex digits; the bytes go to `out`, the id is returned.
Expected<std::string> readTwoLines(const std::string& path, const char* header, unsigned char* out, size_t n) {
  std::error_code ec;
  auto st = std::filesystem::status(path, ec);
  if (std::filesystem::exists(st) && !std::filesystem::is_regular_file(st))
    return makeError(ErrorKind::Io, {path}, "cannot read: not a regular file");
  if (std::filesystem::exists(st) && std::filesystem::file_size(path, ec) > kMaxFileBytes)
    return makeError(ErrorKind::Format, {path}, "is larger than any " + std::string(header) + " file");
  auto text = readFile(path);
  if (!text) return text.error();
  auto bad = [&](int line, std::string why) { return makeError(ErrorKind::Format, Loc{path, line}, std::move(why)); };
  size_t eol = text->find('\n');
  std::string first = text->substr(0, eol), rest = eol == std::string::npos ? "" : text->substr(eol + 1);
  std::string prefix = std::string(header) + " ";
  if (first.rfind(prefix, 0) != 0) return bad(1, "expected '" + std::string(header) + " ID' (is this the right file?)");
  std::string id = first.substr(prefix.size());
  if (id.size() != 16 || id.find_first_not_of("0123456789abcdef") != std::string::npos)
    return bad(1, "the key id '" + printable(id) + "' is not 16 lowercase hex digits");
  std::string hex = rest.substr(0, rest.find('\n'));
  if (rest.size() > hex.size() + 1) return bad(3, "unexpected text after the second line");
  size_t got = 0;
  if (hex.size() != 2 * n || sodium_hex2bin(out, n, hex.data(), hex.size(), nullptr, &got, nullptr) != 0 || got != n)
    return bad(2, "expected " + std::to_string(2 * n) + " hex digits");
  return id;
}

// What a signature covers: the domain, a zero byte, BLAKE2b-512 of the plan.
std::string message(const std::string& planBytes) {
  std::string m(kDomain, sizeof kDomain);
  unsigned char h[64];
  crypto_generichash(h, sizeof h, reinterpret_cast<const unsigned char*>(planBytes.data()), planBytes.size(), nullptr, 0);
  m.append(reinterpret_cast<const char*>(h), sizeof h);
  return m;
}

// Creates `path` with `bytes`, failing if it exists; mode 0600 or 0644.
Status createNew(const std::string& path, const std::string& bytes, mode_t mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
  if (fd < 0)
    return makeError(ErrorKind::Io, {path},
                     errno == EEXIST ? "already exists: a key is never replaced (choose another name, or remove it)"
                                     : "cannot create: " + std::string(std::strerror(errno)));
  bool good = ::write(fd, bytes.data(), bytes.size()) == ssize_t(bytes.size());
  good = (::close(fd) == 0) && good;
  if (!good) {
    ::unlink(path.c_str());
    return makeError(ErrorKind::Io, {path}, "cannot write the key");
  }
  return ok();
}

}  // namespace

Expected<PublicKey> loadPublicKey(const std::string& path) {
  if (auto s = sodiumReady(); !s) return s.error();
  PublicKey k;
  auto id = readTwoLines(path, kPublicHeader, k.bytes.data(), k.bytes.size());
  if (!id) return id.error();
  if (*id != keyId(k.bytes.data()))
    return makeError(ErrorKind::Format, Loc{path, 1}, "the key id " + *id + " is not this key's (" + keyId(k.bytes.data()) + ")");
  k.id = *id;
  k.file = path;
  return k;
}

Expected<TrustedKeys> loadTrustedKeys(const std::vector<std::string>& paths) {
  TrustedKeys keys;
  for (const std::string& p : paths) {
    auto k = loadPublicKey(p);
    if (!k) return k.error();
    keys.push_back(std::move(*k));
  }
  return keys;
}

Expected<std::string> writeKeyPair(const std::string& name) {
  if (auto s = sodiumReady(); !s) return s.error();
  unsigned char pk[crypto_sign_PUBLICKEYBYTES], sk[crypto_sign_SECRETKEYBYTES];
  crypto_sign_keypair(pk, sk);
  std::string id = keyId(pk);
  std::string secret = std::string(kSecretHeader) + " " + id + "\n" + toHex(sk, sizeof sk) + "\n";
  sodium_memzero(sk, sizeof sk);
  std::string keyPath = name + ".key", pubPath = name + ".pub";
  std::error_code ec;
  if (std::filesystem::exists(std::filesystem::symlink_status(pubPath, ec)))
    return makeError(ErrorKind::Io, {pubPath}, "already exists: a key is never replaced (choose another name, or remove it)");
  Status s = createNew(keyPath, secret, 0600);
  sodium_memzero(secret.data(), secret.size());
  if (!s) return s.error();
  if (Status p = createNew(pubPath, std::string(kPublicHeader) + " " + id + "\n" + toHex(pk, sizeof pk) + "\n", 0644); !p) {
    ::unlink(keyPath.c_str());
    return p.error();
  }
  return id;
}

Expected<std::string> signPlan(const std::string& planBytes, const std::string& keyPath) {
  if (auto s = sodiumReady(); !s) return s.error();
  unsigned char sk[crypto_sign_SECRETKEYBYTES];
  auto id = readTwoLines(keyPath, kSecretHeader, sk, sizeof sk);
  if (!id) return id.error();
  if (*id != keyId(sk + crypto_sign_SEEDBYTES)) {
    sodium_memzero(sk, sizeof sk);
    return makeError(ErrorKind::Format, Loc{keyPath, 1}, "the key id " + *id + " is not this key's");
  }
  std::string m = message(planBytes);
  unsigned char sig[crypto_sign_BYTES];
  crypto_sign_detached(sig, nullptr, reinterpret_cast<const unsigned char*>(m.data()), m.size(), sk);
  sodium_memzero(sk, sizeof sk);
  return std::string(kSignatureHeader) + " " + *id + "\n" + toHex(sig, sizeof sig) + "\n";
}

Status verifyPlan(const std::string& planBytes, const std::string& planPath, const std::string& sigPath,
                  const TrustedKeys& trusted) {
  if (auto s = sodiumReady(); !s) return s;
  std::error_code ec;
  if (!std::filesystem::exists(sigPath, ec))
    return makeError(ErrorKind::Trust, {planPath}, "not signed (no " + sigPath + "), and only plans signed by a trusted key are accepted");
  unsigned char sig[crypto_sign_BYTES];
  auto id = readTwoLines(sigPath, kSignatureHeader, sig, sizeof sig);
  if (!id) return id.error();
  std::string names;
  for (const PublicKey& k : trusted) {
    names += (names.empty() ? "" : ", ") + k.file + ": " + k.id;
    if (k.id != *id) continue;
    std::string m = message(planBytes);
    if (crypto_sign_verify_detached(sig, reinterpret_cast<const unsigned char*>(m.data()), m.size(), k.bytes.data()) == 0)
      return ok();
    return makeError(ErrorKind::Trust, {planPath},
                     "does not match its signature " + sigPath + " by key " + *id + " (" + k.file +
                         "): the plan or the signature changed after signing");
  }
  return makeError(ErrorKind::Trust, {sigPath}, "signed by key " + *id + ", which is not among the trusted keys (" + names + ")");
}

}  // namespace poot::rt
