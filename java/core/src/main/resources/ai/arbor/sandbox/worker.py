# Arbor sandbox worker: one stateful CPython interpreter that runs model-written cells like a notebook
# kernel. Started by ai.arbor.sandbox.Worker (python3 -I -c <this file>) inside the jail; see
# docs/sandbox.md for the protocol. Everything this process writes is untrusted by the Java side, which
# validates the framing and kills the process on garbage, EOF or a missed deadline.
#
# Channels:
#   fd 0 (moved to a private close-on-exec fd at start, fd 0 becomes /dev/null): requests from Java.
#     first line: JSON configuration; then per cell: "X <nonce> <timeout_ms> <code_len> <stdin_len>\n"
#     followed by code_len bytes of UTF-8 code and stdin_len bytes given to sys.stdin.
#   fd 1 / fd 2: the cell's stdout / stderr, raw (so subprocesses and C extensions are captured too).
#     A cell ends with "\x1eARBOR:<nonce>:end\n" on fd 2, then "\x1eARBOR:<nonce>:<status>[ <ename>]\n"
#     on fd 1. The nonce is fresh per cell, so model code cannot forge an end frame by accident.
# All state lives inside _main() so that user code, which runs in its own __main__ module, does not
# see (or clobber) the worker's names by accident.


def _main():
    import os, sys

    # Bind what the protocol needs before any user code can patch the modules.
    _read, _write, _dup, _dup2, _close, _open = os.read, os.write, os.dup, os.dup2, os.close, os.open
    _getpid, _kill, _exit = os.getpid, os.kill, os._exit
    import fcntl, json, io, ast, signal, types, builtins, traceback, linecache, resource

    def protocol_fd(fd):
        return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)

    REQ = protocol_fd(0)
    OUT = protocol_fd(1)
    ERR = protocol_fd(2)
    NULL = _open('/dev/null', os.O_RDWR | os.O_CLOEXEC)
    _dup2(NULL, 0)
    MAIN_PID = _getpid()

    inbuf = bytearray()
    chan = [REQ]  # where read_line/read_exact read: Java's channel, or (fork server child) the template's pipe

    def read_line(limit):
        while True:
            i = inbuf.find(b'\n')
            if i >= 0:
                line = bytes(inbuf[:i])
                del inbuf[:i + 1]
                return line
            if len(inbuf) > limit:
                _exit(65)
            chunk = _read(chan[0], 65536)
            if not chunk:
                _exit(0)  # Java closed the channel: shut down quietly
            inbuf.extend(chunk)

    def read_exact(n):
        while len(inbuf) < n:
            chunk = _read(chan[0], max(65536, n - len(inbuf)))
            if not chunk:
                _exit(0)
            inbuf.extend(chunk)
        data = bytes(inbuf[:n])
        del inbuf[:n]
        return data

    def write_all(fd, data):
        view = memoryview(data)
        while view:
            n = _write(fd, view)
            view = view[n:]

    cfg = json.loads(read_line(1 << 20))

    # Resource limits: set by the worker on itself before any user code runs; inherited by children.
    def limit(res, value):
        if value and value > 0:
            hard = resource.getrlimit(res)[1]
            if hard != resource.RLIM_INFINITY:
                value = min(value, hard)
            resource.setrlimit(res, (value, value))
    limit(resource.RLIMIT_AS, cfg.get('rlimit_as'))
    limit(resource.RLIMIT_NPROC, cfg.get('rlimit_nproc'))
    limit(resource.RLIMIT_NOFILE, cfg.get('rlimit_nofile'))
    limit(resource.RLIMIT_FSIZE, cfg.get('rlimit_fsize'))
    limit(resource.RLIMIT_CPU, cfg.get('rlimit_cpu'))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if cfg.get('subreaper'):
        # Fallback mode (no pid namespace): orphans of the model's code re-parent to this process, so
        # Java can find and kill them as descendants of the worker.
        try:
            import ctypes
            ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
        except Exception:
            pass
    if hasattr(sys, 'set_int_max_str_digits'):
        sys.set_int_max_str_digits(int(cfg.get('int_max_str_digits', 0)))
    for name in cfg.get('preimport', []):
        __import__(name)

    output_limit = int(cfg.get('max_output_bytes', 1 << 20))
    kill_strays = bool(cfg.get('kill_strays'))

    class OutputLimitExceeded(BaseException):
        """Raised into the cell when it printed more than the output limit (a BaseException so that a
        plain `except Exception` in model code does not swallow it)."""

    class SoftTimeout(BaseException):
        """Raised into the cell by SIGALRM when the soft time limit passes."""

    budget = {'left': output_limit, 'exceeded': False}

    class RawWriter(io.RawIOBase):
        """sys.stdout.buffer: bytes straight to the fd, counted against the output budget."""

        def __init__(self, fd):
            self._fd = fd

        def writable(self):
            return True

        def fileno(self):
            return self._fd

        def write(self, b):
            data = bytes(b)
            n = charge(len(data))
            write_all(self._fd, data[:n])
            if n < len(data):
                raise OutputLimitExceeded('output limit of %d bytes exceeded' % output_limit)
            return len(data)

    def charge(n):
        left = budget['left']
        if n <= left:
            budget['left'] = left - n
            return n
        budget['left'] = 0
        budget['exceeded'] = True
        return left

    class Writer(io.TextIOBase):
        """sys.stdout / sys.stderr: UTF-8 (lone surrogates passed through; Java replaces them), buffered
        until 64 KiB or the end of the cell, counted against the output budget."""

        def __init__(self, fd, name):
            self._fd = fd
            self._name = name
            self._parts = []
            self._size = 0
            self.buffer = RawWriter(fd)

        encoding = 'utf-8'
        errors = 'surrogatepass'

        @property
        def name(self):
            return self._name

        def writable(self):
            return True

        def isatty(self):
            return False

        def fileno(self):
            return self._fd

        def write(self, s):
            if not isinstance(s, str):
                raise TypeError('write() argument must be str, not %s' % type(s).__name__)
            data = s.encode('utf-8', 'surrogatepass')
            n = charge(len(data))
            if n:
                self._parts.append(data[:n] if n < len(data) else data)
                self._size += n
                if self._size >= 65536:
                    self.flush()
            if n < len(data):
                self.flush()
                raise OutputLimitExceeded('output limit of %d bytes exceeded' % output_limit)
            return len(s)

        def flush(self):
            if self._parts:
                data = b''.join(self._parts)
                self._parts = []
                self._size = 0
                write_all(self._fd, data)

        def discard(self):
            self._parts = []
            self._size = 0

    streams = {}

    def flush_streams():
        for w in list(streams.values()):
            try:
                w.flush()
            except Exception:
                w.discard()

    # Flush before fork so a child does not inherit (and later repeat) the parent's buffered output.
    os.register_at_fork(before=flush_streams)

    state = {'in_user': False}
    RETRY_S = 0.05

    def code_objects(code):
        found = {code}
        for c in code.co_consts:
            if isinstance(c, types.CodeType):
                found |= code_objects(c)
        return found
    WORKER_CODE = frozenset(code_objects(sys._getframe().f_code))

    def on_alarm(signum, frame):
        # The timer repeats every RETRY_S after the soft deadline until the cell has ended: an exception
        # raised where Python ignores it (an at-fork hook such as flush_streams, a __del__, a weakref
        # callback) would otherwise be lost and the cell would run on to the hard kill. It is never raised
        # into the worker's own frames (the protocol, the clean-up after the cell): only into the cell.
        if state['in_user'] and (frame is None or frame.f_code not in WORKER_CODE):
            raise SoftTimeout()

    user_main = types.ModuleType('__main__')
    user_main.__dict__['__builtins__'] = builtins
    sys.modules['__main__'] = user_main
    ns = user_main.__dict__
    _repr = builtins.repr
    null_stdin = io.TextIOWrapper(io.BytesIO(b''), encoding='utf-8')
    cell_no = [0]

    def user_frames(tb, filename):
        while tb is not None and tb.tb_frame.f_code.co_filename != filename:
            tb = tb.tb_next
        return tb

    def to_stderr(err, text):
        # The cell may have closed or redirected fd 2: fall back to the private copy.
        try:
            err.flush()
        except Exception:
            err.discard()
        data = text.encode('utf-8', 'backslashreplace')
        try:
            write_all(2, data)
        except OSError:
            write_all(ERR, data)

    def print_exception(err, e, filename):
        try:
            if isinstance(e, SyntaxError):
                lines = traceback.format_exception_only(type(e), e)
            else:
                lines = traceback.format_exception(type(e), e, user_frames(e.__traceback__, filename))
            text = ''.join(lines)
        except BaseException:
            text = '%s (traceback unavailable)\n' % type(e).__name__
        to_stderr(err, text)

    def run_cell(code, timeout_s, stdin_bytes):
        """Runs one cell; returns (status, exception type name)."""
        cell_no[0] += 1
        filename = '<cell-%d>' % cell_no[0]
        out = Writer(1, '<stdout>')
        err = Writer(2, '<stderr>')
        streams['out'], streams['err'] = out, err
        sys.stdout, sys.stderr = out, err
        sys.__stdout__, sys.__stderr__ = out, err
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin_bytes), encoding='utf-8') if stdin_bytes else null_stdin
        signal.signal(signal.SIGALRM, on_alarm)
        budget['left'] = output_limit
        budget['exceeded'] = False
        status, ename = 'ok', ''
        try:
            try:
                linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
                tree = ast.parse(code, filename, 'exec')
                last = None
                if tree.body and isinstance(tree.body[-1], ast.Expr):
                    last = ast.Expression(tree.body.pop().value)
                body = compile(tree, filename, 'exec')
                shown = compile(last, filename, 'eval') if last is not None else None
                state['in_user'] = True
                signal.setitimer(signal.ITIMER_REAL, timeout_s, RETRY_S)
                exec(body, ns)
                if shown is not None:
                    value = eval(shown, ns)
                    if value is not None:
                        ns['_'] = value
                        out.write(_repr(value) + '\n')
            finally:
                state['in_user'] = False
                signal.setitimer(signal.ITIMER_REAL, 0)
        except SoftTimeout:
            status, ename = 'timeout', 'TimeoutError'
            to_stderr(err, 'TimeoutError: the cell exceeded the time limit of %g s and was interrupted; '
                           'variables are kept\n' % timeout_s)
        except OutputLimitExceeded:
            status, ename = 'output_limit', 'OutputLimitExceeded'
        except MemoryError as e:
            status, ename = 'memory', 'MemoryError'
            print_exception(err, e, filename)
        except SystemExit as e:
            if e.code is None or e.code == 0:
                status = 'ok'
            else:
                status, ename = 'error', 'SystemExit'
                to_stderr(err, 'SystemExit: %s\n' % (e.code,))
        except BaseException as e:
            status, ename = 'error', type(e).__name__
            print_exception(err, e, filename)
        if budget['exceeded'] and status in ('ok', 'error', 'output_limit'):
            status, ename = 'output_limit', 'OutputLimitExceeded'
            to_stderr(err, 'OutputLimitExceeded: the cell wrote more than %d bytes of output; the rest was '
                           'dropped, variables are kept\n' % output_limit)
        return status, ename

    signal.signal(signal.SIGALRM, on_alarm)

    def reap_children():
        # Killed children of the worker stay zombies (and count against the process limit) until waited
        # for; orphans are reaped by the jail's init. Bounded: never blocks the protocol for long.
        import time
        deadline = time.monotonic() + 0.2
        while time.monotonic() < deadline:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                time.sleep(0.001)

    # Recycling (PythonSandbox.Builder.recycleWorkers): between sessions the interpreter is reset in
    # place instead of being killed, when nothing the previous session did can outlive the reset. What is
    # checked: no extra thread; builtins and every module loaded at boot still hold the objects they held
    # at boot (names added later are allowed); resource limits unchanged. What is restored: a fresh
    # __main__ namespace, sys.path, os.environ, the working directory, signal handlers, and empty /tmp and
    # scratch directories. Modules first imported during a session stay loaded (documented weakening).
    # _thread, not threading: importing threading costs every forked child of a fork server ~140 page
    # faults in threading's at-fork hook (3-5 ms here), and _thread._count() sees every thread anyway
    import _thread
    boot_builtins = dict(builtins.__dict__)
    boot_modules = {name: (m, dict(vars(m))) for name, m in list(sys.modules.items())
                    if m is not None and name != '__main__'}
    boot_path = list(sys.path)
    boot_environ = dict(os.environ)
    boot_cwd = os.getcwd()
    boot_limits = {r: resource.getrlimit(r) for r in (resource.RLIMIT_AS, resource.RLIMIT_NPROC,
                   resource.RLIMIT_NOFILE, resource.RLIMIT_FSIZE, resource.RLIMIT_CPU, resource.RLIMIT_CORE)}
    boot_signals = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE,
                    signal.SIGCHLD, signal.SIGUSR1, signal.SIGUSR2, signal.SIGHUP)}

    # names the worker itself rebinds per cell (sys's streams) or Python sets on errors
    volatile = {'stdout', 'stderr', 'stdin', '__stdout__', '__stderr__', '__stdin__', 'last_type',
                'last_value', 'last_traceback', 'last_exc', '_'}

    def same_dict(current, snapshot):
        for k, v in snapshot.items():
            if current.get(k, snapshot) is not v and k not in volatile:
                return False
        return True

    def clear_dir(path):
        import shutil
        try:
            entries = os.listdir(path)
        except OSError:
            return
        for e in entries:
            full = os.path.join(path, e)
            try:
                if os.path.isdir(full) and not os.path.islink(full):
                    shutil.rmtree(full, ignore_errors=True)
                else:
                    os.unlink(full)
            except OSError:
                pass

    def reset_interpreter():
        """Returns '' when the interpreter was reset clean, else the reason it must be replaced."""
        if _thread._count() != 0:
            return 'threads'
        if not same_dict(builtins.__dict__, boot_builtins):
            return 'builtins'
        for name, (m, snap) in boot_modules.items():
            if sys.modules.get(name) is not m or not same_dict(vars(m), snap):
                return 'module.' + name
        for r, v in boot_limits.items():
            if resource.getrlimit(r) != v:
                return 'rlimit'
        ns.clear()
        ns['__builtins__'] = builtins
        ns['__name__'] = '__main__'
        sys.modules['__main__'] = user_main
        sys.path[:] = boot_path
        os.environ.clear()
        os.environ.update(boot_environ)
        for sig, h in boot_signals.items():
            try:
                signal.signal(sig, h)
            except (OSError, ValueError, TypeError):
                return 'signals'
        signal.signal(signal.SIGALRM, on_alarm)
        try:
            os.chdir(boot_cwd)
        except OSError:
            return 'cwd'
        # /tmp and /dev/shm are the jail's own tmpfs mounts; in fallback mode they are the host's
        for d in (boot_cwd,) + (('/tmp', '/dev/shm') if kill_strays else ()):
            if d != '/':
                clear_dir(d)
        linecache.cache.clear()
        return ''

    def frame(nonce, word):
        return b'\x1eARBOR:' + nonce + b':' + word + b'\n'

    boot_ns = dict(ns)

    def forget_cells():
        # a fork server's spare ran the template's warm-up cells: its session starts as if nothing had run
        ns.clear()
        ns.update(boot_ns)
        cell_no[0] = 0
        linecache.cache.clear()

    def warm_up_here(code, times):
        # Fork server, before the first fork: the template runs its own warm-up cell (never model code),
        # output to /dev/null, until CPython has specialized the worker's per-cell code (3.11 rewrites a
        # function's bytecode caches during its first runs). Otherwise every child would write those code
        # objects, and fault on their pages, when its first cell runs them.
        saved = sys.stdout, sys.stderr, sys.stdin, sys.__stdout__, sys.__stderr__
        for _ in range(times):
            for fd in (0, 1, 2):
                _dup2(NULL, fd)
            run_cell(code, 5.0, b'')
            flush_streams()
        _dup2(OUT, 1)
        _dup2(ERR, 2)
        sys.stdout, sys.stderr, sys.stdin, sys.__stdout__, sys.__stderr__ = saved
        streams.clear()
        forget_cells()

    if cfg.get('fork_server'):
        fork_server(cfg, frame, run_cell, flush_streams, clear_dir, reap_children, kill_strays,
                    REQ, OUT, ERR, NULL, chan, inbuf, read_line, read_exact, write_all, forget_cells, warm_up_here)
        return

    write_all(ERR, frame(cfg['nonce'].encode(), b'end'))
    write_all(OUT, frame(cfg['nonce'].encode(), b'ready'))

    _booting[0] = False
    while True:
        header = read_line(256).split(b' ')
        if len(header) != 5 or header[0] not in (b'X', b'R'):
            _exit(65)
        nonce = header[1]
        if header[0] == b'R':
            if kill_strays:
                try:
                    _kill(-1, signal.SIGKILL)
                    reap_children()
                except OSError:
                    pass
            why = reset_interpreter()
            write_all(ERR, frame(nonce, b'end'))
            write_all(OUT, frame(nonce, b'ok' if not why else b'error ' + why.encode('ascii', 'replace')[:90].replace(b' ', b'_')))
            continue
        timeout_s = int(header[2]) / 1000.0
        code_len, stdin_len = int(header[3]), int(header[4])
        code = read_exact(code_len).decode('utf-8', 'replace')
        stdin_bytes = read_exact(stdin_len)
        _dup2(OUT, 1)
        _dup2(ERR, 2)
        _dup2(NULL, 0)
        status, ename = run_cell(code, timeout_s, stdin_bytes)
        if _getpid() != MAIN_PID:
            # A child forked by the cell has finished it: it must not speak the protocol.
            flush_streams()
            _exit(0)
        flush_streams()
        if kill_strays:
            # Jail mode only (own pid namespace): end every process the cell left behind; threads of this
            # interpreter are kept.
            try:
                _kill(-1, signal.SIGKILL)
                reap_children()
            except OSError:
                pass
        tail = status.encode() + ((b' ' + ename.encode('ascii', 'replace')[:100]) if ename else b'')
        write_all(ERR, frame(nonce, b'end'))
        write_all(OUT, frame(nonce, tail))



