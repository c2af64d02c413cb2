package ai.arbor.reward;

import ai.arbor.reward.Verdict.Rule;
import ai.arbor.sandbox.ExecResult;
import ai.arbor.sandbox.SandboxSession;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Base64;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * The symbolic stage of {@link MathGrader}: sympy's {@code simplify(a - b) == 0}, run through a
 * {@link SandboxSession} (the jailed Python pool), bounded by a timeout.
 *
 * <p>Safety: model text never becomes code. Both sides are parsed in Java ({@link ExprParser}) and sent
 * as a JSON prefix tree ({@code ["add", ["var","x"], ["num","1","1"]]}), base64-encoded, inside a fixed
 * script; Python rebuilds the expression with sympy constructors from a fixed table
 * ({@code Add, Mul, Pow, Rational, Symbol, sqrt, sin, …}) — no {@code eval}, {@code sympify} or
 * {@code parse_expr} of strings. (sympy's {@code parse_latex} would need the antlr4 runtime, which
 * Debian's python3 lacks; the Java parser replaces it.) Integers travel in hexadecimal, so Python's
 * 4300-digit {@code int(str)} limit never applies.
 *
 * <p>Timeout: the script arms {@code SIGALRM} for {@code timeout} when the session has no timer of its
 * own; Java waits {@code 2·timeout + grace} (grace 5 s by default) for the round trip. After a Java-side timeout the checker
 * answers "busy" (unparseable) until the stuck call returns, instead of queueing behind it. A sandbox
 * failure gives an unparseable verdict, never an exception. The checker does not own the session;
 * {@link #close()} stops only its own waiting thread.
 */
public final class SympyChecker implements AutoCloseable {
    /** Trees larger than this are not sent. */
    static final int MAX_NODES = 2000;
    static final String MARK = "ARBOR_SYMBOLIC";

    private final SandboxSession session;
    private final Duration timeout;
    private final Duration grace;
    private final ExecutorService worker;
    /** True while a call is inside {@code session.execute} (a cancelled future may still be running there). */
    private final AtomicBoolean running = new AtomicBoolean();

    /**
     * @param session a Python session with sympy (not closed by this checker)
     * @param timeout bound on one sympy check (0.1 s … 10 min); Java waits {@code 2·timeout + 5 s}
     */
    public SympyChecker(SandboxSession session, Duration timeout) {
        this(session, timeout, Duration.ofSeconds(5));
    }

    /**
     * @param session a Python session with sympy (not closed by this checker)
     * @param timeout bound on one sympy check (0.1 s … 10 min)
     * @param grace   extra time Java waits for the sandbox round trip (interpreter start, import of sympy):
     *                the wait is {@code 2·timeout + grace} (0 … 10 min)
     */
    public SympyChecker(SandboxSession session, Duration timeout, Duration grace) {
        if (session == null) throw new IllegalArgumentException("session must not be null");
        if (timeout == null || timeout.toMillis() < 100 || timeout.toMinutes() > 10) {
            throw new IllegalArgumentException("timeout must be in [100 ms, 10 min], got " + timeout);
        }
        if (grace == null || grace.isNegative() || grace.toMinutes() > 10) {
            throw new IllegalArgumentException("grace must be in [0, 10 min], got " + grace);
        }
        this.session = session;
        this.timeout = timeout;
        this.grace = grace;
        this.worker = Executors.newSingleThreadExecutor(r -> {
            Thread t = new Thread(r, "arbor-sympy-checker");
            t.setDaemon(true);
            return t;
        });
    }

    public Duration timeout() {
        return timeout;
    }

    /** Parses two LaTeX expressions as the grader does and checks them; unparseable if either does not parse. */
    public Verdict check(String latexA, String latexB) {
        if (latexA == null || latexB == null) throw new IllegalArgumentException("expressions must not be null");
        ExprParser.Result a = ExprParser.parse(LatexNormalizer.normalize(latexA).tokens());
        if (!a.ok()) return Verdict.unparseable(Rule.SYMBOLIC, "cannot read first expression: " + a.error());
        ExprParser.Result b = ExprParser.parse(LatexNormalizer.normalize(latexB).tokens());
        if (!b.ok()) return Verdict.unparseable(Rule.SYMBOLIC, "cannot read second expression: " + b.error());
        return check(a.expr(), b.expr());
    }

    synchronized Verdict check(Expr a, Expr b) {
        if (a.size() + b.size() > MAX_NODES) return Verdict.unparseable(Rule.SYMBOLIC, "expressions too large for the symbolic check");
        if (Expr.any(a, SympyChecker::expensive) || Expr.any(b, SympyChecker::expensive)) {
            return Verdict.unparseable(Rule.SYMBOLIC, "numbers too large for the symbolic check");
        }
        if (running.get()) return Verdict.unparseable(Rule.SYMBOLIC, "sandbox busy after an earlier timeout");
        String code = script(json(a), json(b), timeout.toMillis() / 1000.0);
        long waitMs = 2 * timeout.toMillis() + grace.toMillis();
        running.set(true);
        Future<ExecResult> pending = worker.submit(() -> {
            try {
                return session.execute(code);
            } finally {
                running.set(false);
            }
        });
        ExecResult r;
        try {
            r = pending.get(waitMs, TimeUnit.MILLISECONDS);
        } catch (TimeoutException e) {
            // the call may stay inside execute() (a sandbox may not honour interrupts): later checks say "busy"
            pending.cancel(true);
            return Verdict.unparseable(Rule.SYMBOLIC, "timed out after " + waitMs + " ms");
        } catch (ExecutionException e) {
            return Verdict.unparseable(Rule.SYMBOLIC, "sandbox failed: " + e.getCause());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return Verdict.unparseable(Rule.SYMBOLIC, "interrupted");
        }
        return interpret(r);
    }

    /**
     * sympy evaluates integer powers and factorials eagerly, in C, where no alarm interrupts it:
     * {@code 2^{2^{100}}} would hang the worker. Such nodes are not sent.
     */
    static boolean expensive(Expr e) {
        if (e instanceof Expr.Pow p) {
            BigRational ex = p.exponent().exact();
            BigRational base = p.base().exact();
            if (ex == null || base == null) return false;
            double bits = Math.abs(ex.doubleValue()) * Math.max(1, Math.max(base.num.bitLength(), base.den.bitLength()));
            return bits > (1 << 20);
        }
        if (e instanceof Expr.Fn f && (f.name().equals("factorial") || f.name().equals("binom"))) {
            BigRational n = f.args().get(0).exact();
            return n != null && Math.abs(n.doubleValue()) > 20000;
        }
        return false;
    }

    static Verdict interpret(ExecResult r) {
        if (r == null) return Verdict.unparseable(Rule.SYMBOLIC, "sandbox returned nothing");
        String line = null;
        for (String l : r.stdout().split("\n")) if (l.startsWith(MARK + " ")) line = l.substring(MARK.length() + 1).strip();
        if (line == null) {
            String err = r.stderr().strip();
            if (err.length() > 200) err = err.substring(err.length() - 200);
            return Verdict.unparseable(Rule.SYMBOLIC, "sandbox " + r.status() + (err.isEmpty() ? "" : ": " + err));
        }
        return switch (line) {
            case "EQUAL" -> Verdict.equal(Rule.SYMBOLIC, "sympy: simplify(a - b) == 0");
            case "NOT_EQUAL" -> Verdict.notEqual(Rule.SYMBOLIC, "sympy: simplify(a - b) != 0");
            case "TIMEOUT" -> Verdict.unparseable(Rule.SYMBOLIC, "sympy timed out");
            default -> Verdict.unparseable(Rule.SYMBOLIC, "sympy: " + line);
        };
    }

    static String json(Expr e) {
        StringBuilder b = new StringBuilder();
        e.json(b);
        return b.toString();
    }

    /**
     * The fixed script with the two trees as base64 literals (only {@code [A-Za-z0-9+/=]} is spliced in).
     * Names start with {@code _arbor_} so a shared session's variables are not disturbed.
     */
    static String script(String jsonA, String jsonB, double timeoutSeconds) {
        String a = Base64.getEncoder().encodeToString(jsonA.getBytes(StandardCharsets.UTF_8));
        String b = Base64.getEncoder().encodeToString(jsonB.getBytes(StandardCharsets.UTF_8));
        return TEMPLATE.replace("@A@", a).replace("@B@", b).replace("@T@", String.format(java.util.Locale.ROOT, "%.3f", timeoutSeconds));
    }

    private static final String TEMPLATE = """
            import base64 as _arbor_b64, json as _arbor_json, signal as _arbor_signal
            import sympy as _arbor_sp
            def _arbor_check():
                sp = _arbor_sp
                def root(x, n):
                    if x.is_number and x.is_extended_negative and n.is_integer and n.is_odd:
                        return sp.real_root(x, n)
                    return sp.root(x, n)
                F = {"sqrt": sp.sqrt, "root": root, "exp": sp.exp, "log": sp.log, "sin": sp.sin, "cos": sp.cos,
                     "tan": sp.tan, "cot": sp.cot, "sec": sp.sec, "csc": sp.csc, "asin": sp.asin, "acos": sp.acos,
                     "atan": sp.atan, "sinh": sp.sinh, "cosh": sp.cosh, "tanh": sp.tanh, "abs": sp.Abs,
                     "floor": sp.floor, "ceil": sp.ceiling, "factorial": sp.factorial, "binom": sp.binomial}
                C = {"pi": sp.pi, "e": sp.E, "i": sp.I, "infty": sp.oo}
                def build(n, depth=0):
                    if depth > 200 or not isinstance(n, list) or not n:
                        raise ValueError("bad tree")
                    k = n[0]
                    if k == "num":
                        return sp.Rational(int(n[1], 16), int(n[2], 16))
                    if k == "const":
                        return C[n[1]]
                    if k == "var":
                        return sp.Symbol(str(n[1]))
                    if k == "fn":
                        return F[n[1]](*[build(x, depth + 1) for x in n[2:]])
                    a = [build(x, depth + 1) for x in n[1:]]
                    if k == "add":
                        return sp.Add(*a)
                    if k == "mul":
                        return sp.Mul(*a)
                    if k == "neg":
                        return -a[0]
                    if k == "div":
                        return a[0] / a[1]
                    if k == "pow":
                        return sp.Pow(a[0], a[1])
                    raise ValueError("bad node")
                a = build(_arbor_json.loads(_arbor_b64.b64decode("@A@").decode()))
                b = build(_arbor_json.loads(_arbor_b64.b64decode("@B@").decode()))
                return sp.simplify(a - b) == 0
            class _ArborTimeout(Exception):
                pass
            def _arbor_alarm(signum, frame):
                raise _ArborTimeout()
            _arbor_armed = False
            try:
                if _arbor_signal.getitimer(_arbor_signal.ITIMER_REAL)[0] == 0:
                    _arbor_old = _arbor_signal.signal(_arbor_signal.SIGALRM, _arbor_alarm)
                    _arbor_signal.setitimer(_arbor_signal.ITIMER_REAL, @T@)
                    _arbor_armed = True
            except Exception:
                pass
            try:
                print("ARBOR_SYMBOLIC", "EQUAL" if _arbor_check() else "NOT_EQUAL")
            except _ArborTimeout:
                print("ARBOR_SYMBOLIC TIMEOUT")
            except Exception as _arbor_e:
                print("ARBOR_SYMBOLIC ERROR", type(_arbor_e).__name__)
            finally:
                if _arbor_armed:
                    _arbor_signal.setitimer(_arbor_signal.ITIMER_REAL, 0)
                    _arbor_signal.signal(_arbor_signal.SIGALRM, _arbor_old)
            """;

    /** Stops the waiting thread (the session stays open: its owner closes it). */
    @Override
    public void close() {
        worker.shutdownNow();
    }
}
