package ai.arbor.tools;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.math.MathContext;
import java.math.RoundingMode;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * A calculator in pure Java (no sandbox needed): exact rational arithmetic on integers of any size
 * and on decimals ({@code 0.1 + 0.2} is exactly {@code 0.3}), with the operators
 * {@code + - * / // % ^} (also {@code ** × ÷ −}), parentheses, postfix {@code !}, the constants
 * {@code pi, e, tau} and the functions {@code sqrt cbrt abs floor ceil round trunc sign gcd lcm min max
 * factorial comb perm exp ln log log10 log2 sin cos tan asin acos atan atan2 sinh cosh tanh}.
 *
 * <p>Results stay exact while they can: integer powers, roots of perfect powers ({@code sqrt(2.25)} =
 * {@code 1.5}, {@code 8^(1/3)} = {@code 2}), {@code %} with Python's sign convention, {@code //} as
 * floor division. Irrational results become decimals: square roots to 34 significant digits
 * ({@code BigDecimal.sqrt}), the transcendental functions in double precision, shown to 15 significant
 * digits; the precision shown is the least precise input's. Output: an integer, an exact decimal when
 * the fraction terminates (up to 50 decimals), otherwise {@code p/q ≈ decimal}. Malformed input gives
 * a failed {@link Observation} whose text names the problem and its position.
 *
 * <p>Accepts the expression itself or a JSON object {@code {"expression": "..."}}. Work is bounded:
 * expression length, nesting depth, exponent and factorial sizes, and result digits are capped.
 */
public final class CalculatorTool implements Tool {

    /** A calculator value: exact ({@code approx == null}: numerator / denominator in lowest terms, denominator > 0) or a decimal approximation. */
    public record Value(BigInteger numerator, BigInteger denominator, BigDecimal approx, int digits) {
        public boolean exact() {
            return approx == null;
        }

        /** The value as a decimal (exact values rounded to {@code mc}). */
        public BigDecimal toBigDecimal(MathContext mc) {
            return exact() ? new BigDecimal(numerator).divide(new BigDecimal(denominator), mc) : approx.round(mc);
        }
    }

    /** Malformed or out-of-range input, with a message meant for the model. */
    public static final class CalculationException extends RuntimeException {
        private static final long serialVersionUID = 1L;

        CalculationException(String message) {
            super(message);
        }
    }

    private static final ObjectMapper JSON = new ObjectMapper();
    private static final MathContext MC = MathContext.DECIMAL128; // 34 digits for sqrt and mixed arithmetic
    private static final int DOUBLE_DIGITS = 15;
    private static final int MAX_LENGTH = 10_000;
    private static final int MAX_DEPTH = 200;
    private static final long MAX_RESULT_BITS = 1L << 22; // ~1.26 million decimal digits
    private static final int MAX_FACTORIAL = 20_000;
    private static final int MAX_SHOWN_DIGITS = 2000;

    @Override
    public String name() {
        return "calculator";
    }

    @Override
    public String description() {
        return "Evaluates an arithmetic expression exactly: integers of any size, fractions and decimals; "
                + "operators + - * / // % ^ and parentheses; functions such as sqrt, gcd, lcm, factorial, comb, "
                + "min, max, abs, round, floor, ceil, exp, ln, log, sin, cos, tan; constants pi and e.";
    }

    @Override
    public String parametersSchema() {
        return "{\"type\":\"object\",\"properties\":{\"expression\":{\"type\":\"string\","
                + "\"description\":\"arithmetic expression, e.g. (2^100 + 1) / 3\"}},\"required\":[\"expression\"]}";
    }

    @Override
    public Observation call(String arguments) {
        String expr = arguments == null ? "" : arguments.strip();
        if (expr.startsWith("{")) {
            try {
                JsonNode n = JSON.readTree(expr);
                if (n != null && n.isObject()) {
                    JsonNode e = n.get("expression");
                    if (e == null || !e.isTextual()) {
                        return Observation.failure("Error: the arguments need a string field \"expression\"", null);
                    }
                    expr = e.asText();
                }
            } catch (IOException | RuntimeException ignored) {
                // not JSON: a calculator expression never starts with '{' anyway
            }
        }
        try {
            Value v = evaluate(expr);
            return Observation.ok(format(v), v);
        } catch (CalculationException e) {
            return Observation.failure("Error: " + e.getMessage(), null);
        }
    }

    /**
     * Evaluates {@code expression}.
     *
     * @throws CalculationException for malformed input, a domain error or a result out of range
     */
    public static Value evaluate(String expression) {
        if (expression == null || expression.isBlank()) throw new CalculationException("empty expression");
        if (expression.length() > MAX_LENGTH) {
            throw new CalculationException("expression longer than " + MAX_LENGTH + " characters (" + expression.length() + ")");
        }
        Parser p = new Parser(expression);
        try {
            Num n = p.expression(0);
            p.skipSpace();
            if (p.pos < p.s.length()) throw p.error("unexpected '" + p.s.charAt(p.pos) + "'");
            return n.toValue();
        } catch (ArithmeticException e) { // BigDecimal exponent overflow and the like
            throw new CalculationException("result out of range (" + e.getMessage() + ")");
        }
    }

    /** The text the model sees for a value. */
    public static String format(Value v) {
        if (!v.exact()) return decimalText(v.approx(), v.digits());
        BigInteger num = v.numerator(), den = v.denominator();
        if (den.equals(BigInteger.ONE)) return integerText(num);
        BigDecimal exactDecimal = terminating(num, den);
        if (exactDecimal != null) return exactDecimal.toPlainString();
        String fraction = integerText(num) + "/" + integerText(den);
        return fraction + " ≈ " + decimalText(new BigDecimal(num).divide(new BigDecimal(den), new MathContext(20)), 20);
    }

    private static String integerText(BigInteger n) {
        String s = n.toString();
        int digits = s.length() - (n.signum() < 0 ? 1 : 0);
        if (digits <= MAX_SHOWN_DIGITS) return s;
        String sign = n.signum() < 0 ? "-" : "";
        String d = s.substring(sign.length());
        return sign + d.substring(0, 40) + "…" + d.substring(d.length() - 40) + " (" + digits + " digits)";
    }

    /** The exact decimal of num/den when it terminates within 50 decimals, else null. */
    private static BigDecimal terminating(BigInteger num, BigInteger den) {
        BigInteger d = den;
        int twos = d.getLowestSetBit();
        d = d.shiftRight(twos);
        int fives = 0;
        BigInteger five = BigInteger.valueOf(5);
        while (d.mod(five).signum() == 0 && fives <= 50) {
            d = d.divide(five);
            fives++;
        }
        if (!d.equals(BigInteger.ONE) || Math.max(twos, fives) > 50) return null;
        return new BigDecimal(num).divide(new BigDecimal(den)).stripTrailingZeros();
    }

    private static String decimalText(BigDecimal d, int digits) {
        BigDecimal r = d.round(new MathContext(digits, RoundingMode.HALF_EVEN)).stripTrailingZeros();
        if (r.signum() == 0) return "0";
        int exp = r.precision() - r.scale() - 1; // decimal exponent of the leading digit
        if (exp >= -6 && exp < 21) return r.toPlainString();
        String mant = r.movePointLeft(exp).stripTrailingZeros().toPlainString();
        return mant + "e" + (exp < 0 ? "-" : "+") + Math.abs(exp);
    }

    // ------------------------------------------------------------------ numbers

    /** Exact rational (den > 0, lowest terms) or approximation with its significant digits. */
    private static final class Num {
        final BigInteger num, den;
        final BigDecimal approx;
        final int digits;

        private Num(BigInteger num, BigInteger den) {
            if (den.signum() == 0) throw new CalculationException("division by zero");
            if (den.signum() < 0) {
                num = num.negate();
                den = den.negate();
            }
            BigInteger g = num.gcd(den);
            if (!g.equals(BigInteger.ONE) && g.signum() != 0) {
                num = num.divide(g);
                den = den.divide(g);
            }
            if (num.bitLength() > MAX_RESULT_BITS || den.bitLength() > MAX_RESULT_BITS) {
                throw new CalculationException("result too large (more than about 1.2 million digits)");
            }
            this.num = num;
            this.den = den;
            this.approx = null;
            this.digits = Integer.MAX_VALUE;
        }

        private Num(BigDecimal approx, int digits) {
            this.num = null;
            this.den = null;
            this.approx = approx.round(MC);
            this.digits = digits;
        }

        static Num of(BigInteger n) {
            return new Num(n, BigInteger.ONE);
        }

        static Num of(BigInteger n, BigInteger d) {
            return new Num(n, d);
        }

        static Num approx(BigDecimal d, int digits) {
            return new Num(d, digits);
        }

        static Num ofDouble(double d, String what) {
            if (Double.isNaN(d)) throw new CalculationException("math domain error in " + what);
            if (Double.isInfinite(d)) throw new CalculationException("result of " + what + " is too large");
            return new Num(new BigDecimal(d), DOUBLE_DIGITS);
        }

        boolean exact() {
            return approx == null;
        }

        boolean isInteger() {
            return exact() && den.equals(BigInteger.ONE);
        }

        int signum() {
            return exact() ? num.signum() : approx.signum();
        }

        BigDecimal decimal() {
            return exact() ? new BigDecimal(num).divide(new BigDecimal(den), MC) : approx;
        }

        double toDouble() {
            return decimal().doubleValue();
        }

        int minDigits(Num o) {
            return Math.min(digits, o.digits);
        }

        Value toValue() {
            return exact() ? new Value(num, den, null, 0) : new Value(null, null, approx, Math.min(digits, 34));
        }

        String describe() {
            return exact() ? (isInteger() ? num.toString() : num + "/" + den) : decimalText(approx, Math.min(digits, 34));
        }
    }

    private static Num add(Num a, Num b) {
        if (a.exact() && b.exact()) return Num.of(a.num.multiply(b.den).add(b.num.multiply(a.den)), a.den.multiply(b.den));
        return Num.approx(a.decimal().add(b.decimal(), MC), a.minDigits(b));
    }

    private static Num negate(Num a) {
        return a.exact() ? Num.of(a.num.negate(), a.den) : Num.approx(a.approx.negate(), a.digits);
    }

    private static Num multiply(Num a, Num b) {
        if (a.exact() && b.exact()) {
            if (a.num.bitLength() + b.num.bitLength() > MAX_RESULT_BITS + 64) throw new CalculationException("result too large");
            return Num.of(a.num.multiply(b.num), a.den.multiply(b.den));
        }
        return Num.approx(a.decimal().multiply(b.decimal(), MC), a.minDigits(b));
    }

    private static Num divide(Num a, Num b) {
        if (b.signum() == 0) throw new CalculationException("division by zero");
        if (a.exact() && b.exact()) return Num.of(a.num.multiply(b.den), a.den.multiply(b.num));
        return Num.approx(a.decimal().divide(b.decimal(), MC), a.minDigits(b));
    }

    private static Num floor(Num a) {
        if (a.exact()) {
            BigInteger[] qr = a.num.divideAndRemainder(a.den);
            BigInteger q = qr[0];
            if (qr[1].signum() < 0) q = q.subtract(BigInteger.ONE);
            return Num.of(q);
        }
        return Num.of(a.approx.setScale(0, RoundingMode.FLOOR).toBigIntegerExact());
    }

    private static Num floorDivide(Num a, Num b) {
        return floor(divide(a, b));
    }

    /** Python's a % b: a - b * floor(a / b), with the sign of b. */
    private static Num mod(Num a, Num b) {
        if (b.signum() == 0) throw new CalculationException("modulo by zero");
        return add(a, negate(multiply(b, floorDivide(a, b))));
    }

    private static Num power(Num base, Num exp) {
        if (exp.isInteger()) {
            BigInteger e = exp.num;
            if (base.exact()) {
                if (base.signum() == 0) {
                    if (e.signum() < 0) throw new CalculationException("division by zero (0 to a negative power)");
                    return Num.of(e.signum() == 0 ? BigInteger.ONE : BigInteger.ZERO);
                }
                if (base.num.abs().equals(BigInteger.ONE) && base.den.equals(BigInteger.ONE)) {
                    return Num.of(base.num.signum() < 0 && e.testBit(0) ? BigInteger.ONE.negate() : BigInteger.ONE);
                }
                long bits = Math.max(base.num.bitLength(), base.den.bitLength());
                if (e.bitLength() > 31 || bits * e.abs().longValue() > MAX_RESULT_BITS) {
                    throw new CalculationException("result too large: " + base.describe() + "^" + e + " has more than about 1.2 million digits");
                }
                int n = e.abs().intValueExact();
                Num p = Num.of(base.num.pow(n), base.den.pow(n));
                return e.signum() < 0 ? divide(Num.of(BigInteger.ONE), p) : p;
            }
            if (e.bitLength() <= 31 && e.abs().intValue() <= 999_999_999) {
                if (base.signum() == 0 && e.signum() < 0) throw new CalculationException("division by zero (0 to a negative power)");
                BigDecimal r = base.approx.pow(e.intValue(), MC);
                return Num.approx(r, base.digits);
            }
        }
        if (base.exact() && exp.exact()) { // rational exponent p/q: exact when the q-th root is
            if (exp.den.bitLength() < 16) {
                int q = exp.den.intValueExact();
                if (base.signum() < 0 && q % 2 == 0) throw new CalculationException("math domain error: even root of a negative number (" + base.describe() + "^" + exp.describe() + ")");
                BigInteger rn = exactRoot(base.num.abs(), q), rd = exactRoot(base.den, q);
                if (rn != null && rd != null) {
                    Num root = Num.of(base.signum() < 0 ? rn.negate() : rn, rd);
                    return power(root, Num.of(exp.num));
                }
                if (q == 2 && base.signum() > 0 && exp.num.bitLength() < 20) return power(sqrt(base), Num.of(exp.num)); // 34 digits
            }
        }
        if (base.signum() < 0) throw new CalculationException("math domain error: negative base with a non-integer exponent (" + base.describe() + "^" + exp.describe() + ")");
        if (base.signum() == 0) {
            if (exp.signum() < 0) throw new CalculationException("division by zero (0 to a negative power)");
            return Num.of(BigInteger.ZERO);
        }
        double b = base.toDouble(), x = exp.toDouble();
        double r = Double.isFinite(b) && b > 0 ? Math.pow(b, x) : Math.exp(x * ln(base)); // exp/ln beyond the double range
        return Num.ofDouble(r, "power");
    }

    /** Natural log in double precision, also for values beyond the double range. */
    private static double ln(Num x) {
        BigDecimal d = x.decimal();
        int shift = d.precision() - d.scale() - 1;
        BigDecimal m = d.movePointLeft(shift);
        return Math.log(m.doubleValue()) + shift * Math.log(10);
    }

    /** The exact k-th root of n >= 0, or null. */
    static BigInteger exactRoot(BigInteger n, int k) {
        if (k == 1 || n.signum() == 0 || n.equals(BigInteger.ONE)) return n;
        if (k == 2) {
            BigInteger r = n.sqrt();
            return r.multiply(r).equals(n) ? r : null;
        }
        int bits = n.bitLength();
        BigInteger guess = BigInteger.ONE.shiftLeft(bits / k + 1); // >= the root
        BigInteger kk = BigInteger.valueOf(k);
        while (true) { // Newton from above: x' = ((k-1) x + n / x^(k-1)) / k
            BigInteger next = kk.subtract(BigInteger.ONE).multiply(guess).add(n.divide(guess.pow(k - 1))).divide(kk);
            if (next.compareTo(guess) >= 0) break;
            guess = next;
        }
        return guess.pow(k).equals(n) ? guess : null;
    }

    private static Num sqrt(Num a) {
        if (a.signum() < 0) throw new CalculationException("math domain error: sqrt of a negative number (" + a.describe() + ")");
        if (a.exact()) {
            BigInteger rn = exactRoot(a.num, 2), rd = exactRoot(a.den, 2);
            if (rn != null && rd != null) return Num.of(rn, rd);
            return Num.approx(a.decimal().sqrt(MC), 34);
        }
        return Num.approx(a.approx.sqrt(MC), a.digits);
    }

    private static BigInteger requireInteger(Num a, String what, long max) {
        if (!a.isInteger()) throw new CalculationException(what + " needs an integer, got " + a.describe());
        if (max > 0 && a.num.abs().compareTo(BigInteger.valueOf(max)) > 0) throw new CalculationException(what + " argument too large: " + a.num + " (limit " + max + ")");
        return a.num;
    }

    private static Num factorial(Num a) {
        BigInteger n = requireInteger(a, "factorial", MAX_FACTORIAL);
        if (n.signum() < 0) throw new CalculationException("factorial of a negative number (" + n + ")");
        BigInteger r = BigInteger.ONE;
        for (int i = 2; i <= n.intValue(); i++) r = r.multiply(BigInteger.valueOf(i));
        return Num.of(r);
    }

    private static Num comb(Num n, Num k, boolean ordered) {
        String what = ordered ? "perm" : "comb";
        BigInteger nn = requireInteger(n, what, 1_000_000), kk = requireInteger(k, what, 1_000_000);
        if (nn.signum() < 0 || kk.signum() < 0) throw new CalculationException(what + " needs non-negative integers, got (" + nn + ", " + kk + ")");
        if (kk.compareTo(nn) > 0) return Num.of(BigInteger.ZERO);
        int ni = nn.intValue(), ki = kk.intValue();
        if (!ordered) ki = Math.min(ki, ni - ki);
        if ((long) ki * Math.max(1, 64 - Long.numberOfLeadingZeros(ni)) > MAX_RESULT_BITS) throw new CalculationException(what + " result too large");
        BigInteger r = BigInteger.ONE;
        for (int i = 0; i < ki; i++) {
            r = r.multiply(BigInteger.valueOf(ni - i));
            if (!ordered) r = r.divide(BigInteger.valueOf(i + 1));
        }
        return Num.of(r);
    }

    private static Num round(Num a, int places) {
        if (a.exact()) { // exact half-even on the rational itself
            BigInteger scale = BigInteger.TEN.pow(Math.abs(places));
            Num scaled = places >= 0 ? multiply(a, Num.of(scale)) : divide(a, Num.of(scale));
            BigInteger fl = floor(scaled).num;
            Num frac = add(scaled, negate(Num.of(fl)));
            int cmp = frac.num.shiftLeft(1).compareTo(frac.den); // frac vs 1/2
            BigInteger r = cmp > 0 || (cmp == 0 && fl.testBit(0)) ? fl.add(BigInteger.ONE) : fl;
            return places >= 0 ? Num.of(r, scale) : Num.of(r.multiply(scale));
        }
        return Num.approx(a.approx.setScale(places, RoundingMode.HALF_EVEN), a.digits);
    }

    // ------------------------------------------------------------------ parser

    private static final Map<String, Integer> ARITY = Map.ofEntries(
            Map.entry("sqrt", 1), Map.entry("cbrt", 1), Map.entry("abs", 1), Map.entry("floor", 1), Map.entry("ceil", 1),
            Map.entry("round", -1), Map.entry("trunc", 1), Map.entry("sign", 1), Map.entry("gcd", -2), Map.entry("lcm", -2),
            Map.entry("min", -1), Map.entry("max", -1), Map.entry("factorial", 1), Map.entry("fact", 1),
            Map.entry("comb", 2), Map.entry("binomial", 2), Map.entry("choose", 2), Map.entry("perm", 2),
            Map.entry("exp", 1), Map.entry("ln", 1), Map.entry("log", -1), Map.entry("log10", 1), Map.entry("log2", 1),
            Map.entry("sin", 1), Map.entry("cos", 1), Map.entry("tan", 1), Map.entry("asin", 1), Map.entry("acos", 1),
            Map.entry("atan", 1), Map.entry("atan2", 2), Map.entry("sinh", 1), Map.entry("cosh", 1), Map.entry("tanh", 1),
            Map.entry("mod", 2));

    private static final class Parser {
        final String s;
        int pos;

        Parser(String expression) {
            this.s = expression.replace('×', '*').replace('·', '*').replace('÷', '/').replace('−', '-')
                    .replace('–', '-').replace("**", "^");
        }

        CalculationException error(String what) {
            return new CalculationException(what + " at position " + (pos + 1) + " in \"" + (s.length() > 80 ? s.substring(0, 80) + "…" : s) + "\"");
        }

        void skipSpace() {
            while (pos < s.length() && Character.isWhitespace(s.charAt(pos))) pos++;
        }

        boolean eat(String tok) {
            skipSpace();
            if (s.startsWith(tok, pos)) {
                pos += tok.length();
                return true;
            }
            return false;
        }

        Num expression(int depth) {
            if (depth > MAX_DEPTH) throw error("expression nested deeper than " + MAX_DEPTH + " levels");
            Num v = term(depth);
            while (true) {
                if (eat("+")) v = add(v, term(depth));
                else if (eat("-")) v = add(v, negate(term(depth)));
                else return v;
            }
        }

        Num term(int depth) {
            Num v = unary(depth);
            while (true) {
                if (eat("*")) v = multiply(v, unary(depth));
                else if (eat("//")) v = floorDivide(v, unary(depth));
                else if (eat("/")) v = divide(v, unary(depth));
                else if (eat("%")) v = mod(v, unary(depth));
                else {
                    skipSpace();
                    if (pos < s.length() && (Character.isLetterOrDigit(s.charAt(pos)) || s.charAt(pos) == '(' || s.charAt(pos) == '.')) {
                        throw error("missing operator before '" + s.charAt(pos) + "' (write * for multiplication)");
                    }
                    return v;
                }
            }
        }

        Num unary(int depth) {
            if (depth > MAX_DEPTH) throw error("expression nested deeper than " + MAX_DEPTH + " levels");
            if (eat("-")) return negate(unary(depth + 1));
            if (eat("+")) return unary(depth + 1);
            return power(depth);
        }

        Num power(int depth) {
            Num base = postfix(depth);
            if (eat("^")) return CalculatorTool.power(base, unary(depth + 1)); // right-associative; -2^2 = -4
            return base;
        }

        Num postfix(int depth) {
            Num v = primary(depth);
            while (true) {
                skipSpace();
                if (pos < s.length() && s.charAt(pos) == '!' && !s.startsWith("!=", pos)) {
                    pos++;
                    v = factorial(v);
                } else {
                    return v;
                }
            }
        }

        Num primary(int depth) {
            skipSpace();
            if (pos >= s.length()) throw error("unexpected end of expression");
            char c = s.charAt(pos);
            if (c == '(') {
                pos++;
                Num v = expression(depth + 1);
                if (!eat(")")) throw error("missing ')'");
                return v;
            }
            if (Character.isDigit(c) || c == '.') return number();
            if (Character.isLetter(c)) {
                int start = pos;
                while (pos < s.length() && (Character.isLetterOrDigit(s.charAt(pos)) || s.charAt(pos) == '_')) pos++;
                String name = s.substring(start, pos).toLowerCase(Locale.ROOT);
                switch (name) {
                    case "pi", "π":
                        return Num.approx(new BigDecimal("3.141592653589793238462643383279503"), 34);
                    case "tau":
                        return Num.approx(new BigDecimal("6.283185307179586476925286766559006"), 34);
                    case "e":
                        return Num.approx(new BigDecimal("2.718281828459045235360287471352662"), 34);
                    default:
                        break;
                }
                Integer arity = ARITY.get(name);
                if (arity == null) {
                    pos = start;
                    throw error("unknown name '" + s.substring(start, start + name.length()) + "'");
                }
                if (!eat("(")) throw error("'" + name + "' needs parentheses, e.g. " + name + "(…)");
                List<Num> args = new ArrayList<>();
                if (!eat(")")) {
                    do {
                        args.add(expression(depth + 1));
                    } while (eat(","));
                    if (!eat(")")) throw error("missing ')' after the arguments of " + name);
                }
                return apply(name, arity, args);
            }
            throw error("unexpected '" + c + "'");
        }

        Num number() {
            int start = pos;
            while (pos < s.length() && (Character.isDigit(s.charAt(pos)) || s.charAt(pos) == '_')) pos++;
            if (pos < s.length() && s.charAt(pos) == '.') {
                pos++;
                while (pos < s.length() && Character.isDigit(s.charAt(pos))) pos++;
            }
            if (pos < s.length() && (s.charAt(pos) == 'e' || s.charAt(pos) == 'E')) {
                int save = pos;
                pos++;
                if (pos < s.length() && (s.charAt(pos) == '+' || s.charAt(pos) == '-')) pos++;
                int digits = pos;
                while (pos < s.length() && Character.isDigit(s.charAt(pos))) pos++;
                if (pos == digits) pos = save; // "2e" is 2 followed by the name e: reported as a missing operator
            }
            String text = s.substring(start, pos).replace("_", "");
            if (text.equals(".")) {
                pos = start;
                throw error("malformed number");
            }
            try {
                BigDecimal d = new BigDecimal(text);
                if (Math.abs((long) d.scale()) > 100_000) throw error("number exponent too large: " + text);
                BigInteger unscaled = d.unscaledValue();
                return d.scale() >= 0 ? Num.of(unscaled, BigInteger.TEN.pow(d.scale())) : Num.of(unscaled.multiply(BigInteger.TEN.pow(-d.scale())));
            } catch (NumberFormatException | ArithmeticException e) {
                pos = start;
                throw error("malformed number '" + text + "'");
            }
        }

        Num apply(String name, int arity, List<Num> a) {
            int n = a.size();
            if (arity > 0 && n != arity) throw error(name + " takes " + arity + " argument" + (arity > 1 ? "s" : "") + ", got " + n);
            if (arity < 0 && n < -arity) throw error(name + " takes at least " + (-arity) + " argument" + (-arity > 1 ? "s" : "") + ", got " + n);
            Num x = a.get(0);
            switch (name) {
                case "sqrt": return sqrt(x);
                case "cbrt": return x.signum() < 0 ? negate(CalculatorTool.power(negate(x), Num.of(BigInteger.ONE, BigInteger.valueOf(3))))
                        : CalculatorTool.power(x, Num.of(BigInteger.ONE, BigInteger.valueOf(3)));
                case "abs": return x.signum() < 0 ? negate(x) : x;
                case "floor": return floor(x);
                case "ceil": return negate(floor(negate(x)));
                case "trunc": return x.signum() < 0 ? negate(floor(negate(x))) : floor(x);
                case "sign": return Num.of(BigInteger.valueOf(x.signum()));
                case "round": {
                    if (n > 2) throw error("round takes 1 or 2 arguments, got " + n);
                    int places = n == 2 ? requireInteger(a.get(1), "round", 1000).intValue() : 0;
                    return CalculatorTool.round(x, places);
                }
                case "gcd": case "lcm": {
                    BigInteger r = requireInteger(x, name, 0);
                    for (int i = 1; i < n; i++) {
                        BigInteger y = requireInteger(a.get(i), name, 0);
                        if (name.equals("gcd")) r = r.gcd(y);
                        else r = r.signum() == 0 || y.signum() == 0 ? BigInteger.ZERO : r.multiply(y).abs().divide(r.gcd(y));
                    }
                    return Num.of(r.abs());
                }
                case "min": case "max": {
                    Num best = x;
                    for (int i = 1; i < n; i++) {
                        int c = compare(a.get(i), best);
                        if (name.equals("min") ? c < 0 : c > 0) best = a.get(i);
                    }
                    return best;
                }
                case "factorial": case "fact": return factorial(x);
                case "comb": case "binomial": case "choose": return comb(x, a.get(1), false);
                case "perm": return comb(x, a.get(1), true);
                case "mod": return CalculatorTool.mod(x, a.get(1));
                case "exp": return Num.ofDouble(Math.exp(x.toDouble()), "exp");
                case "ln": return log(x, null, name);
                case "log": {
                    if (n > 2) throw error("log takes 1 or 2 arguments, got " + n);
                    return log(x, n == 2 ? a.get(1) : null, name);
                }
                case "log10": return log(x, Num.of(BigInteger.TEN), name);
                case "log2": return log(x, Num.of(BigInteger.TWO), name);
                case "sin": return Num.ofDouble(Math.sin(x.toDouble()), "sin");
                case "cos": return Num.ofDouble(Math.cos(x.toDouble()), "cos");
                case "tan": return Num.ofDouble(Math.tan(x.toDouble()), "tan");
                case "asin": return Num.ofDouble(Math.asin(x.toDouble()), "asin");
                case "acos": return Num.ofDouble(Math.acos(x.toDouble()), "acos");
                case "atan": return Num.ofDouble(Math.atan(x.toDouble()), "atan");
                case "atan2": return Num.ofDouble(Math.atan2(x.toDouble(), a.get(1).toDouble()), "atan2");
                case "sinh": return Num.ofDouble(Math.sinh(x.toDouble()), "sinh");
                case "cosh": return Num.ofDouble(Math.cosh(x.toDouble()), "cosh");
                case "tanh": return Num.ofDouble(Math.tanh(x.toDouble()), "tanh");
                default: throw error("unknown function '" + name + "'");
            }
        }

        Num log(Num x, Num base, String name) {
            if (x.signum() <= 0) throw new CalculationException("math domain error: " + name + " of " + x.describe());
            if (base != null) {
                if (base.signum() <= 0 || (base.exact() && base.num.equals(base.den))) throw new CalculationException("math domain error: logarithm base " + base.describe());
                if (x.isInteger() && base.isInteger()) { // exact when x is a power of the base
                    BigInteger b = base.num, v = x.num;
                    int k = 0;
                    while (v.compareTo(BigInteger.ONE) > 0 && v.mod(b).signum() == 0) {
                        v = v.divide(b);
                        k++;
                    }
                    if (v.equals(BigInteger.ONE)) return Num.of(BigInteger.valueOf(k));
                }
                return Num.ofDouble(ln(x) / ln(base), name);
            }
            return Num.ofDouble(ln(x), name);
        }
    }

    private static int compare(Num a, Num b) {
        if (a.exact() && b.exact()) return a.num.multiply(b.den).compareTo(b.num.multiply(a.den));
        return a.decimal().compareTo(b.decimal());
    }
}
