/* mutate.c — the mutator of fuzz/run.sh's fallback engine (no libFuzzer needed): reads a seed,
 * applies a few random edits (byte flips, insertions, deletions, repeated ranges, tokens that
 * break parsers: huge and non-finite numbers, deep nesting, BOMs, NULs) and writes the result.
 * Usage: mutate SEED OUT NUMBER  (NUMBER seeds the random edits, so a run can be repeated). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_OUT (1 << 20)

static unsigned long long state;

static unsigned long long next(void)
{
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
}

static size_t pick(size_t n) { return n ? (size_t)(next() % n) : 0; }

static const char *const tokens[] = {
  "-1", "0", "-0", "1", "2147483647", "2147483648", "-2147483649", "4294967296", "9223372036854775807",
  "99999999999999999999999", "1e308", "1e309", "4.9e-324", "-1e308", "nan", "inf", "-inf", "0x10", "1e23",
  "0,5", " ", "\t", "\n", "\r\n", ",", ";", "=", "#", "[", "]", "{", "}", "\"", "\\", ":", "'", "\xef\xbb\xbf",
  "\xff\xfe", "\xc3\x28", "%s%n", "[stages]\n", "[links]\n", "[cluster]\n", "[device]\n", "null", "true", "[]",
  "{}", "\"workers\":", "\"ops\":", "input 2 32768 32768\n", "flatten\n", "conv 65535 3\n", "linear 2147483647\n",
};

int main(int argc, char **argv)
{
  if (argc != 4) {
    fprintf(stderr, "usage: mutate SEED OUT NUMBER\n");
    return 2;
  }
  state = strtoull(argv[3], NULL, 10) * 2654435761ULL + 88172645463325252ULL;
  static unsigned char buf[MAX_OUT], tmp[MAX_OUT];
  FILE *f = fopen(argv[1], "rb");
  if (!f) {
    perror(argv[1]);
    return 1;
  }
  size_t n = fread(buf, 1, MAX_OUT, f);
  fclose(f);
  int edits = 1 + (int)pick(6);
  for (int e = 0; e < edits; e++) {
    size_t at = pick(n + 1), len = 1 + pick(n < 64 ? n + 1 : 64);
    if (at + len > n)
      len = n - at;
    switch (pick(8)) {
    case 0: /* flip bits */
      if (n)
        buf[pick(n)] ^= (unsigned char)(1u << pick(8));
      break;
    case 1: /* random byte */
      if (n)
        buf[pick(n)] = (unsigned char)next();
      break;
    case 2: /* delete a range */
      memmove(buf + at, buf + at + len, n - at - len);
      n -= len;
      break;
    case 3: /* repeat a range many times */
    case 4: { /* insert a token */
      const unsigned char *src = buf + at;
      size_t slen = len, times = 1 + pick(pick(2) ? 4 : 2000);
      if (e % 2 || !len) {
        const char *t = tokens[pick(sizeof tokens / sizeof *tokens)];
        src = (const unsigned char *)t, slen = strlen(t), times = pick(8) ? 1 : times;
      }
      if (slen * times > MAX_OUT - n)
        times = (MAX_OUT - n) / (slen ? slen : 1);
      memcpy(tmp, src, slen);
      memmove(buf + at + slen * times, buf + at, n - at);
      for (size_t k = 0; k < times; k++)
        memcpy(buf + at + k * slen, tmp, slen);
      n += slen * times;
      break;
    }
    case 5: /* replace a number's digits */
      for (size_t k = at; k < n; k++)
        if (buf[k] >= '0' && buf[k] <= '9') {
          const char *t = tokens[pick(20)];
          size_t tl = strlen(t), end = k;
          while (end < n && buf[end] >= '0' && buf[end] <= '9')
            end++;
          if (n - (end - k) + tl <= MAX_OUT) {
            memmove(buf + k + tl, buf + end, n - end);
            memcpy(buf + k, t, tl);
            n = n - (end - k) + tl;
          }
          break;
        }
      break;
    case 6: /* truncate */
      n = at;
      break;
    default: { /* swap two bytes */
      if (n > 1) {
        size_t a = pick(n), b = pick(n);
        unsigned char c = buf[a];
        buf[a] = buf[b], buf[b] = c;
      }
      break;
    }
    }
  }
  f = fopen(argv[2], "wb");
  if (!f || fwrite(buf, 1, n, f) != n || fclose(f) != 0) {
    perror(argv[2]);
    return 1;
  }
  return 0;
}
