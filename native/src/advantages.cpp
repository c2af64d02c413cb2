// Advantages and token-level shaping (ALGORITHMS.md §3) — CPU kernels (issue #4).
#include "arbor/arbor.h"
