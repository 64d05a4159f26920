/* tp_outbox.h — buffers of outgoing messages lent to a transport (tp_transport_send_borrowed): a
 * stage takes a buffer, writes its activations or gradients into it, lends it with its send, and
 * the transport gives it back once the message is sent, so that no payload is copied.  The outbox
 * is shared by its owner and the buffers in flight: it is freed when the owner has let go and every
 * buffer is back (a transport may give one back after the run, or never if it failed). */
#ifndef TP_OUTBOX_H
#define TP_OUTBOX_H

#include "tp_transport.h"

#include <glib.h>

typedef struct TpOutbox TpOutbox;

/* An outbox of buffers of n floats each (made as needed, then reused). */
TpOutbox *tp_outbox_new(size_t n);
/* A free buffer (a new one when every buffer is lent; NULL and err when it cannot be allocated). */
float *tp_outbox_take(TpOutbox *o, GError **err);
/* Send len bytes of buf (taken from o) through t, lent until the transport gives it back. */
gboolean tp_outbox_send(TpOutbox *o, float *buf, TpTransport *t, int from, int to, const TpTag *tag, size_t len,
                        GError **err);
/* Bytes of the messages lent to transports and not yet given back (a transport that copies gives
 * each back before its send returns). */
gint64 tp_outbox_lent(TpOutbox *o);
/* A buffer taken but not sent, back to o. */
void tp_outbox_give(TpOutbox *o, float *buf);
/* The owner lets go (the outbox lives on until its lent buffers are back). */
void tp_outbox_release(TpOutbox *o);

#endif
