// Sampling: fused sample + logprob + entropy — CPU kernels (issue #7).
#include "arbor/arbor.h"
