package ai.arbor.sandbox;

import static ai.arbor.sandbox.SandboxTests.assertServes;
import static ai.arbor.sandbox.SandboxTests.assertSessionServes;
import static ai.arbor.sandbox.SandboxTests.assumeJail;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.SocketTimeoutException;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.stream.Collectors;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/**
 * Model-written code that attacks the sandbox. Each case asserts that the damage is contained (the
 * status and the evidence say what happened, the host and the JVM are untouched) and that the pool
 * then serves a normal request. Limits are small so the whole class runs in well under a minute.
 */
class SandboxAdversarialTest {

    static final String MARKER_NAME = "ARBOR_SANDBOX_LEAK_MARKER";
    static final String MARKER_VALUE = "leak-" + UUID.randomUUID();
    static PythonSandbox sandbox;
    PythonSession s;

    @BeforeAll
    static void start() {
        sandbox = SandboxTests.builder().workers(3).memoryLimitMb(512).maxOutputBytes(256 << 10)
                .launcherEnvironment(Map.of(MARKER_NAME, MARKER_VALUE)).build();
        System.out.println("isolation: " + sandbox.isolationReport());
    }

    @AfterAll
    static void stop() {
        sandbox.close();
    }

    @BeforeEach
    void open() {
        s = sandbox.openSession(Duration.ofSeconds(30));
        assertEquals(ExecStatus.OK, s.execute("keep = 'kept'").status());
    }

    @AfterEach
    void closeAndCheckPool() {
        s.close();
        assertServes(sandbox);
    }

    private ExecResult run(String code) {
        return run(code, sandbox.timeout());
    }

    private ExecResult run(String code, Duration timeout) {
        ExecResult r = s.execute(code, timeout);
        System.out.println("  " + code.lines().findFirst().orElse("") + " -> " + r.status() + " stateLost=" + r.stateLost()
                + " " + r.durationMillis() + " ms");
        return r;
    }

    private void assertStateKept() {
        ExecResult r = s.execute("keep");
        assertEquals(ExecStatus.OK, r.status(), r::toString);
        assertEquals("'kept'\n", r.stdout());
    }

    private void assertStateLost(ExecResult r) {
        assertTrue(r.stateLost(), r::toString);
        ExecResult after = s.execute("keep");
        assertEquals(ExecStatus.ERROR, after.status(), after::toString);
        assertTrue(after.stderr().contains("NameError"), after::toString);
    }

    // ------------------------------------------------------------------ processes

    @Test
    void forkBomb() {
        assumeJail(sandbox); // without a pid namespace and a per-jail process limit this would hit the host
        ExecResult r = run("import os\nwhile True:\n    os.fork()");
        // The process limit stops it (BlockingIOError) or the soft timeout does; the strays are killed
        // at the end of the call, and the interpreter is intact.
        assertTrue(r.status() == ExecStatus.ERROR || r.status() == ExecStatus.TIMEOUT, r::toString);
        assertFalse(r.stateLost(), r::toString);
        awaitDescendants(2, "only the jail's init and the worker are left");
        assertStateKept();
    }

    @Test
    void timeoutLandingWhereExceptionsAreIgnoredIsRaisedAgain() {
        // Half of the time goes to a __del__, where Python prints and drops any exception: a single
        // timeout signal lands there one time in two and would be lost, leaving the cell to the hard kill.
        // The worker's timer repeats until the exception reaches the cell's own frames.
        ExecResult r = run("""
                import time
                def spin(s):
                    t = time.monotonic()
                    while time.monotonic() - t < s:
                        pass
                class Slow:
                    def __del__(self):
                        spin(0.02)
                while True:
                    Slow()
                    spin(0.02)""");
        assertEquals(ExecStatus.TIMEOUT, r.status(), r::toString);
        assertFalse(r.stateLost(), r::toString);
        assertStateKept();
    }

    @Test
    void threadBomb() {
        ExecResult r = run("import threading, time\nwhile True:\n    threading.Thread(target=time.sleep, args=(30,), daemon=True).start()");
        assertEquals(ExecStatus.ERROR, r.status(), r::toString);
        assertTrue(r.stderr().contains("can't start new thread"), r::toString);
        assertStateKept();
    }