def fork_server(cfg, frame, run_cell, flush_streams, clear_dir, reap_children, kill_strays,
                REQ, OUT, ERR, NULL, chan, inbuf, read_line, read_exact, write_all, forget_cells, warm_up_here):
    """Fork server (PythonSandbox.Builder.forkServer): this process is a template that never runs model
    code. A session's first cell forks a child from it; the child is the session's interpreter (fresh
    namespace, same pre-imported modules) and runs its cells until the session ends, then it and everything
    it started are killed and the scratch directories emptied. The template stays between Java and the
    child: it reads each request header, moves the payload to the child with splice() (model code and
    stdin never enter the template's memory, so a later child cannot find them in what it inherits),
    receives the child's status on a private pipe and writes the end frames itself. The cell's output goes
    from the child straight to Java on fds 1 and 2. A child that dies or overruns its time is reported in
    a frame (`died <how>`, `killed`) and the template carries on; see docs/sandbox.md."""
    import os, sys, signal, select, time, re
    _read, _write, _exit, _kill = os.read, os.write, os._exit, os.kill
    grace_s = int(cfg.get('grace_ms', 1000)) / 1000.0
    jail = bool(kill_strays)
    STATUS = re.compile(rb'(ok|error|timeout|memory|output_limit)( [A-Za-z_][A-Za-z0-9_.]{0,99})?')
    me = os.getpid()
    scratch = os.getcwd()
    dirs = [scratch] + (['/tmp', '/dev/shm'] if jail else [])
    modes = {}
    for d in dirs:
        try:
            modes[d] = os.stat(d).st_mode & 0o7777
        except OSError:
            pass
    # fork() copies only the calling thread: a template with other threads (a library that starts a pool
    # at import) would hand the child locks that nobody releases.
    if len(os.listdir('/proc/self/task')) != 1:
        raise RuntimeError('the fork server needs a single-threaded template, but after the pre-imports it has %d '
                           'threads (a pre-imported module started threads)' % len(os.listdir('/proc/self/task')))

    def read_header():
        # byte by byte: nothing of the payload that follows may be read into this process
        line = bytearray()
        while True:
            b = _read(REQ, 1)
            if not b:
                _exit(0)
            if b == b'\n':
                return bytes(line)
            line += b
            if len(line) > 256:
                _exit(65)

    scrub = bytearray(65536)

    def discard(n):
        # the child is gone: swallow the rest of the payload (zeroed after use)
        view = memoryview(scrub)
        while n > 0:
            k = os.readv(REQ, [view[:min(n, len(scrub))]])
            if k == 0:
                _exit(0)
            n -= k
        scrub[:] = bytes(len(scrub))

    def forward(n, dst):
        """Moves n payload bytes from Java to the child; False when the child stopped reading."""
        while n > 0:
            try:
                k = os.splice(REQ, dst, min(n, 1 << 20))
            except BrokenPipeError:
                discard(n)
                return False
            except OSError:
                # no splice here (not a pipe): copy through a buffer that is zeroed afterwards
                view = memoryview(scrub)
                while n > 0:
                    k = os.readv(REQ, [view[:min(n, len(scrub))]])
                    if k == 0:
                        _exit(0)
                    try:
                        write_all(dst, view[:k])
                    except OSError:
                        n -= k
                        scrub[:] = bytes(len(scrub))
                        discard(n)
                        return False
                    n -= k
                scrub[:] = bytes(len(scrub))
                return True
            if k == 0:
                _exit(0)
            n -= k
        return True

    def alive_pids():
        """Processes of the jail other than its init and this template (zombies excluded)."""
        out = []
        for name in os.listdir('/proc'):
            if not name.isdigit():
                continue
            pid = int(name)
            if pid == 1 or pid == me:
                continue
            try:
                with open('/proc/%d/stat' % pid, 'rb') as f:
                    st = f.read()
                if st[st.rindex(b')') + 2:st.rindex(b')') + 3] in (b'Z', b'X'):
                    continue
            except (OSError, ValueError):
                continue
            out.append(pid)
        return out

    def reap_orphans():
        # the template is the jail's init: processes orphaned by a dead session child come to it
        while True:
            try:
                pid, st = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            for c in [state.get('child')] + state.get('spares', []):
                if c is not None and pid == c['pid'] and c['status'] is None:
                    c['status'] = st

    def kill_swarm(spare):
        """After a cell: SIGKILL to every other process of the jail, in passes until one finds no new pid
        (a killed process forks no more); not waited for, like the plain worker's kill(-1), so that a
        swarm on a loaded machine cannot keep the end frame past Java's hard limit. Its remains are killed
        and waited for at the end of the session, before anything of the next session runs."""
        me1 = (1, me) + tuple(spare)
        killed = set()
        quiet = 0
        for _ in range(200):
            new = False
            for name in os.listdir('/proc'):
                if not name.isdigit():
                    continue
                pid = int(name)
                if pid in me1 or pid in killed:
                    continue
                killed.add(pid)
                new = True
                try:
                    _kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            quiet = 0 if new else quiet + 1
            if quiet >= 2:
                return
            time.sleep(0.0002)

    def kill_others(spare):
        # a swarm forks while we kill: repeat until a pass finds nothing (bounded)
        for _ in range(1000):
            victims = [p for p in alive_pids() if p not in spare]
            if not victims:
                return
            for p in victims:
                try:
                    _kill(p, signal.SIGKILL)
                except OSError:
                    pass
            # strays are the session child's children (it is a subreaper and reaps them before its next
            # cell), or the template's once that child is gone
            if state.get('child') is None or state['child']['status'] is not None:
                reap_orphans()
            time.sleep(0.0005)

    def children():
        kids = []
        try:
            for tid in os.listdir('/proc/self/task'):
                with open('/proc/self/task/%s/children' % tid) as f:
                    kids += [int(x) for x in f.read().split()]
        except OSError:
            pass
        return kids

    def kill_descendants(spare):
        # fallback mode (no pid namespace): this process is a subreaper, so every orphan of the session
        # becomes its child; kill children (but the spares) until there are none
        for _ in range(1000):
            kids = [k for k in children() if k not in spare]
            if not kids:
                return
            for p in kids:
                try:
                    _kill(p, signal.SIGKILL)
                except OSError:
                    pass
            for p in kids:
                try:
                    os.waitpid(p, 0)
                except ChildProcessError:
                    pass

    def wipe(path):
        # like clear_dir, but also through directories the cell made unreadable
        try:
            os.chmod(path, 0o700)
        except OSError:
            pass
        try:
            entries = list(os.scandir(path))
        except OSError:
            return
        for e in entries:
            try:
                if e.is_dir(follow_symlinks=False):
                    wipe(e.path)
                    os.rmdir(e.path)
                else:
                    os.unlink(e.path)
            except OSError:
                pass

    def clean_dirs():
        for d in dirs:
            wipe(d)
            try:
                os.chmod(d, modes.get(d, 0o755))
            except OSError:
                pass
            try:
                if os.listdir(d):
                    _exit(72)  # cannot guarantee the next session an empty scratch: Java replaces this worker
            except OSError:
                _exit(72)

    state = {'child': None, 'spares': [], 'warm_failures': 0}
    SPARES = max(0, int(cfg.get('fork_spares', 2)))
    # Warm-up cell a new spare runs before it waits for its session (see warm()): an ordinary cell that
    # prints and shows a value. (A second one that raises would pre-fault the traceback path too, ~200
    # more pages, but every session would pay that CPU, also those whose cells do not raise.)
    WARM_UP = [b'_w = [i * i for i in range(10)]\nprint(_w[-1], len(_w), sep=", ")\n_w[0]']

    def spare_pids():
        return tuple(c['pid'] for c in state['spares'])

    def close_fds(c):
        for fd in (c['req'], c['st']) + ((c['pidfd'],) if c['pidfd'] is not None else ()):
            try:
                os.close(fd)
            except OSError:
                pass

    def end_child():
        c = state['child']
        state['child'] = None
        if c is not None:
            close_fds(c)
        if jail:
            kill_others(spare_pids())  # everything but this template (pid 1) and the spares
            if c is not None and c['status'] is None:
                try:
                    os.waitpid(c['pid'], 0)
                except ChildProcessError:
                    pass
            reap_orphans()
        else:
            if c is not None:
                try:
                    _kill(c['pid'], signal.SIGKILL)
                except OSError:
                    pass
            kill_descendants(spare_pids())

    def spawn():
        """Forks a spare interpreter; it waits for its session's first cell."""
        others = []
        for o in ([state['child']] if state['child'] is not None else []) + state['spares']:
            others += [o['req'], o['st']] + ([o['pidfd']] if o['pidfd'] is not None else [])
        req_r, req_w = os.pipe()
        st_r, st_w = os.pipe()
        for fd in (req_w, st_r):
            os.set_inheritable(fd, False)
        pid = os.fork()
        if pid == 0:
            try:
                os.close(req_w)
                os.close(st_r)
                os.close(REQ)  # the child never sees Java's request channel
                # nor the template's ends of the other interpreters' pipes (it could write cells into a
                # later session's interpreter)
                for fd in others:
                    os.close(fd)
                # orphans of the session's processes become the child's children, not the template's: the
                # template's only child is then the session's interpreter (what Java's stray stopper spares)
                libc.prctl(36, 1, 0, 0, 0)
                child(req_r, st_w)
            finally:
                _exit(70)
        os.close(req_r)
        os.close(st_w)
        pidfd = None
        try:
            pidfd = os.pidfd_open(pid)
        except (AttributeError, OSError):
            pass
        return {'pid': pid, 'req': req_w, 'st': st_r, 'pidfd': pidfd, 'status': None, 'warm': False}

    def warm(c):
        """Runs the warm-up cells in a new spare through the ordinary request path, before its session.
        Page faults are expensive (13-40 us each on a virtual machine with shadow page tables), and after a
        fork both processes fault on every page they write: a cold spare's first cell wrote ~150 pages, the
        template's request path after each fork another ~80 (most of a first cell's 9 ms, measured). Running
        the same paths here, off the request's critical path, makes those pages private to each process
        beforehand (first cell 8.8 -> 3.5 ms; a second cell takes 1.1 ms). False when the spare misbehaved
        or was too slow (it is then thrown away; after 3 such spares the template stops warming)."""
        c['warm'] = True
        for code in WARM_UP:
            try:
                write_all(c['req'], b'W 0 5000 %d 0\n' % len(code) + code)
            except OSError:
                return False
            # bounded by half the grace: a request Java sends meanwhile waits for this, and its hard limit runs
            word, _ = await_status(c, time.monotonic() + max(0.2, grace_s / 2))
            if word is None or word.split(b' ')[0] not in (b'ok', b'error'):
                return False
        if jail:
            kill_swarm(spare_pids())  # the template's after-cell path too (nothing to kill between sessions)
        return True

    def discard_spare(c):
        try:
            _kill(c['pid'], signal.SIGKILL)
        except OSError:
            pass
        close_fds(c)
        if c['status'] is None:
            try:
                os.waitpid(c['pid'], 0)
            except ChildProcessError:
                pass

    def take_spare():
        """A spare that nothing has touched (alive, not stopped), else a new fork."""
        reap_orphans()
        while state['spares']:
            c = state['spares'].pop(0)
            try:
                with open('/proc/%d/stat' % c['pid'], 'rb') as f:
                    st = f.read()
                ok = c['status'] is None and st[st.rindex(b')') + 2:st.rindex(b')') + 3] in (b'S', b'R')
            except (OSError, ValueError):
                ok = False
            if ok:
                return c
            # killed or stopped by an earlier session's code: thrown away
            discard_spare(c)
        return spawn()

    def child(req_fd, st_fd):
        chan[0] = req_fd
        inbuf.clear()
        mine = os.getpid()
        first = [True]
        # `random` reseeds itself at fork; numpy's legacy global generator does not
        np = sys.modules.get('numpy')
        if np is not None:
            try:
                np.random.seed()
            except Exception:
                pass
        while True:
            header = read_line(256).split(b' ')
            if len(header) == 5 and header[0] == b'W' and first[0]:
                # the template's warm-up cell (its own fixed code, never the model's), output to /dev/null
                code = read_exact(int(header[3])).decode('utf-8')
                for fd in (0, 1, 2):
                    os.dup2(NULL, fd)
                status, _ = run_cell(code, int(header[2]) / 1000.0, b'')
                flush_streams()
                forget_cells()
                write_all(st_fd, status.encode() + b'\n')
                continue
            if len(header) != 5 or header[0] != b'X':
                _exit(65)
            if first[0]:
                # A spare is not dumpable (inherited from the template) until its session starts: code of
                # another session cannot trace it or write its memory. From here on it is this session's.
                first[0] = False
                libc.prctl(4, 1, 0, 0, 0)
            # strays of the previous cell were killed by the template; their zombies are ours to reap
            # (they count against the process limit until then)
            try:
                while os.waitpid(-1, os.WNOHANG)[0] > 0:
                    pass
            except ChildProcessError:
                pass
            timeout_s = int(header[2]) / 1000.0
            code = read_exact(int(header[3])).decode('utf-8', 'replace')
            stdin_bytes = read_exact(int(header[4]))
            os.dup2(OUT, 1)
            os.dup2(ERR, 2)
            os.dup2(NULL, 0)
            status, ename = run_cell(code, timeout_s, stdin_bytes)
            if os.getpid() != mine:
                flush_streams()  # a process forked by the cell finished it: it must not report
                _exit(0)
            flush_streams()
            tail = status.encode() + ((b' ' + ename.encode('ascii', 'replace')[:100]) if ename else b'')
            write_all(st_fd, tail + b'\n')

    def exited(c):
        """Reaps the child if it has exited (its wait status is kept); True once it has."""
        if c['status'] is None:
            try:
                pid, st = os.waitpid(c['pid'], os.WNOHANG)
            except ChildProcessError:
                pid, st = c['pid'], 70 << 8
            if pid != 0:
                c['status'] = st
        return c['status'] is not None

    def how_it_ended(c):
        """'died signal_N' / 'died code_N' once the child has exited (reaped here)."""
        if c['status'] is None:
            try:
                pid, st = os.waitpid(c['pid'], 0)
            except ChildProcessError:
                st = 70 << 8
            c['status'] = st
        st = c['status']
        if os.WIFSIGNALED(st):
            return b'died signal_%d' % os.WTERMSIG(st)
        return b'died code_%d' % (os.WEXITSTATUS(st) if os.WIFEXITED(st) else 70)

    def await_status(c, deadline):
        buf = b''
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None, 'late'
            fds = [c['st']] + ([c['pidfd']] if c['pidfd'] is not None else [])
            r, _, _ = select.select(fds, [], [], left if c['pidfd'] is not None else min(left, 0.02))
            if c['st'] in r:
                chunk = _read(c['st'], 256)
                if not chunk:
                    return None, 'eof'
                buf += chunk
                if b'\n' in buf:
                    line, rest = buf.split(b'\n', 1)
                    return (line, None) if not rest and STATUS.fullmatch(line) else (None, 'garbage')
                if len(buf) > 128:
                    return None, 'garbage'
            elif r or (c['pidfd'] is None and exited(c)):
                return None, 'exited'

    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    if not jail:
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    # Not dumpable: a session's code (same uid) cannot ptrace the template, nor read or write its memory
    # through /proc/<pid>/mem or process_vm_writev, so it cannot plant anything in the later sessions the
    # template forks. Children are made dumpable again (a normal process to the cell).
    if libc.prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE
        raise RuntimeError('prctl(PR_SET_DUMPABLE, 0) failed')
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    clean_dirs()
    # Objects of the template are never collected in a child: without this, a child's first collection
    # writes to every object's header and copies the template's whole heap page by page.
    import gc
    for code in WARM_UP:
        warm_up_here(code.decode(), 50)
    gc.collect()
    gc.freeze()
    write_all(ERR, frame(cfg['nonce'].encode(), b'end'))
    write_all(OUT, frame(cfg['nonce'].encode(), b'ready'))
    _booting[0] = False
    while True:
        # Sessions' interpreters are forked ahead (SPARES of them), while the template would otherwise wait
        # for Java: a fork and the new process's first time slice cost 5-30 ms on a loaded 2-core machine
        # (the scheduler queues a new process behind the busy ones), which the session's first call would
        # otherwise pay. Each is forked from the clean template after a clean-up, exactly as it would be on
        # demand, and waits for its first cell.
        while state['child'] is None and len(state['spares']) < SPARES:  # between sessions only
            state['spares'].append(spawn())
        # warmed after the last fork: the warm-up also pre-faults the template's own request path
        for c in list(state['spares']):
            if not c['warm'] and state['warm_failures'] < 3 and not warm(c):
                state['warm_failures'] += 1  # e.g. a memory limit too small for the warm-up: stop trying
                state['spares'].remove(c)
                discard_spare(c)
        line = read_header()
        header = line.split(b' ')
        if len(header) != 5 or header[0] not in (b'X', b'E') or not all(h.isdigit() for h in header[2:]):
            _exit(65)
        nonce = header[1]
        if header[0] == b'E':
            # Answered only once every process of the session is gone: output a dying stray writes after
            # the frame would be taken by Java as the next session's (SandboxServer ends sessions after
            # its response, so this wait is not the client's).
            end_child()
            clean_dirs()
            write_all(ERR, frame(nonce, b'end'))
            write_all(OUT, frame(nonce, b'ok'))
            continue
        timeout_s = int(header[2]) / 1000.0
        n = int(header[3]) + int(header[4])
        if state['child'] is None:
            state['child'] = take_spare()
        c = state['child']
        try:
            write_all(c['req'], line + b'\n')
            sent = forward(n, c['req'])
        except OSError:
            discard(n)
            sent = False
        # The template's own deadline comes shortly before Java's hard one (soft + grace, from Java's clock):
        # late enough that an interpreter still finishing its interrupted cell on a loaded machine makes
        # it, early enough that the frames reach Java before it kills the whole template.
        late = timeout_s + grace_s - max(0.1, grace_s / 5)
        word, why = (None, 'exited') if not sent else await_status(c, time.monotonic() + late)
        if word is None:
            if why == 'eof':
                # the status pipe closes when the child exits (or when the cell closed it): which one?
                limit = time.monotonic() + 0.1
                while time.monotonic() < limit and not exited(c):
                    time.sleep(0.001)
                why = 'exited' if exited(c) else 'broken'
            if why == 'late':
                # the cell ignored its soft timeout: kill it here rather than have Java kill the template
                tail = b'killed'
            elif why == 'exited':
                tail = how_it_ended(c)
            else:
                tail = b'died code_70'  # the cell broke its status channel
            end_child()
        else:
            tail = word
            if word.startswith(b'memory'):
                end_child()  # an interpreter that ran out of memory may be inconsistent
            elif jail:
                kill_swarm((c['pid'],) + spare_pids())  # strays of the cell; the interpreters stay
        write_all(ERR, frame(nonce, b'end'))
        write_all(OUT, frame(nonce, tail))

_booting = [True]
try:
    _main()
except BaseException:
    import os as _os
    if _booting[0]:  # configuration or pre-import failure: tell Java why (it shows the text)
        import traceback as _tb
        _tb.print_exc()
        _os._exit(71)
    # The worker's own machinery failed (e.g. model code closed a protocol fd): die; Java respawns.
    _os._exit(70)
