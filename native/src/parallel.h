// Row-parallel loops for the CPU kernels.
//
// Rows are split into num_threads contiguous blocks; each row is computed by the same code whatever
// the split, so results are bitwise identical for every thread count. Threads are started per call
// (tens of microseconds) and only when the work is large enough to pay for them; calls from many
// Java threads at once are therefore independent and need no shared pool or lock.
#ifndef ARBOR_PARALLEL_H
#define ARBOR_PARALLEL_H

#include <stdint.h>

#include <exception>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

// The handlers that end every CPU entry point's `try` block: no exception crosses the C ABI. An allocation
// failure (std::bad_alloc, from the entry's own scratch or rethrown by parallel_for from a worker) is
// ARBOR_ERR_ALLOC; anything else (say std::length_error for a size no vector can hold) ARBOR_ERR_ARG.
#define ARBOR_CATCH_ALL                                  \
    catch (const std::bad_alloc&) {                      \
        return ARBOR_ERR_ALLOC;                          \
    }                                                    \
    catch (...) {                                        \
        return ARBOR_ERR_ARG;                            \
    }

namespace arbor {

static inline int resolve_threads(int num_threads) {
    if (num_threads > 0) return num_threads;
    unsigned hw = std::thread::hardware_concurrency();
    return hw == 0 ? 1 : (int)hw;
}

// Calls fn(begin, end) over [0, n) split into at most num_threads blocks. `work_per_item` is a rough
// element count per item, used to avoid starting threads for tiny problems. An exception thrown by fn (say
// std::bad_alloc for a block's scratch) is caught in its thread and rethrown here once every block has
// finished — never left to end the process (an exception escaping a std::thread, or a joinable thread
// destroyed while one unwinds, calls std::terminate) — so the kernels' extern "C" wrappers turn it into an
// error code.
template <class Fn>
void parallel_for(int64_t n, int num_threads, int64_t work_per_item, Fn&& fn) {
    int t = resolve_threads(num_threads);
    const int64_t min_work_per_thread = 1 << 15;
    int64_t total = n * (work_per_item > 0 ? work_per_item : 1);
    if (total / min_work_per_thread < t) t = (int)(total / min_work_per_thread);
    if (t > n) t = (int)n;
    if (t <= 1) { fn((int64_t)0, n); return; }
    std::exception_ptr error;
    std::mutex error_mu;
    auto guarded = [&](int64_t b, int64_t e) {
        try {
            fn(b, e);
        } catch (...) {
            std::lock_guard<std::mutex> lock(error_mu);
            if (!error) error = std::current_exception();
        }
    };
    std::vector<std::thread> workers;
    int64_t chunk = (n + t - 1) / t;
    try {
        workers.reserve(t - 1);
    } catch (...) {  // no room for the thread handles: one thread
        fn((int64_t)0, n);
        return;
    }
    for (int i = 1; i < t; ++i) {
        int64_t b = i * chunk, e = b + chunk < n ? b + chunk : n;
        if (b >= e) break;
        try {
            workers.emplace_back([&guarded, b, e] { guarded(b, e); });
        } catch (...) {  // cannot start another thread (limits): do the remaining blocks here
            guarded(b, n);
            break;
        }
    }
    guarded((int64_t)0, chunk < n ? chunk : n);
    for (auto& w : workers) w.join();
    if (error) std::rethrow_exception(error);
}

}  // namespace arbor

#endif
