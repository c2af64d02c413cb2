// Row-parallel loops for the CPU kernels.
//
// Rows are split into num_threads contiguous blocks; each row is computed by the same code whatever
// the split, so results are bitwise identical for every thread count. Threads are started per call
// (tens of microseconds) and only when the work is large enough to pay for them; calls from many
// Java threads at once are therefore independent and need no shared pool or lock.
#ifndef ARBOR_PARALLEL_H
#define ARBOR_PARALLEL_H

#include <stdint.h>
#include <thread>
#include <vector>

namespace arbor {

static inline int resolve_threads(int num_threads) {
    if (num_threads > 0) return num_threads;
    unsigned hw = std::thread::hardware_concurrency();
    return hw == 0 ? 1 : (int)hw;
}

// Calls fn(begin, end) over [0, n) split into at most num_threads blocks. `work_per_item` is a rough
// element count per item, used to avoid starting threads for tiny problems.
template <class Fn>
void parallel_for(int64_t n, int num_threads, int64_t work_per_item, Fn&& fn) {
    int t = resolve_threads(num_threads);
    const int64_t min_work_per_thread = 1 << 15;
    int64_t total = n * (work_per_item > 0 ? work_per_item : 1);
    if (total / min_work_per_thread < t) t = (int)(total / min_work_per_thread);
    if (t > n) t = (int)n;
    if (t <= 1) { fn((int64_t)0, n); return; }
    std::vector<std::thread> workers;
    workers.reserve(t - 1);
    int64_t chunk = (n + t - 1) / t;
    for (int i = 1; i < t; ++i) {
        int64_t b = i * chunk, e = b + chunk < n ? b + chunk : n;
        if (b >= e) break;
        try {
            workers.emplace_back([&fn, b, e] { fn(b, e); });
        } catch (...) {  // cannot start another thread (limits): do the remaining blocks here
            fn(b, n);
            break;
        }
    }
    fn((int64_t)0, chunk < n ? chunk : n);
    for (auto& w : workers) w.join();
}

}  // namespace arbor

#endif
