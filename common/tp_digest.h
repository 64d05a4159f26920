/* tp_digest.h — SHA-256 for every digest the project writes (schedules, checkpoints, weights, data),
 * by OpenSSL's libcrypto: it uses the CPU's SHA extensions where there are some (about 1.5 GB/s on
 * an AMD EPYC, six times GLib's GChecksum), so a digest of gigabytes of weights stays cheap;
 * GChecksum where libcrypto cannot start one. */
#ifndef TP_DIGEST_H
#define TP_DIGEST_H

#include <glib.h>
#include <stddef.h>
#include <stdint.h>

#define TP_SHA256_BYTES 32

typedef struct TpSha256 TpSha256;
TpSha256 *tp_sha256_new(void);
void tp_sha256_update(TpSha256 *h, const void *data, size_t len);
/* The digest of everything updated so far into out; frees h.  FALSE (out all zeros) where libcrypto
 * failed after it started, which its SHA-256 does not do on a started digest. */
gboolean tp_sha256_finish(TpSha256 *h, uint8_t out[TP_SHA256_BYTES]);
/* The same as lowercase hex (64 digits; where libcrypto failed, a text that no digest equals);
 * g_free the result. */
char *tp_sha256_finish_hex(TpSha256 *h);
/* The hex digest of len bytes at data. */
char *tp_sha256_hex(const void *data, size_t len);

#endif