    @Test
    void spawnSubprocess() {
        ExecResult r = run("import subprocess\nprint(subprocess.run(['/bin/sh', '-c', 'echo hi; id -u; ls /'], capture_output=True, text=True).stdout)");
        assertEquals(ExecStatus.OK, r.status(), r::toString);
        assertTrue(r.stdout().startsWith("hi\n"), r::toString);
        if (sandbox.isolation() == Isolation.JAIL) {
            List<String> lines = r.stdout().lines().toList();
            assertEquals(String.valueOf(PythonSandbox.JAIL_UID), lines.get(1));
            assertFalse(lines.contains("home") || lines.contains("root") || lines.contains("work"), "host directories visible: " + lines);
        }
        assertStateKept();
    }

    @Test
    void detachedChildrenDieWithTheSession() throws Exception {
        assumeJail(sandbox);
        try (PythonSandbox keep = SandboxTests.builder().workers(1).killStrayProcesses(false).build()) {
            PythonSession k = keep.openSession();
            ExecResult r = k.execute("""
                    import subprocess, os
                    subprocess.Popen(['sleep', '1000'], start_new_session=True)
                    if os.fork() == 0:          # double fork: a daemon re-parented away from the worker
                        os.setsid()
                        if os.fork() == 0:
                            import time; time.sleep(1000)
                        os._exit(0)
                    print('spawned')""");
            assertEquals(ExecStatus.OK, r.status(), r::toString);
            ProcessHandle launcher = k.workerProcess();
            List<ProcessHandle> tree = launcher.descendants().collect(Collectors.toList());
            assertTrue(tree.size() >= 4, "expected init, worker, sleep and the daemon alive: " + tree);
            tree.add(launcher);
            k.close();
            assertAllGone(tree);
            assertServes(keep);
        }
        // With the default policy the same children do not even outlive the call.
        ExecResult r = run("import subprocess\nsubprocess.Popen(['sleep', '1000'], start_new_session=True)\nprint('ok')");
        assertEquals(ExecStatus.OK, r.status(), r::toString);
        awaitDescendants(2, "stray processes are killed at the end of the call");
        assertStateKept();
    }

    @Test
    void killEverything() {
        assumeJail(sandbox); // kill(-1) outside a pid namespace signals every process of the user
        try (PythonSession other = sandbox.openSession(Duration.ofSeconds(30))) {
            assertEquals(ExecStatus.OK, other.execute("secret = 7").status());
            ExecResult r = run("import os, signal, subprocess\nchild = subprocess.Popen(['sleep', '100'])\nos.kill(-1, signal.SIGKILL)\n"
                    + "print('still here', child.wait())");
            assertEquals(ExecStatus.OK, r.status(), r::toString);
            assertEquals("still here -9\n", r.stdout(), "kill(-1) reached only the cell's own child");
            ExecResult o = other.execute("secret");
            assertEquals("7\n", o.stdout(), "another session's interpreter was touched: " + o);
        }
        assertStateKept();
    }

    @Test
    void killTheParent() {
        assumeJail(sandbox); // outside the jail the parent is the JVM
        ExecResult r = run("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\nos.kill(1, signal.SIGKILL)\nprint(os.getppid())");
        assertEquals(ExecStatus.OK, r.status(), r::toString);
        assertEquals("1\n", r.stdout(), "the worker's parent is the jail's init (pid 1), which ignores signals from inside");
        assertStateKept();
    }

    // ------------------------------------------------------------------ time

    @Test
    void infiniteLoop() {
        ExecResult r = run("while True:\n    pass");
        assertEquals(ExecStatus.TIMEOUT, r.status(), r::toString);
        assertFalse(r.stateLost(), "the soft timeout interrupts a Python loop: " + r);
        assertStateKept();
    }

    @Test
    void sleepForever() {
        ExecResult r = run("import time\ntime.sleep(10**6)");
        assertEquals(ExecStatus.TIMEOUT, r.status(), r::toString);
        assertFalse(r.stateLost(), r::toString);
        assertTrue(r.durationMillis() < 1950, "interrupted at the soft limit: " + r);
        assertStateKept();
    }

    @Test
    void cCallThatIgnoresSignals() {
        ExecResult r = run("import ctypes, signal\nsignal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGALRM])\nctypes.CDLL(None).sleep(1000)");
        assertEquals(ExecStatus.TIMEOUT, r.status(), r::toString);
        assertTrue(r.stderr().contains("was killed"), r::toString);
        assertTrue(r.durationMillis() >= 1950 && r.durationMillis() < 5000, "killed at the hard limit: " + r);
        assertStateLost(r);
    }

