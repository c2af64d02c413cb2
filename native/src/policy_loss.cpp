// Clipped policy-gradient losses (ALGORITHMS.md §2) — CPU kernels (issue #3).
#include "arbor/arbor.h"
