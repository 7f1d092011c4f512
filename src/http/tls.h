// TLS for the HTTP server: a server context built from a PEM certificate chain and private key, with modern
// defaults only, and a holder that swaps in a reloaded context while open connections keep theirs.
//
// Defaults: TLS 1.2 and 1.3 only; for TLS 1.2 only ECDHE key exchange with AEAD ciphers (AES-GCM,
// ChaCha20-Poly1305), i.e. forward secrecy and no CBC, RC4, 3DES or static RSA; TLS 1.3's own suites; no
// compression, no renegotiation; ALPN answers "http/1.1" (the server speaks nothing else).
//
// Reload: TlsContextHolder::Reload reads the files again and, only if they make a valid context (the key
// matches the certificate), makes it the one new connections get; a connection holds the context it
// started with (shared_ptr) until it closes, so nothing open is dropped. On failure the old context stays.
// Thread-safe: Current and Reload may be called from any thread.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "http/result.h"

namespace boost::asio::ssl {
class context;
}

namespace cairn::http {

struct TlsFiles {
  std::string cert_chain;   // PEM: the server's certificate first, then its intermediates
  std::string private_key;  // PEM, unencrypted
};

// A server context from `files`. Error 500 naming the file and OpenSSL's reason.
Result<std::shared_ptr<boost::asio::ssl::context>> LoadTlsContext(const TlsFiles& files);

class TlsContextHolder {
 public:
  explicit TlsContextHolder(TlsFiles files) : files_(std::move(files)) {}
  // Loads the files (the first time, or again); the new context is used only if it loads.
  Status Reload();
  // The context for a new connection; null before the first successful Reload.
  std::shared_ptr<boost::asio::ssl::context> Current() const;
  const TlsFiles& files() const { return files_; }

 private:
  const TlsFiles files_;
  mutable std::mutex mu_;
  std::shared_ptr<boost::asio::ssl::context> current_;  // guarded by mu_
};

}  // namespace cairn::http