    @Test
    void swallowTheSoftTimeout() {
        ExecResult r = run("""
                while True:
                    try:
                        while True:
                            pass
                    except BaseException:
                        pass""");
        assertEquals(ExecStatus.TIMEOUT, r.status(), r::toString);
        assertStateLost(r);
    }

    @Test
    void giantPower() {
        // One C call; CPython's long_pow checks for signals while it multiplies, so the soft timeout
        // interrupts it (a call that does not check is killed at the hard limit, see cCallThatIgnoresSignals).
        ExecResult r = run("10**(10**8)");
        assertEquals(ExecStatus.TIMEOUT, r.status(), r::toString);
        if (r.stateLost()) assertStateLost(r);
        else assertStateKept();
    }

    @Test
    void deepRecursion() {
        ExecResult r = run("def f(n):\n    return f(n + 1)\nf(0)");
        assertEquals(ExecStatus.ERROR, r.status(), r::toString);
        assertTrue(r.stderr().contains("RecursionError"), r::toString);
        assertTrue(r.stderr().length() < 2000, "the traceback is collapsed and capped: " + r.stderr().length());
        assertStateKept();
    }

    @Test
    void deepRecursionWithTheLimitLifted() {
        // Python frames live on the heap in 3.11: a lifted recursion limit runs into the address-space
        // limit (MemoryError or a crash), never into the host.
        ExecResult r = run("import sys\nsys.setrecursionlimit(10**8)\ndef f(n):\n    return f(n + 1)\nf(0)");
        assertTrue(r.status() == ExecStatus.MEMORY || r.status() == ExecStatus.CRASHED || r.status() == ExecStatus.ERROR
                || r.status() == ExecStatus.TIMEOUT, r::toString);
        assertNotEquals(ExecStatus.SANDBOX_ERROR, r.status());
        assertSessionServes(s);
    }

    // ------------------------------------------------------------------ memory and output

    @Test
    void memoryBomb() {
        // touching 512 MiB takes a while on a loaded machine: the limit under test is memory, not time
        ExecResult r = run("chunks = []\nwhile True:\n    chunks.append(bytearray(16 << 20))", Duration.ofSeconds(20));
        assertEquals(ExecStatus.MEMORY, r.status(), r::toString);
        assertTrue(r.stderr().contains("MemoryError"), r::toString);
        assertStateLost(r); // reset automatically after MEMORY
    }

    @Test
    void hugeAllocation() {
        ExecResult r = run("x = bytearray(10**12)");
        assertEquals(ExecStatus.MEMORY, r.status(), r::toString);
        assertStateLost(r);
    }

    @Test
    void unboundedOutput() {
        ExecResult r = run("while True:\n    print('y' * 100)");
        assertEquals(ExecStatus.OUTPUT_LIMIT, r.status(), r::toString);
        assertTrue(r.truncated());
        assertFalse(r.stateLost(), "Python-level output is cut inside the worker: " + r);
        assertTrue(r.stdout().length() < 1000, "head + marker + tail only: " + r.stdout().length());
        assertTrue(r.stdout().startsWith("yyyy") && r.stdout().contains("bytes truncated"), r::toString);
        assertStateKept();
    }

    @Test
    void unboundedRawOutput() {
        ExecResult r = run("import os\nwhile True:\n    os.write(1, b'z' * 65536)");
        assertEquals(ExecStatus.OUTPUT_LIMIT, r.status(), r::toString);
        assertTrue(r.truncated());
        assertTrue(r.stdout().length() < 1000, r::toString);
        assertStateLost(r); // file-descriptor writes bypass Python: Java cuts them off by killing the worker
    }

    @Test
    void oneHugePrint() {
        ExecResult r = run("print('x' * 50_000_000)");
        assertEquals(ExecStatus.OUTPUT_LIMIT, r.status(), r::toString);
        assertTrue(r.stdout().startsWith("x".repeat(400)), r::toString);
        assertTrue(r.stderr().contains("OutputLimitExceeded"), r::toString);
        assertStateKept();
    }

