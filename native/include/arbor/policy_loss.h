/* Clipped policy-gradient losses (ALGORITHMS.md §2) — issue #3. Included by arbor/arbor.h. */
#ifndef ARBOR_POLICY_LOSS_H
#define ARBOR_POLICY_LOSS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif

#endif
