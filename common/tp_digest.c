/* tp_digest.c — SHA-256 over OpenSSL's EVP interface (tp_digest.h). */
#include "tp_digest.h"

#include <openssl/evp.h>

struct TpSha256 {
  EVP_MD_CTX *ctx;
};

TpSha256 *tp_sha256_new(void)
{
  TpSha256 *h = g_new(TpSha256, 1);
  h->ctx = EVP_MD_CTX_new();
  if (!h->ctx || EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL) != 1)
    g_error("libcrypto cannot start a SHA-256 digest"); /* out of memory: as g_new would */
  return h;
}

void tp_sha256_update(TpSha256 *h, const void *data, size_t len)
{
  if (len > 0 && EVP_DigestUpdate(h->ctx, data, len) != 1)
    g_error("libcrypto failed a SHA-256 update");
}

void tp_sha256_finish(TpSha256 *h, uint8_t out[TP_SHA256_BYTES])
{
  unsigned int n = 0;
  if (EVP_DigestFinal_ex(h->ctx, out, &n) != 1 || n != TP_SHA256_BYTES)
    g_error("libcrypto failed to finish a SHA-256 digest");
  EVP_MD_CTX_free(h->ctx);
  g_free(h);
}

char *tp_sha256_finish_hex(TpSha256 *h)
{
  uint8_t d[TP_SHA256_BYTES];
  tp_sha256_finish(h, d);
  static const char hex[] = "0123456789abcdef";
  char *s = g_malloc(2 * TP_SHA256_BYTES + 1);
  for (int i = 0; i < TP_SHA256_BYTES; i++)
    s[2 * i] = hex[d[i] >> 4], s[2 * i + 1] = hex[d[i] & 15];
  s[2 * TP_SHA256_BYTES] = '\0';
  return s;
}

char *tp_sha256_hex(const void *data, size_t len)
{
  TpSha256 *h = tp_sha256_new();
  tp_sha256_update(h, data, len);
  return tp_sha256_finish_hex(h);
}
