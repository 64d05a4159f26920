/* tp_backend_ref.h — the naive double-precision reference backend of tests/test-backend
 * (test-backend-ref.c): sgemm, linear and conv of its own, the other members cpu's; host memory. */
#ifndef TP_BACKEND_REF_H
#define TP_BACKEND_REF_H

#include "tp_backend.h"

const TpBackend *test_backend_reference(void);

#endif
