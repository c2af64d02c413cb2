// arbor_exit_skip_destructors (arbor.h): exit() ends the process with _exit before the destructors of
// the globals of the libraries loaded earlier run under threads still inside those libraries.
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#if defined(__GLIBC__)
static void arbor_exit_now(int status, void*) {
    // Unlocked, as exit() itself flushes: a thread still running may hold a stream's lock.
    fflush_unlocked(stdout);
    fflush_unlocked(stderr);
    _exit(status);
}
#endif

extern "C" int arbor_exit_skip_destructors(void) {
#if defined(__GLIBC__)
    return on_exit(arbor_exit_now, nullptr) == 0 ? ARBOR_OK : ARBOR_ERR_ARG;
#else
    return ARBOR_ERR_UNSUPPORTED;
#endif
}