    @Test
    void invalidUtf8AndLoneSurrogates() {
        ExecResult r = run("import os, sys\nos.write(1, b'raw \\xff\\xfe|')\nsys.stdout.buffer.write(b'buf \\xc3\\x28|')\nprint('lone \\ud800 ok')");
        assertEquals(ExecStatus.OK, r.status(), r::toString);
        assertTrue(r.stdout().contains("\uFFFD"), r::toString);
        assertTrue(r.stdout().contains("raw ") && r.stdout().contains("buf ") && r.stdout().endsWith(" ok\n"), r::toString);
        assertStateKept();
    }

    @Test
    void multiMegabyteCode() {
        String code = "x = 1\n" + "#".repeat(5 << 20);
        ExecResult r = run(code);
        assertEquals(ExecStatus.ERROR, r.status(), r::toString);
        assertTrue(r.stderr().contains("more than the limit"), r::toString);
        assertFalse(r.stateLost());
        assertStateKept();
        // just under the limit is accepted
        ExecResult ok = s.execute("y = 2\n" + "#".repeat(900_000) + "\nprint(y)");
        assertEquals(ExecStatus.OK, ok.status(), ok::toString);
        assertEquals("2\n", ok.stdout());
    }

    // ------------------------------------------------------------------ files

    @Test
    void writeToUsr() {
        assumeJail(sandbox);
        ExecResult r = run("open('/usr/lib/python3/evil.py', 'w')");
        assertEquals(ExecStatus.ERROR, r.status(), r::toString);
        assertTrue(r.stderr().contains("Read-only file system"), r::toString);
        assertStateKept();
    }

    @Test
    void writeOutsideTheScratchDir() {
        assumeJail(sandbox);
        ExecResult r = run("""
                import os
                for p in ['/evil', '/etc/evil', '/dev/evil', '/proc/evil', '/home/evil', '/root/evil', '/work/evil']:
                    try:
                        open(p, 'w').write('x')
                        print('WROTE', p)
                    except OSError as e:
                        print('refused', p, type(e).__name__)
                open('/scratch/ok', 'w').write('fine'); open('/tmp/ok', 'w').write('fine')
                print(os.getcwd(), open('ok').read())""");
        assertEquals(ExecStatus.OK, r.status(), r::toString);
        assertFalse(r.stdout().contains("WROTE"), r::toString);
        assertEquals(7, r.stdout().lines().filter(l -> l.startsWith("refused")).count(), r::toString);
        assertTrue(r.stdout().endsWith("/scratch fine\n"), r::toString);
        assertStateKept();
    }

    @Test
    void fillTmp() {
        assumeJail(sandbox);
        ExecResult r = run("""
                n = 0
                with open('/tmp/fill', 'wb') as f:
                    while True:
                        f.write(b'\\0' * (1 << 20)); n += 1""");
        assertEquals(ExecStatus.ERROR, r.status(), r::toString);
        assertTrue(r.stderr().contains("No space left on device") || r.stderr().contains("File too large"), r::toString);
        assertStateKept();
        ExecResult n = s.execute("n");
        assertTrue(Integer.parseInt(n.stdout().strip()) <= 64, "bounded by the 64 MiB tmpfs: " + n);
    }

    @Test
    void readEtcPasswd() {
        assumeJail(sandbox);
        ExecResult r = run("print(open('/etc/passwd').read())");
        assertEquals(ExecStatus.ERROR, r.status(), r::toString);
        assertTrue(r.stderr().contains("FileNotFoundError"), r::toString);
        assertStateKept();
    }

    @Test
    void dumpEnviron() {
        ExecResult r = run("import os\nfor k, v in sorted(os.environ.items()):\n    print(k + '=' + v)");
        assertEquals(ExecStatus.OK, r.status(), r::toString);
        assertFalse(r.stdout().contains(MARKER_VALUE), "the launcher's marker leaked: " + r.stdout());
        for (String line : r.stdout().lines().toList()) {
            String name = line.substring(0, line.indexOf('='));
            assertTrue(PythonSandbox.WORKER_ENVIRONMENT.containsKey(name) || name.equals("PWD"), "unexpected variable " + line);
        }
        assertNoJvmVariable(r.stdout());
        assertStateKept();
    }

