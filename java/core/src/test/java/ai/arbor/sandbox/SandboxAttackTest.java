package ai.arbor.sandbox;

import static ai.arbor.sandbox.SandboxTests.assertServes;
import static ai.arbor.sandbox.SandboxTests.awaitNoSpawnInFlight;
import static ai.arbor.sandbox.SandboxTests.assumeJail;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.Map;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;

/**
 * More attacks of model-written code, each run against a plain pool and against a fork server (where the
 * session's interpreter is a child of a template that later sessions are forked from, so the template
 * must come out of every attack unchanged or be replaced). Each case asserts containment and that the
 * pool then serves a normal request.
 */
class SandboxAttackTest {

    static final String MARKER_NAME = "ARBOR_SANDBOX_ATTACK_MARKER";
    static final String MARKER_VALUE = "leak-" + UUID.randomUUID();

    @Nested
    @TestInstance(TestInstance.Lifecycle.PER_CLASS)
    class Plain extends Attacks {
        Plain() {
            super(false);
        }
    }

    @Nested
    @TestInstance(TestInstance.Lifecycle.PER_CLASS)
    class Forked extends Attacks {
        Forked() {
            super(true);
        }

        @Test
        void sessionCannotPtraceOrWriteTheTemplate() {
            assumeJail(sandbox);
            ExecResult r = run("""
                    import ctypes, os
                    libc = ctypes.CDLL(None, use_errno=True)
                    t = os.getppid()
                    print('attach', libc.ptrace(16, t, 0, 0), ctypes.get_errno())   # PTRACE_ATTACH
                    try:
                        open('/proc/%d/mem' % t, 'r+b')
                        print('mem OPEN')
                    except OSError as e:
                        print('mem', type(e).__name__)
                    try:
                        print('environ', len(open('/proc/%d/environ' % t, 'rb').read()))
                    except OSError as e:
                        print('environ', type(e).__name__)""");
            assertEquals(ExecStatus.OK, r.status(), r::toString);
            assertEquals("attach -1 1\nmem PermissionError\nenviron PermissionError\n", r.stdout(), "EPERM: the template is not dumpable");
            assertTemplateKept();
        }

        @Test
        void killingTheTemplateIsIgnored() {
            assumeJail(sandbox);
            ExecResult r = run("import os, signal\nprint(os.getppid())\nos.kill(os.getppid(), signal.SIGKILL)\ntry:\n    os.kill(-1, signal.SIGKILL)\nexcept ProcessLookupError:\n    pass\nprint('after')");
            // the template is the jail's pid 1: the kernel drops signals sent to it from inside
            assertEquals(ExecStatus.OK, r.status(), r::toString);
            assertEquals("1\nafter\n", r.stdout());
            assertStateKept();
            assertTemplateKept();
        }
    }

    abstract static class Attacks {
        final boolean fork;
        PythonSandbox sandbox;
        PythonSession s;
        long spawnedAtStart;

        Attacks(boolean fork) {
            this.fork = fork;
            sandbox = SandboxTests.builder().workers(2).memoryLimitMb(512).forkServer(fork)
                    .launcherEnvironment(Map.of(MARKER_NAME, MARKER_VALUE)).build();
            System.out.println((fork ? "fork server, " : "plain, ") + "isolation: " + sandbox.isolationReport());
        }

        @AfterAll
        void stop() {
            sandbox.close();
        }

        @BeforeEach
        void open() {
            s = sandbox.openSession(Duration.ofSeconds(30));
            assertEquals(ExecStatus.OK, s.execute("keep = 'kept'").status());
            awaitNoSpawnInFlight(sandbox);
            spawnedAtStart = sandbox.stats().spawned();
        }

        @AfterEach
        void closeAndCheckPool() {
            s.close();
            assertServes(sandbox);
        }

        ExecResult run(String code) {
            ExecResult r = s.execute(code);
            System.out.println("  " + code.lines().findFirst().orElse("") + " -> " + r.status() + " stateLost=" + r.stateLost()
                    + " " + r.durationMillis() + " ms");
            return r;
        }

        void assertStateKept() {
            ExecResult r = s.execute("keep");
            assertEquals("'kept'\n", r.stdout(), r::toString);
        }

        /** Fork server: the attack cost no worker restart (the template is intact and still in use). */
        void assertTemplateKept() {
            if (fork) assertEquals(spawnedAtStart, sandbox.stats().spawned(), "the template was replaced");
        }

        @Test
        void signalsAtTheJailsInit() {
            assumeJail(sandbox);
            ExecResult r = run("""
                    import os, signal
                    for sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGSTOP, signal.SIGSEGV):
                        os.kill(1, sig)
                    print('init', open('/proc/1/stat').read().split(') ')[1][0])""");
            assertEquals(ExecStatus.OK, r.status(), r::toString);
            // the kernel drops signals to a pid namespace's init that it has no handler for
            assertTrue(r.stdout().startsWith("init S") || r.stdout().startsWith("init R"), r::toString);
            assertStateKept();
            assertTemplateKept();
        }

