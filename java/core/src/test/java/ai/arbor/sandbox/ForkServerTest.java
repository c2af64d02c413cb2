package ai.arbor.sandbox;

import static ai.arbor.sandbox.SandboxTests.assertServes;
import static ai.arbor.sandbox.SandboxTests.assumeJail;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The fork server ({@code forkServer(true)}): every session runs in a child forked from a warm template
 * that never runs model code. Checks that nothing of one session reaches the next (variables, files in
 * the scratch directory, /tmp and /dev/shm, processes, threads, open descriptors, the random generators),
 * that a child that dies, overruns or runs out of memory costs the session its state but not the
 * template (no worker restart), and that the stray stopper spares the child.
 */
class ForkServerTest {

    static PythonSandbox sandbox;

    @BeforeAll
    static void start() {
        // one worker: every session below is forked from the same template
        sandbox = SandboxTests.builder().workers(1).forkServer(true).build();
        System.out.println("isolation: " + sandbox.isolationReport());
    }

    @AfterAll
    static void stop() {
        sandbox.close();
    }

    /** What a cell can see of its environment, one fact per line. */
    private static final String PROBE = """
            import os, sys, threading, random
            def listing(d):
                try:
                    return sorted(os.listdir(d))
                except OSError as e:
                    return type(e).__name__
            print('vars', sorted(k for k in globals() if not k.startswith('_') and k not in ('os', 'sys', 'threading', 'random', 'listing', 'jail')))
            print('scratch', listing(os.getcwd()))
            # the jail's own tmpfs mounts (in fallback mode the host's, not shown)
            jail = os.getuid() == %d and not os.path.exists('/home')
            print('tmp', listing('/tmp') if jail else '-')
            print('shm', listing('/dev/shm') if jail else '-')
            print('threads', len(os.listdir('/proc/self/task')), threading.active_count())
            # numbers vary with the order the interpreters were forked in; what they are does not
            kinds = []
            for f in os.listdir('/proc/self/fd'):
                try:
                    kinds.append(os.readlink('/proc/self/fd/' + f).split('[')[0])
                except OSError:
                    pass  # the descriptor of the listing itself
            print('fds', sorted(kinds))
            print('modules_main', sys.modules['__main__'].__dict__.get('secret'))
            """.formatted(PythonSandbox.JAIL_UID);

    private static List<String> probe(PythonSession s) {
        ExecResult r = s.execute(PROBE);
        assertEquals(ExecStatus.OK, r.status(), r::toString);
        return r.stdout().lines().toList();
    }

    @Test
    void nothingSurvivesFromOneSessionToTheNext() {
        long spawned;
        List<String> fresh;
        String firstRandom;
        try (PythonSession a = sandbox.openSession()) {
            fresh = probe(a);
            SandboxTests.awaitNoSpawnInFlight(sandbox);
            spawned = sandbox.stats().spawned();
            boolean jail = sandbox.isolation() == Isolation.JAIL;
            // /tmp and /dev/shm are the jail's own tmpfs mounts; in fallback mode they are the host's, left alone
            String tmp = jail ? "/tmp" : "locked-tmp";
            ExecResult dirty = a.execute(SandboxTests.leaveEverythingBehind(tmp) + "import random\nprint(random.random())");
            assertEquals(ExecStatus.OK, dirty.status(), dirty::toString);
            firstRandom = dirty.stdout().strip();
            List<String> inside = probe(a);
            assertTrue(inside.get(0).contains("secret"), inside::toString);
            assertNotEquals(fresh.get(1), inside.get(1), "the first session saw its own files: " + inside);
        }
        try (PythonSession b = sandbox.openSession()) {
            List<String> next = probe(b);
            assertEquals(fresh, next, "the second session starts exactly like the first did");
            assertEquals("vars []", next.get(0));
            assertEquals("scratch []", next.get(1));
            if (sandbox.isolation() == Isolation.JAIL) {
                assertEquals("tmp []", next.get(2));
                assertEquals("shm []", next.get(3));
            }
            assertEquals("threads 1 1", next.get(4));
            assertEquals("modules_main None", next.get(6));
            ExecResult rnd = b.execute("import random\nprint(random.random())");
            assertNotEquals(firstRandom, rnd.stdout().strip(), "random is reseeded in every child");
            if (sandbox.isolation() == Isolation.JAIL) {
                // the jail holds the template (its pid 1), this session's interpreter and the spares forked
                // for the next sessions (one was taken for this session; refilled between sessions), nothing else
                ExecResult ps = b.execute("import os\nprint(len([p for p in os.listdir('/proc') if p.isdigit()]), os.getppid())");
                assertEquals((1 + PythonSandbox.FORK_SPARES) + " 1\n", ps.stdout(), ps::toString);
            }
        }
        assertEquals(spawned, sandbox.stats().spawned(), "sessions are forked from the template, not started");
    }

    /**
     * A spare runs the template's warm-up cell before its session (docs/sandbox.md, "Fork server"): the
     * session's first cell must see what the first cell of a plain worker (a freshly started interpreter)
     * sees: the same globals, only its own cell's source cached, cell numbering from 1, the whole output budget.
     */
    @Test
    void aSessionsFirstCellLooksLikeAFreshInterpretersFirstCell() {
        String code = """
                import linecache, sys
                print(sorted(globals()))
                print(sorted(k for k in linecache.cache if k.startswith('<')))
                print('_' in globals(), '_w' in globals())
                sys.stdout.write('x' * %d)
                1 / 0""".formatted(SandboxTests.builder().copy().maxOutputBytes - 200);
        ExecResult forked;
        try (PythonSession s = sandbox.openSession()) {
            forked = s.execute(code);
        }
        ExecResult plain;
        try (PythonSandbox fresh = SandboxTests.builder().workers(1).build(); PythonSession s = fresh.openSession()) {
            plain = s.execute(code);
        }
        assertEquals(ExecStatus.ERROR, plain.status(), plain::toString);
        assertEquals(plain.status(), forked.status(), forked::toString);
        assertEquals(plain.stdout(), forked.stdout());
        assertTrue(plain.stdout().startsWith("['__builtins__', '__doc__', '__loader__', '__name__', '__package__', '__spec__', 'linecache', 'sys']\n['<cell-1>']\nFalse False\n"),
                plain::toString);
        assertTrue(forked.stderr().contains("File \"<cell-1>\", line 6"), forked::toString);
        assertEquals(plain.stderr(), forked.stderr());
    }