    @Test
    void procOneEnviron() {
        assumeJail(sandbox); // outside a pid namespace /proc/1 is the host's init
        ExecResult r = run("""
                import os
                dump = []
                for pid in ['1', 'self'] + [p for p in os.listdir('/proc') if p.isdigit()]:
                    try:
                        dump.append(open('/proc/%s/environ' % pid, 'rb').read().decode('utf-8', 'replace').replace('\\0', '\\n'))
                    except OSError as e:
                        dump.append('unreadable %s: %s' % (pid, type(e).__name__))
                print('\\n'.join(dump))""");
        assertEquals(ExecStatus.OK, r.status(), r::toString);
        assertTrue(r.stdout().contains("PATH=/usr/local/bin:/usr/bin:/bin"), "the dump worked: " + r.stdout());
        assertFalse(r.stdout().contains(MARKER_NAME) || r.stdout().contains(MARKER_VALUE), "marker leaked: " + r.stdout());
        assertNoJvmVariable(r.stdout());
        assertStateKept();
    }

    private static void assertNoJvmVariable(String dump) {
        for (Map.Entry<String, String> e : System.getenv().entrySet()) {
            if (PythonSandbox.WORKER_ENVIRONMENT.containsKey(e.getKey()) || e.getKey().equals("PWD")) continue;
            assertFalse(dump.contains(e.getKey() + "=" + e.getValue()), "JVM variable leaked: " + e.getKey());
        }
    }

    // ------------------------------------------------------------------ network

    @Test
    void connectToALoopbackPortOfTheHost() throws IOException {
        assumeJail(sandbox);
        try (ServerSocket server = new ServerSocket(0, 50, InetAddress.getLoopbackAddress())) {
            server.setSoTimeout(300);
            ExecResult r = run("import socket\nsocket.create_connection(('127.0.0.1', " + server.getLocalPort() + "), timeout=1)");
            assertEquals(ExecStatus.ERROR, r.status(), r::toString);
            assertTrue(r.stderr().contains("ConnectionRefusedError") || r.stderr().contains("unreachable"), r::toString);
            assertThrows(SocketTimeoutException.class, server::accept, "the host's listener saw a connection");
        }
        assertStateKept();
    }

    @Test
    void connectToAnExternalAddress() {
        assumeJail(sandbox);
        ExecResult r = run("import socket\nsocket.create_connection(('1.1.1.1', 80), timeout=2)");
        assertEquals(ExecStatus.ERROR, r.status(), r::toString);
        assertTrue(r.stderr().contains("Network is unreachable"), r::toString);
        assertStateKept();
    }

    @Test
    void dnsLookup() {
        assumeJail(sandbox);
        ExecResult r = run("import socket\nsocket.getaddrinfo('example.com', 80)");
        assertEquals(ExecStatus.ERROR, r.status(), r::toString);
        assertTrue(r.stderr().contains("gaierror"), r::toString);
        assertStateKept();
    }

    @Test
    void nestedUserNamespace() {
        assumeJail(sandbox);
        ExecResult r = run("import subprocess\np = subprocess.run(['unshare', '--user', '--map-root-user', 'id', '-u'], capture_output=True, text=True)\nprint(p.returncode, p.stdout.strip())");
        assertEquals(ExecStatus.OK, r.status(), r::toString);
        assertFalse(r.stdout().startsWith("0 0"), "became root in a nested user namespace: " + r);
        assertStateKept();
    }

    @Test
    void raiseTheResourceLimits() {
        ExecResult r = run("import resource\nresource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))");
        assertEquals(ExecStatus.ERROR, r.status(), r::toString);
        assertTrue(r.stderr().contains("ValueError") || r.stderr().contains("PermissionError"), r::toString);
        assertStateKept();
    }

    // ------------------------------------------------------------------ the interpreter itself

    @Test
    void segfault() {
        ExecResult r = run("import ctypes\nctypes.string_at(0)");
        assertEquals(ExecStatus.CRASHED, r.status(), r::toString);
        assertTrue(r.stderr().contains("SIGSEGV"), r::toString);
        assertStateLost(r);
    }

    @Test
    void osExit() {
        ExecResult r = run("import os\nos._exit(3)");
        assertEquals(ExecStatus.CRASHED, r.status(), r::toString);
        assertTrue(r.stderr().contains("exited with code 3"), r::toString);
        assertStateLost(r);
    }

    @Test
    void sysExit() {
        ExecResult zero = run("import sys\nprint('before')\nsys.exit()");
        assertEquals(ExecStatus.OK, zero.status(), zero::toString);
        assertEquals("before\n", zero.stdout());
        ExecResult two = run("import sys\nsys.exit(2)");
        assertEquals(ExecStatus.ERROR, two.status(), two::toString);
        assertTrue(two.stderr().contains("SystemExit: 2"), two::toString);
        assertStateKept();
    }

