/* Advantages and token-level shaping (ALGORITHMS.md §3) — issue #4. Included by arbor/arbor.h. */
#ifndef ARBOR_ADVANTAGES_H
#define ARBOR_ADVANTAGES_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif

#endif
