#include "http/tls.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>

#include <boost/asio/ssl/context.hpp>
#include <memory>
#include <string_view>

namespace cairn::http {
namespace {

namespace ssl = boost::asio::ssl;

// TLS 1.2's forward-secret AEAD suites (Mozilla's "intermediate" list without finite-field DHE); TLS 1.3
// keeps OpenSSL's suites, all AEAD.
constexpr const char* kTls12Ciphers =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"
    "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305";

// OpenSSL's queued errors as one line (and the queue emptied), for the message of a failed load.
std::string OpenSslErrors() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    out += (out.empty() ? "" : "; ") + std::string(buf);
  }
  return out.empty() ? "unknown error" : out;
}

// ALPN: "http/1.1" when the client offers it; otherwise no protocol is chosen (the client may still speak
// HTTP/1.1 or give up), never one the server does not speak.
int SelectAlpn(SSL* /*ssl*/, const unsigned char** out, unsigned char* out_len, const unsigned char* in,
               unsigned int in_len, void* /*arg*/) {
  static constexpr std::string_view kHttp11 = "http/1.1";
  for (unsigned int i = 0; i < in_len;) {
    const unsigned int n = in[i];
    if (i + 1 + n > in_len) break;
    if (std::string_view(reinterpret_cast<const char*>(in + i + 1), n) == kHttp11) {
      *out = in + i + 1;
      *out_len = static_cast<unsigned char>(n);
      return SSL_TLSEXT_ERR_OK;
    }
    i += 1 + n;
  }
  return SSL_TLSEXT_ERR_NOACK;
}

int NoPassword(char* /*buf*/, int /*size*/, int /*rwflag*/, void* /*userdata*/) {
  return 0;
}

}  // namespace

Result<std::shared_ptr<ssl::context>> LoadTlsContext(const TlsFiles& files) {
  ERR_clear_error();
  auto ctx = std::make_shared<ssl::context>(ssl::context::tls_server);
  SSL_CTX* native = ctx->native_handle();
  SSL_CTX_set_default_passwd_cb(native, NoPassword);
  const auto fail = [](const std::string& what) -> Error {
    return IoError("TLS: " + what + ": " + OpenSslErrors());
  };
  if (SSL_CTX_set_min_proto_version(native, TLS1_2_VERSION) != 1) return fail("cannot require TLS 1.2");
  SSL_CTX_set_options(native,
                      SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
  if (SSL_CTX_set_cipher_list(native, kTls12Ciphers) != 1) return fail("cannot set the TLS 1.2 ciphers");
  SSL_CTX_set_alpn_select_cb(native, SelectAlpn, nullptr);
  if (SSL_CTX_use_certificate_chain_file(native, files.cert_chain.c_str()) != 1)
    return fail("cannot load the certificate chain " + files.cert_chain);
  // Read apart from the context, so that a key that does not parse and one that belongs to another
  // certificate get different messages. An encrypted key is refused rather than prompted for.
  std::unique_ptr<BIO, decltype(&BIO_free)> bio(BIO_new_file(files.private_key.c_str(), "r"), BIO_free);
  if (!bio) return fail("cannot read the private key " + files.private_key);
  std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)> key(
      PEM_read_bio_PrivateKey(bio.get(), nullptr, NoPassword, nullptr), EVP_PKEY_free);
  if (!key) return fail("cannot load the private key " + files.private_key + " (PEM, unencrypted)");
  if (SSL_CTX_use_PrivateKey(native, key.get()) != 1 || SSL_CTX_check_private_key(native) != 1)
    return fail("the private key " + files.private_key + " does not match the certificate " +
                files.cert_chain);
  return ctx;
}

Status TlsContextHolder::Reload() {
  auto ctx = LoadTlsContext(files_);
  if (!ctx) return ctx.error();
  std::lock_guard lock(mu_);
  current_ = std::move(*ctx);
  return Ok{};
}

std::shared_ptr<ssl::context> TlsContextHolder::Current() const {
  std::lock_guard lock(mu_);
  return current_;
}

}  // namespace cairn::http
