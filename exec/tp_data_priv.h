/* tp_data_priv.h — what tp_data.c and tp_data_text.c (token data) share. */
#ifndef TP_DATA_PRIV_H
#define TP_DATA_PRIV_H

#include "tp_data.h"

/* The sizes of "synthetic[:TRAIN[:TEST]]" (defaults 4096 and 1024); a bad one is one TP_ERROR_PARAM_DATA
 * line saying what was expected: `other` (the other --data form) and `unit` (what a size counts). */
gboolean tp_data_parse_synthetic(const char *spec, const char *other, const char *unit, int *ntrain, int *ntest,
                                 GError **err);
/* tp_data_open_shaped for a token model (shape->context > 0): text or synthetic tokens. */
gboolean tp_data_open_text(const char *spec, const TpDataShape *shape, guint32 seed, TpDataset **train,
                           TpDataset **test, GError **err);

#endif
