/* tp_digest.c — SHA-256 over OpenSSL's EVP interface (tp_digest.h), or GLib's GChecksum where
 * libcrypto cannot start a digest (out of memory, a provider that refuses SHA-256): the same digest,
 * slower.  Nothing here ends the process. */
#include "tp_digest.h"

#include <openssl/evp.h>
#include <string.h>

struct TpSha256 {
  EVP_MD_CTX *ctx;  /* NULL: glib's */
  GChecksum *glib;
  gboolean failed;  /* libcrypto failed after it started: the digest is unknown */
};

TpSha256 *tp_sha256_new(void)
{
  TpSha256 *h = g_new0(TpSha256, 1);
  h->ctx = EVP_MD_CTX_new();
  if (h->ctx && EVP_DigestInit_ex(h->ctx, EVP_sha256(), NULL) == 1)
    return h;
  EVP_MD_CTX_free(h->ctx);
  h->ctx = NULL;
  h->glib = g_checksum_new(G_CHECKSUM_SHA256);
  return h;
}

void tp_sha256_update(TpSha256 *h, const void *data, size_t len)
{
  if (!h->ctx) {
    for (size_t off = 0; off < len; off += G_MAXSSIZE)
      g_checksum_update(h->glib, (const guchar *)data + off, (gssize)MIN(len - off, (size_t)G_MAXSSIZE));
  } else if (len > 0 && EVP_DigestUpdate(h->ctx, data, len) != 1)
    h->failed = TRUE;
}

/* The digest into out; FALSE where libcrypto failed after it started (out then all zeros). */
static gboolean finish(TpSha256 *h, uint8_t out[TP_SHA256_BYTES])
{
  unsigned int n = 0;
  gsize len = TP_SHA256_BYTES;
  gboolean ok = !h->failed;
  if (h->glib)
    g_checksum_get_digest(h->glib, out, &len), g_checksum_free(h->glib);
  else {
    ok = ok && EVP_DigestFinal_ex(h->ctx, out, &n) == 1 && n == TP_SHA256_BYTES;
    EVP_MD_CTX_free(h->ctx);
  }
  if (!ok)
    memset(out, 0, TP_SHA256_BYTES);
  g_free(h);
  return ok;
}

gboolean tp_sha256_finish(TpSha256 *h, uint8_t out[TP_SHA256_BYTES]) { return finish(h, out); }

char *tp_sha256_finish_hex(TpSha256 *h)
{
  uint8_t d[TP_SHA256_BYTES];
  static gint failures;
  if (!finish(h, d)) /* no digest, not even another failed one, compares equal to it */
    return g_strdup_printf("unknown (libcrypto failed, %d)", g_atomic_int_add(&failures, 1) + 1);
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
