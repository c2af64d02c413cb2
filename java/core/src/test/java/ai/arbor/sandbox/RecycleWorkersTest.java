package ai.arbor.sandbox;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.function.Supplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * {@code recycleWorkers(true)}: a closed session's worker is reset in place and reused when — and only
 * when — nothing of the previous session can outlive the reset; otherwise it is replaced as usual.
 */
class RecycleWorkersTest {
    PythonSandbox sandbox;

    @BeforeEach
    void start() {
        sandbox = SandboxTests.builder().workers(1).recycleWorkers(true).build();
    }

    @AfterEach
    void stop() {
        sandbox.close();
    }

    private String run(String code) {
        try (SandboxSession s = sandbox.openSession()) {
            ExecResult r = s.execute(code);
            return r.status() + ":" + r.stdout() + r.stderr();
        }
    }

    @Test
    void cleanSessionsReuseTheWorkerWithFreshState() {
        String first = run("""
                import os, sys
                x = 41
                open('scratch.txt', 'w').write('a')
                open('/tmp/t.txt', 'w').write('b')
                os.environ['LEAK'] = '1'
                sys.path.append('/nowhere')
                os.chdir('/tmp')
                print(os.getcwd() != '')
                """);
        assertTrue(first.startsWith("OK:True"), first);
        SandboxTests.awaitNoSpawnInFlight(sandbox);
        long spawnedBefore = sandbox.stats().spawned();
        String second = run("""
                import os, sys
                print('x' in globals(), os.path.exists('scratch.txt'), os.path.exists('/tmp/t.txt'),
                      'LEAK' in os.environ, '/nowhere' in sys.path)
                """);
        assertEquals("OK:False False False False False\n", second);
        PythonSandbox.Stats st = sandbox.stats();
        assertEquals(spawnedBefore, st.spawned(), "no new worker was started");
        assertTrue(st.recycled() >= 1, st.toString());
    }

    @Test
    void dirtySessionsGetTheirWorkerReplaced() {
        String[] dirty = {
            "import threading, time\nthreading.Thread(target=time.sleep, args=(100,), daemon=True).start()",
            "import builtins\nbuiltins.len = lambda x: 0",
            "import os\nos.getcwd = lambda: '/fake'",
            "import resource\nresource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))",
        };
        for (String code : dirty) {
            long failuresBefore = sandbox.stats().recycleFailures();
            run(code);
            Supplier<String> probe = () -> run("import os, builtins, threading, resource\n"
                    + "print(len('abc'), os.getcwd() != '/fake', threading.active_count(), "
                    + "resource.getrlimit(resource.RLIMIT_NOFILE)[0] != 64)");
            assertEquals("OK:3 True 1 True\n", probe.get(), "after: " + code);
            assertEquals(failuresBefore + 1, sandbox.stats().recycleFailures(), "worker replaced after: " + code);
        }
    }

    @Test
    void strayProcessesAreKilledBeforeReuse() {
        SandboxTests.assumeJail(sandbox);
        run("import subprocess\nsubprocess.Popen(['sleep', '100'], start_new_session=True)");
        String procs = run("import os\nprint(sorted(int(p) for p in os.listdir('/proc') if p.isdigit()))");
        // the jail's init (pid 1) and this worker only
        assertEquals(2, procs.substring(procs.indexOf('[') + 1, procs.indexOf(']')).split(",").length, procs);
    }
}
