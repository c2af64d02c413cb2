package ai.arbor.reward;

import java.math.BigInteger;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * A parsed scalar answer ({@link ExprParser}). Three readings of the same tree: {@link #exact()} (rational
 * arithmetic, null when the value is not a checked rational), {@link #eval(Map)} (complex doubles at a
 * point) and {@link #json(StringBuilder)} (a prefix-form tree that the symbolic check rebuilds with sympy
 * constructors — no model text is ever evaluated as code).
 */
sealed interface Expr {

    /** The exact rational value, or null (not rational, not checked, or too large). */
    BigRational exact();

    /** The value with {@code env} giving the free variables; may be non-finite. */
    Complex eval(Map<String, Complex> env);

    /** Adds the free variables' names to {@code out}. */
    void vars(Set<String> out);

    /** True when a decimal literal ({@code 0.33}, {@code 1.5e3}) occurs: the value may be a rounding. */
    boolean hasDecimal();

    /** Appends the JSON prefix form: {@code ["add", a, b]}, {@code ["num", "5", "2"]} (hex numerator, denominator), … */
    void json(StringBuilder b);

    /** Number of nodes (the symbolic check refuses very large trees). */
    int size();

    /** Direct sub-expressions. */
    List<Expr> children();

    /** True when {@code test} holds for this node or any node below it. */
    static boolean any(Expr e, java.util.function.Predicate<Expr> test) {
        if (test.test(e)) return true;
        for (Expr c : e.children()) if (any(c, test)) return true;
        return false;
    }