        @Test
        void signalsAtItself() {
            ExecResult stop = run("import os, signal\nos.kill(os.getpid(), signal.SIGSTOP)");
            assertEquals(ExecStatus.TIMEOUT, stop.status(), stop::toString);
            assertTrue(stop.stateLost(), stop::toString);
            ExecResult kill = run("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)");
            assertEquals(ExecStatus.CRASHED, kill.status(), kill::toString);
            assertTrue(kill.stderr().contains("SIGKILL"), kill::toString);
            assertSessionServesFresh();
            assertTemplateKept();
        }

        @Test
        void ptraceOfTheParent() {
            assumeJail(sandbox);
            ExecResult r = run("""
                    import ctypes, os
                    libc = ctypes.CDLL(None, use_errno=True)
                    print(libc.ptrace(16, os.getppid(), 0, 0), libc.ptrace(16, 1, 0, 0))""");
            assertEquals(ExecStatus.OK, r.status(), r::toString);
            if (fork) {
                // the parent is the template, which is also pid 1: not dumpable, so not traceable
                assertEquals("-1 -1\n", r.stdout(), "the template could be traced: " + r);
            }
            // (plain pool: the jail's init may be traced, but it dies with this session's jail)
            assertStateKept();
            assertTemplateKept();
        }

        @Test
        void writeOwnMemoryThroughProcSelfMem() {
            // Corrupting its own interpreter is allowed and ends in a crash or an error of this session only.
            ExecResult r = run("""
                    import ctypes
                    import os
                    buf = ctypes.create_string_buffer(b'before')
                    with open('/proc/self/mem', 'r+b', buffering=0) as m:
                        m.seek(ctypes.addressof(buf))
                        m.write(b'after!')
                    os.write(1, repr(buf.value).encode() + b'\\n')
                    f = open('/proc/self/mem', 'r+b', buffering=0)
                    f.seek(id(print))
                    f.write(b'\\0' * 4096)
                    print('still alive')""");
            assertTrue(r.status() == ExecStatus.CRASHED || r.status() == ExecStatus.ERROR || r.status() == ExecStatus.OK, r::toString);
            assertTrue(r.stdout().startsWith("b'after!'"), "the write reached its own memory: " + r);
            assertNotEquals(ExecStatus.SANDBOX_ERROR, r.status());
            // (a corrupted interpreter may also write protocol garbage, which replaces a fork server's template)
        }

        @Test
        void fillDevShmAndTheInodeTable() {
            assumeJail(sandbox);
            ExecResult full = run("""
                    try:
                        with open('/dev/shm/fill', 'wb') as f:
                            while True:
                                f.write(b'\\0' * (1 << 20))
                    except OSError as e:
                        print(type(e).__name__, e.errno)""");
            assertEquals("OSError 28\n", full.stdout(), "ENOSPC from the 16 MiB /dev/shm: " + full);
            ExecResult inodes = run("""
                    import os, time
                    n, t = 0, time.monotonic()
                    try:
                        while time.monotonic() - t < 0.5:
                            for _ in range(200):
                                open('/tmp/i%d' % n, 'w').close(); n += 1
                    except OSError as e:
                        print(type(e).__name__)
                    print(n > 1000)""");
            assertEquals(ExecStatus.OK, inodes.status(), inodes::toString);
            assertTrue(inodes.stdout().endsWith("True\n"), inodes::toString);
            s.close();
            s = sandbox.openSession(Duration.ofSeconds(30));
            ExecResult next = s.execute("import os\nprint(os.listdir('/dev/shm'), len(os.listdir('/tmp')))");
            assertEquals("[] 0\n", next.stdout(), "the next session starts with empty tmpfs mounts: " + next);
            assertEquals(ExecStatus.OK, s.execute("keep = 'kept'").status());
            assertTemplateKept();
        }

        @Test
        void symlinksOutOfTheScratchDir() {
            ExecResult r = run("""
                    import os
                    targets = ['/etc/shadow', '/etc/passwd', '/proc/1/root/etc/passwd', '/proc/1/cwd', '/root', '/home', '/work']
                    for i, t in enumerate(targets):
                        os.symlink(t, 'l%d' % i)
                    os.symlink('/usr/lib', 'usr-lib')
                    for i, t in enumerate(targets):
                        try:
                            print(t, 'READ', len(open('l%d' % i, 'rb').read()))
                        except OSError as e:
                            print(t, type(e).__name__)""");
            assertEquals(ExecStatus.OK, r.status(), r::toString);
            if (sandbox.isolation() == Isolation.JAIL) {
                assertFalse(r.stdout().contains("READ"), "a host file was read through a symlink: " + r.stdout());
            }
            s.close(); // the clean-up of the scratch dir must remove the links, not what they point to
            s = sandbox.openSession(Duration.ofSeconds(30));
            ExecResult next = s.execute("import os\nprint(os.listdir('.'), os.path.isdir('/usr/lib/python3'))");
            assertEquals("[] True\n", next.stdout(), next::toString);
            assertEquals(ExecStatus.OK, s.execute("keep = 'kept'").status());
        }

