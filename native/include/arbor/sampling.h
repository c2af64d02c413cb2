/* Sampling: fused sample + logprob + entropy — issue #7. Included by arbor/arbor.h. */
#ifndef ARBOR_SAMPLING_H
#define ARBOR_SAMPLING_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifdef __cplusplus
}
#endif

#endif