    @Test
    void numpyGeneratorIsReseededPerChild() {
        try (PythonSandbox np = SandboxTests.builder().workers(1).forkServer(true).preImport("numpy").build()) {
            String[] draws = new String[2];
            for (int i = 0; i < 2; i++) {
                try (PythonSession s = np.openSession()) {
                    ExecResult r = s.execute("import numpy\nprint(numpy.random.randint(0, 2**62))");
                    assertEquals(ExecStatus.OK, r.status(), r::toString);
                    draws[i] = r.stdout();
                }
            }
            assertNotEquals(draws[0], draws[1], "a child inherits numpy's global generator unless it is reseeded");
        }
    }

    @Test
    void deadChildCostsTheSessionNotTheTemplate() {
        SandboxTests.awaitNoSpawnInFlight(sandbox);
        long spawned = sandbox.stats().spawned();
        try (PythonSession s = sandbox.openSession()) {
            assertEquals(ExecStatus.OK, s.execute("x = 1").status());
            ExecResult r = s.execute("import os\nos._exit(3)");
            assertEquals(ExecStatus.CRASHED, r.status(), r::toString);
            assertTrue(r.stateLost() && r.stderr().contains("exited with code 3"), r::toString);
            ExecResult seg = s.execute("import ctypes\nctypes.string_at(0)");
            assertEquals(ExecStatus.CRASHED, seg.status(), seg::toString);
            assertTrue(seg.stderr().contains("SIGSEGV"), seg::toString);
            ExecResult after = s.execute("print('x' in globals())");
            assertEquals("False\n", after.stdout(), after::toString);
            ExecResult mem = s.execute("y = 5\nb = bytearray(10**12)");
            assertEquals(ExecStatus.MEMORY, mem.status(), mem::toString);
            assertTrue(mem.stateLost());
            ExecResult swallowed = s.execute("""
                    while True:
                        try:
                            while True:
                                pass
                        except BaseException:
                            pass""");
            assertEquals(ExecStatus.TIMEOUT, swallowed.status(), swallowed::toString);
            // killed by the template (its message), not by Java's hard limit ("was killed after 2 s"), which would cost the template
            assertTrue(swallowed.stateLost() && swallowed.stderr().contains("did not stop; the interpreter was killed and all"), swallowed::toString);
            ExecResult soft = s.execute("z = 3\nimport time\ntime.sleep(100)");
            assertEquals(ExecStatus.TIMEOUT, soft.status(), soft::toString);
            assertFalse(soft.stateLost(), soft::toString);
            assertEquals("3\n", s.execute("z").stdout(), "a soft timeout keeps the child and its variables");
        }
        assertEquals(spawned, sandbox.stats().spawned(), "the template survived every one of these");
        assertServes(sandbox);
    }

    @Test
    void resetForksAFreshInterpreter() {
        SandboxTests.awaitNoSpawnInFlight(sandbox);
        long spawned = sandbox.stats().spawned();
        try (PythonSession s = sandbox.openSession()) {
            assertEquals(ExecStatus.OK, s.execute("x = 1\nopen('f', 'w').write('x')").status());
            s.reset();
            ExecResult r = s.execute("import os\nprint('x' in globals(), os.listdir('.'))");
            assertEquals("False []\n", r.stdout(), r::toString);
        }
        assertEquals(spawned, sandbox.stats().spawned());
    }

    @Test
    void strayStopperSparesTheSessionsInterpreter() {
        assumeJail(sandbox);
        try (PythonSession s = sandbox.openSession()) {
            assertEquals(ExecStatus.OK, s.execute("keep = 'kept'").status());
            ExecResult r = s.execute("import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass");
            assertEquals(ExecStatus.TIMEOUT, r.status(), r::toString);
            assertFalse(r.stateLost(), "the interrupted interpreter was spared and kept its state: " + r);
            assertEquals("'kept'\n", s.execute("keep").stdout());
            // the template SIGKILLs the swarm after the cell without waiting for it to die (docs/sandbox.md): on a
            // loaded machine a killed process can take a moment to exit, so look again for up to 10 s
            String left = "";
            ExecResult ps = null;
            for (long until = System.nanoTime() + 10_000_000_000L; System.nanoTime() < until; ) {
                ps = s.execute("import os\nprint(len([p for p in os.listdir('/proc') if p.isdigit() and open('/proc/%s/stat' % p).read().split(') ')[1][0] not in 'ZX']))");
                left = ps.stdout();
                if (left.equals((1 + PythonSandbox.FORK_SPARES) + "\n")) break;
                try {
                    Thread.sleep(100);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                    break;
                }
            }
            assertEquals((1 + PythonSandbox.FORK_SPARES) + "\n", left, "only the template, the interpreter and the spares are left: " + ps);
        }
    }

    @Test
    void forkServerAndRecyclingExcludeEachOther() {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> PythonSandbox.builder().forkServer(true).recycleWorkers(true).build());
        assertTrue(e.getMessage().contains("forkServer"), e.getMessage());
    }
}