        @Test
        void otherProcessesEnvironAndCmdline() {
            ExecResult r = run("""
                    import os, subprocess
                    subprocess.Popen(['sleep', '30'])
                    out = []
                    for p in os.listdir('/proc'):
                        if p.isdigit():
                            for what in ('environ', 'cmdline'):
                                try:
                                    out.append(open('/proc/%s/%s' % (p, what), 'rb').read().decode('utf-8', 'replace'))
                                except OSError as e:
                                    out.append(type(e).__name__)
                    print(len(out))
                    print('\\n'.join(out))""");
            assertEquals(ExecStatus.OK, r.status(), r::toString);
            String all = r.stdout() + r.stderr();
            assertFalse(all.contains(MARKER_VALUE) || all.contains(MARKER_NAME), "the launcher's marker leaked");
            for (Map.Entry<String, String> e : System.getenv().entrySet()) {
                if (PythonSandbox.WORKER_ENVIRONMENT.containsKey(e.getKey()) || e.getKey().equals("PWD") || e.getValue().length() < 4) continue;
                assertFalse(all.contains(e.getKey() + "=" + e.getValue()), "JVM variable leaked: " + e.getKey());
            }
            assertFalse(all.contains("\"nonce\""), "the worker's configuration (sent on a pipe) is not in any command line");
            assertStateKept();
        }

        @Test
        void inheritedDescriptors() {
            ExecResult r = run("""
                    import os, stat
                    for fd in sorted(int(f) for f in os.listdir('/proc/self/fd')):
                        try:
                            target = os.readlink('/proc/self/fd/%d' % fd)
                        except OSError:
                            continue
                        kind = 'pipe' if target.startswith('pipe:') else target
                        print(fd, kind)""");
            assertEquals(ExecStatus.OK, r.status(), r::toString);
            for (String line : r.stdout().lines().toList()) {
                String what = line.substring(line.indexOf(' ') + 1);
                // pipes to Java and the template, /dev/null, the listing itself: no socket, no host file
                assertTrue(what.equals("pipe") || what.equals("/dev/null") || what.startsWith("/proc/") || what.startsWith("anon_inode:"),
                        "unexpected descriptor: " + line + " in\n" + r.stdout());
            }
            if (fork) {
                // Java's request channel stays with the template: reading every pipe finds no request
                ExecResult steal = run("""
                        import os, select
                        got = b''
                        for fd in sorted(int(f) for f in os.listdir('/proc/self/fd')):
                            if fd > 2:
                                try:
                                    if select.select([fd], [], [], 0)[0]:
                                        got += os.read(fd, 100)
                                except OSError:
                                    pass
                        print(b'X ' in got, len(got))""");
                assertEquals("False 0\n", steal.stdout(), steal::toString);
            }
            assertStateKept();
        }

        @Test
        void setsidDoubleForkDaemonDoesNotSurviveTheCall() throws Exception {
            ExecResult r = run("""
                    import os, time
                    r, w = os.pipe()
                    if os.fork() == 0:
                        os.setsid()
                        if os.fork() == 0:
                            os.write(w, b'%d\\n' % os.getpid())
                            time.sleep(1000)
                        os._exit(0)
                    print(int(os.read(r, 20)))""");
            assertEquals(ExecStatus.OK, r.status(), r::toString);
            if (sandbox.isolation() == Isolation.JAIL) {
                // the end of the call sends SIGKILL and does not wait for the exit (worker.py kill_swarm); on a
                // loaded machine the killed process may not have been scheduled yet when this cell starts, so
                // the check waits (up to 5 s) for it to be gone or a zombie
                ExecResult ps = s.execute("""
                        import os, time
                        def alive(p):
                            try:
                                return open('/proc/%d/stat' % p).read().split(') ')[1][0] not in 'ZX'
                            except OSError:
                                return False
                        t = time.time()
                        while alive(PID) and time.time() - t < 5:
                            time.sleep(0.01)
                        print(alive(PID))""".replace("PID", r.stdout().strip()));
                assertEquals("False\n", ps.stdout(), "the daemon was killed at the end of the call: " + ps);
            } else {
                long pid = Long.parseLong(r.stdout().strip());
                s.close(); // fallback mode: killed with the session
                long deadline = System.nanoTime() + Duration.ofSeconds(5).toNanos();
                while (ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false) && System.nanoTime() < deadline) Thread.sleep(20);
                assertFalse(ProcessHandle.of(pid).map(ProcessHandle::isAlive).orElse(false), "daemon " + pid + " survived the session");
                s = sandbox.openSession(Duration.ofSeconds(30));
                assertEquals(ExecStatus.OK, s.execute("keep = 'kept'").status());
            }
            assertStateKept();
        }

        void assertSessionServesFresh() {
            ExecResult r = s.execute("print(6*7)");
            assertEquals("42\n", r.stdout(), r::toString);
            assertEquals(ExecStatus.OK, s.execute("keep = 'kept'").status());
        }
    }
}