    static void jsonString(StringBuilder b, String s) {
        b.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20 || c > 0x7e) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        b.append('"');
    }

    record Num(BigRational value, String literal, boolean decimal) implements Expr {
        public BigRational exact() {
            return value;
        }

        public Complex eval(Map<String, Complex> env) {
            return Complex.real(value.doubleValue());
        }

        public void vars(Set<String> out) {
        }

        public boolean hasDecimal() {
            return decimal;
        }

        public void json(StringBuilder b) {
            b.append("[\"num\",");
            jsonString(b, value.num.toString(16)); // hex: Python's int(str) has a 4300-digit limit for base 10
            b.append(',');
            jsonString(b, value.den.toString(16));
            b.append(']');
        }

        public List<Expr> children() {
            return List.of();
        }

        public int size() {
            return 1;
        }
    }

    /** {@code pi}, {@code e}, {@code i}, {@code infty}. */
    record Const(String name) implements Expr {
        public BigRational exact() {
            return null;
        }

        public Complex eval(Map<String, Complex> env) {
            return switch (name) {
                case "pi" -> Complex.real(Math.PI);
                case "e" -> Complex.real(Math.E);
                case "i" -> Complex.I;
                default -> Complex.real(Double.POSITIVE_INFINITY);
            };
        }

        public void vars(Set<String> out) {
        }

        public boolean hasDecimal() {
            return false;
        }

        public void json(StringBuilder b) {
            b.append("[\"const\",");
            jsonString(b, name);
            b.append(']');
        }

        public List<Expr> children() {
            return List.of();
        }

        public int size() {
            return 1;
        }
    }

    record Var(String name) implements Expr {
        public BigRational exact() {
            return null;
        }

        public Complex eval(Map<String, Complex> env) {
            Complex v = env.get(name);
            return v == null ? Complex.NaN : v;
        }

        public void vars(Set<String> out) {
            out.add(name);
        }

        public boolean hasDecimal() {
            return false;
        }

        public void json(StringBuilder b) {
            b.append("[\"var\",");
            jsonString(b, name);
            b.append(']');
        }

        public List<Expr> children() {
            return List.of();
        }

        public int size() {
            return 1;
        }
    }

    record Neg(Expr e) implements Expr {
        public BigRational exact() {
            BigRational v = e.exact();
            return v == null ? null : v.negate();
        }

        public Complex eval(Map<String, Complex> env) {
            return e.eval(env).negate();
        }

        public void vars(Set<String> out) {
            e.vars(out);
        }

        public boolean hasDecimal() {
            return e.hasDecimal();
        }

        public void json(StringBuilder b) {
            b.append("[\"neg\",");
            e.json(b);
            b.append(']');
        }

        public List<Expr> children() {
            return List.of(e);
        }

        public int size() {
            return 1 + e.size();
        }
    }

    /** n-ary sum or product. */
    record Nary(boolean product, List<Expr> args) implements Expr {
        public BigRational exact() {
            BigRational acc = product ? BigRational.ONE : BigRational.ZERO;
            for (Expr a : args) {
                BigRational v = a.exact();
                if (v == null) return null;
                acc = product ? acc.multiply(v) : acc.add(v);
                if (acc == null) return null;
            }
            return acc;
        }

        public Complex eval(Map<String, Complex> env) {
            Complex acc = product ? Complex.ONE : Complex.ZERO;
            for (Expr a : args) acc = product ? acc.mul(a.eval(env)) : acc.add(a.eval(env));
            return acc;
        }

        public void vars(Set<String> out) {
            for (Expr a : args) a.vars(out);
        }

        public boolean hasDecimal() {
            for (Expr a : args) if (a.hasDecimal()) return true;
            return false;
        }

        public void json(StringBuilder b) {
            b.append(product ? "[\"mul\"" : "[\"add\"");
            for (Expr a : args) {
                b.append(',');
                a.json(b);
            }
            b.append(']');
        }

        public List<Expr> children() {
            return args;
        }

        public int size() {
            int s = 1;
            for (Expr a : args) s += a.size();
            return s;
        }
    }

    record Div(Expr num, Expr den) implements Expr {
        public BigRational exact() {
            BigRational a = num.exact();
            BigRational b = a == null ? null : den.exact();
            return b == null ? null : a.divide(b);
        }

        public Complex eval(Map<String, Complex> env) {
            return num.eval(env).div(den.eval(env));
        }

        public void vars(Set<String> out) {
            num.vars(out);
            den.vars(out);
        }

        public boolean hasDecimal() {
            return num.hasDecimal() || den.hasDecimal();
        }

        public void json(StringBuilder b) {
            b.append("[\"div\",");
            num.json(b);
            b.append(',');
            den.json(b);
            b.append(']');
        }

        public List<Expr> children() {
            return List.of(num, den);
        }

        public int size() {
            return 1 + num.size() + den.size();
        }
    }

    record Pow(Expr base, Expr exponent) implements Expr {
        public BigRational exact() {
            BigRational e = exponent.exact();
            if (e == null) return null;
            BigRational b = base.exact();
            if (b == null) return null;
            if (e.isInteger()) return b.pow(e);
            // 4^{1/2}, 8^{2/3}: exact only when the root is
            if (e.den.equals(BigInteger.TWO)) {
                BigRational r = b.sqrt();
                return r == null ? null : r.pow(BigRational.of(e.num, BigInteger.ONE));
            }
            return null;
        }

        public Complex eval(Map<String, Complex> env) {
            return base.eval(env).pow(exponent.eval(env));
        }

        public void vars(Set<String> out) {
            base.vars(out);
            exponent.vars(out);
        }

        public boolean hasDecimal() {
            return base.hasDecimal() || exponent.hasDecimal();
        }

        public void json(StringBuilder b) {
            b.append("[\"pow\",");
            base.json(b);
            b.append(',');
            exponent.json(b);
            b.append(']');
        }

        public List<Expr> children() {
            return List.of(base, exponent);
        }

        public int size() {
            return 1 + base.size() + exponent.size();
        }
    }

    /**
     * A function: sqrt, root (x, n), exp, log (natural, or (x, base)), sin … arctan, sinh, cosh, tanh, abs,
     * floor, ceil, factorial, binom. The names are the ones the symbolic check maps to sympy.
     */
    record Fn(String name, List<Expr> args) implements Expr {
        static final Set<String> NAMES = Set.of("sqrt", "root", "exp", "log", "sin", "cos", "tan", "cot", "sec",
                "csc", "asin", "acos", "atan", "sinh", "cosh", "tanh", "abs", "floor", "ceil", "factorial", "binom");

        public Fn {
            if (!NAMES.contains(name)) throw new IllegalArgumentException("unknown function " + name);
            args = List.copyOf(args);
        }

        public BigRational exact() {
            switch (name) {
                case "sqrt": {
                    BigRational a = args.get(0).exact();
                    return a == null ? null : a.sqrt();
                }
                case "abs": {
                    BigRational a = args.get(0).exact();
                    return a == null ? null : (a.num.signum() < 0 ? a.negate() : a);
                }
                case "floor": {
                    BigRational a = args.get(0).exact();
                    return a == null ? null : BigRational.of(a.floor(), BigInteger.ONE);
                }
                case "ceil": {
                    BigRational a = args.get(0).exact();
                    return a == null ? null : BigRational.of(a.negate().floor().negate(), BigInteger.ONE);
                }
                case "factorial": {
                    BigRational a = args.get(0).exact();
                    if (a == null || !a.isInteger() || a.num.signum() < 0 || a.num.compareTo(BigInteger.valueOf(2000)) > 0) return null;
                    BigInteger f = BigInteger.ONE;
                    for (int k = 2; k <= a.num.intValue(); k++) f = f.multiply(BigInteger.valueOf(k));
                    return BigRational.of(f, BigInteger.ONE);
                }
                case "binom": {
                    BigRational n = args.get(0).exact();
                    BigRational k = args.get(1).exact();
                    if (n == null || k == null || !n.isInteger() || !k.isInteger() || n.num.signum() < 0
                            || n.num.compareTo(BigInteger.valueOf(5000)) > 0) return null;
                    int nn = n.num.intValue();
                    if (k.num.signum() < 0 || k.num.compareTo(n.num) > 0) return BigRational.ZERO;
                    int kk = Math.min(k.num.intValue(), nn - k.num.intValue());
                    BigInteger r = BigInteger.ONE;
                    for (int j = 1; j <= kk; j++) r = r.multiply(BigInteger.valueOf(nn - kk + j)).divide(BigInteger.valueOf(j));
                    return BigRational.of(r, BigInteger.ONE);
                }
                default:
                    return null;
            }
        }

        public Complex eval(Map<String, Complex> env) {
            Complex a = args.get(0).eval(env);
            switch (name) {
                case "sqrt":
                    return a.sqrt();
                case "root": {
                    Complex n = args.get(1).eval(env);
                    // the real odd root of a negative real (\sqrt[3]{-8} = -2), as written in answers
                    if (a.im() == 0 && a.re() < 0 && n.im() == 0 && n.re() == Math.rint(n.re()) && ((long) n.re()) % 2 != 0) {
                        return Complex.real(-Math.pow(-a.re(), 1 / n.re()));
                    }
                    return a.pow(Complex.ONE.div(n));
                }
                case "exp":
                    return a.exp();
                case "log":
                    return args.size() == 2 ? a.log().div(args.get(1).eval(env).log()) : a.log();
                case "sin":
                    return a.sin();
                case "cos":
                    return a.cos();
                case "tan":
                    return a.tan();
                case "cot":
                    return a.cos().div(a.sin());
                case "sec":
                    return Complex.ONE.div(a.cos());
                case "csc":
                    return Complex.ONE.div(a.sin());
                case "asin":
                    return a.asin();
                case "acos":
                    return a.acos();
                case "atan":
                    return a.atan();
                case "sinh":
                    return a.sinh();
                case "cosh":
                    return a.cosh();
                case "tanh":
                    return a.sinh().div(a.cosh());
                case "abs":
                    return Complex.real(a.abs());
                case "floor":
                    return a.isReal() ? Complex.real(Math.floor(a.re())) : Complex.NaN;
                case "ceil":
                    return a.isReal() ? Complex.real(Math.ceil(a.re())) : Complex.NaN;
                case "factorial": {
                    if (!a.isReal() || a.re() < 0 || a.re() != Math.rint(a.re()) || a.re() > 170) return Complex.NaN;
                    double f = 1;
                    for (int k = 2; k <= (int) a.re(); k++) f *= k;
                    return Complex.real(f);
                }
                case "binom": {
                    Complex k = args.get(1).eval(env);
                    if (!a.isReal() || !k.isReal() || a.re() != Math.rint(a.re()) || k.re() != Math.rint(k.re())) return Complex.NaN;
                    double n = a.re();
                    double kk = k.re();
                    if (kk < 0 || kk > n || n > 1e6) return kk < 0 || kk > n ? Complex.ZERO : Complex.NaN;
                    double r = 1;
                    for (int j = 1; j <= Math.min(kk, n - kk); j++) r = r * (n - Math.min(kk, n - kk) + j) / j;
                    return Complex.real(r);
                }
                default:
                    return Complex.NaN;
            }
        }

        public void vars(Set<String> out) {
            for (Expr a : args) a.vars(out);
        }

        public boolean hasDecimal() {
            for (Expr a : args) if (a.hasDecimal()) return true;
            return false;
        }

        public void json(StringBuilder b) {
            b.append("[\"fn\",");
            jsonString(b, name);
            for (Expr a : args) {
                b.append(',');
                a.json(b);
            }
            b.append(']');
        }

        public List<Expr> children() {
            return args;
        }

        public int size() {
            int s = 1;
            for (Expr a : args) s += a.size();
            return s;
        }
    }
}