    @Test
    void inputReadsNothing() {
        ExecResult r = run("input('your answer? ')");
        assertEquals(ExecStatus.ERROR, r.status(), r::toString);
        assertTrue(r.stderr().contains("EOFError"), r::toString);
        ExecResult fd0 = run("import os\nprint(os.read(0, 100))");
        assertEquals("b''\n", fd0.stdout(), "fd 0 is /dev/null, not the protocol channel: " + fd0);
        assertStateKept();
    }

    @Test
    void garbageOnTheProtocolDescriptors() {
        ExecResult r = run("""
                import os
                junk = b'\\x1eARBOR:00000000:ok\\n\\x1eARBOR:\\n\\x00\\xff garbage \\x1eARB'
                for fd in sorted(int(f) for f in os.listdir('/proc/self/fd')):
                    try:
                        os.write(fd, junk)
                    except OSError:
                        pass
                print('done')""");
        // Frames without this call's nonce are plain output; descriptors opened for reading refuse writes.
        assertEquals(ExecStatus.OK, r.status(), r::toString);
        assertTrue(r.stdout().contains(" garbage ") && r.stdout().endsWith("done\n"), r::toString);
        assertStateKept();
    }

    @Test
    void forgedFrameWithTheRealNonce() {
        ExecResult r = run("""
                import sys, os
                f = sys._getframe()
                while f is not None and 'nonce' not in f.f_locals:
                    f = f.f_back
                os.write(1, b'\\x1eARBOR:' + f.f_locals['nonce'] + b':pwned by the model\\n')""");
        assertEquals(ExecStatus.CRASHED, r.status(), r::toString);
        assertTrue(r.stderr().contains("protocol"), r::toString);
        assertStateLost(r);
    }

    @Test
    void closeTheProtocolDescriptors() {
        ExecResult r = run("""
                import os
                for fd in sorted(int(f) for f in os.listdir('/proc/self/fd')):
                    if fd > 2:
                        try:
                            os.close(fd)
                        except OSError:
                            pass""");
        assertEquals(ExecStatus.CRASHED, r.status(), r::toString);
        assertStateLost(r);
    }

    @Test
    void monkeyPatchPrintAndStdout() {
        ExecResult r = run("""
                import builtins, sys
                builtins.print = lambda *a, **k: None
                sys.stdout = None
                6 * 7""");
        assertEquals(ExecStatus.OK, r.status(), r::toString);
        assertEquals("42\n", r.stdout(), "the displayed value uses the worker's own writer");
        ExecResult hidden = run("import os\nos.dup2(os.open(os.devnull, os.O_WRONLY), 1)\nos.write(1, b'hidden')\nsys.stdout.write('hidden too')");
        assertEquals(ExecStatus.OK, hidden.status(), hidden::toString);
        assertEquals("", hidden.stdout(), "the cell redirected its own stdout");
        ExecResult next = run("import sys\nsys.stdout.write('visible\\n')\nkeep");
        assertEquals(ExecStatus.OK, next.status(), next::toString);
        assertEquals("visible\n'kept'\n", next.stdout(), "streams are re-installed for every call");
    }

    private void awaitDescendants(long expected, String why) {
        long deadline = System.nanoTime() + Duration.ofSeconds(3).toNanos();
        while (descendants() != expected && System.nanoTime() < deadline) {
            try {
                Thread.sleep(20);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            }
        }
        assertEquals(expected, descendants(), why);
    }

    private long descendants() {
        ProcessHandle p = s.workerProcess();
        return p == null ? -1 : p.descendants().filter(ProcessHandle::isAlive).count();
    }

    private static void assertAllGone(List<ProcessHandle> tree) throws InterruptedException {
        long deadline = System.nanoTime() + Duration.ofSeconds(5).toNanos();
        while (tree.stream().anyMatch(ProcessHandle::isAlive) && System.nanoTime() < deadline) Thread.sleep(20);
        assertTrue(tree.stream().noneMatch(ProcessHandle::isAlive), "left behind: "
                + tree.stream().filter(ProcessHandle::isAlive).map(h -> h.pid() + " " + h.info().command().orElse("?")).toList());
    }
}
