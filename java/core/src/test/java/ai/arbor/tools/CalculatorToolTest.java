package ai.arbor.tools;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.math.MathContext;
import java.util.Random;
import org.junit.jupiter.api.Test;

/** The calculator against BigInteger / BigDecimal computations and hand-computed cases. */
class CalculatorToolTest {

    private final CalculatorTool calc = new CalculatorTool();

    /** -Darbor.seed or the clock, printed (ai.arbor.testing.Seeds). */
    private static long seed(String test) {
        return ai.arbor.testing.Seeds.seed(test);
    }

    /** Independent reference: a fraction of BigIntegers in lowest terms. */
    private record Frac(BigInteger n, BigInteger d) {
        static Frac of(BigInteger n, BigInteger d) {
            if (d.signum() < 0) {
                n = n.negate();
                d = d.negate();
            }
            BigInteger g = n.gcd(d);
            return g.signum() == 0 ? new Frac(n, d) : new Frac(n.divide(g), d.divide(g));
        }

        Frac add(Frac o) {
            return of(n.multiply(o.d).add(o.n.multiply(d)), d.multiply(o.d));
        }

        Frac sub(Frac o) {
            return of(n.multiply(o.d).subtract(o.n.multiply(d)), d.multiply(o.d));
        }

        Frac mul(Frac o) {
            return of(n.multiply(o.n), d.multiply(o.d));
        }

        Frac div(Frac o) {
            return of(n.multiply(o.d), d.multiply(o.n));
        }

        Frac pow(int k) {
            return k >= 0 ? of(n.pow(k), d.pow(k)) : of(d.pow(-k), n.pow(-k));
        }
    }

    private record Expr(String text, Frac value) {}

    private static Expr randomLeaf(Random rnd) {
        if (rnd.nextInt(3) == 0) { // a decimal literal, e.g. 123.0450
            BigInteger unscaled = new BigInteger(1 + rnd.nextInt(40), rnd);
            int scale = 1 + rnd.nextInt(6);
            BigDecimal d = new BigDecimal(unscaled, scale);
            return new Expr(d.toPlainString(), Frac.of(unscaled, BigInteger.TEN.pow(scale)));
        }
        BigInteger v = new BigInteger(1 + rnd.nextInt(120), rnd); // up to ~36 digits
        return new Expr(v.toString(), Frac.of(v, BigInteger.ONE));
    }

    private static Expr randomExpr(Random rnd, int depth) {
        if (depth == 0 || rnd.nextInt(4) == 0) return randomLeaf(rnd);
        Expr a = randomExpr(rnd, depth - 1), b = randomExpr(rnd, depth - 1);
        switch (rnd.nextInt(6)) {
            case 0: return new Expr("(" + a.text + " + " + b.text + ")", a.value.add(b.value));
            case 1: return new Expr("(" + a.text + " - " + b.text + ")", a.value.sub(b.value));
            case 2: return new Expr("(" + a.text + " * " + b.text + ")", a.value.mul(b.value));
            case 3:
                if (b.value.n.signum() == 0) return a;
                return new Expr("(" + a.text + " / " + b.text + ")", a.value.div(b.value));
            case 4: {
                int k = rnd.nextInt(4);
                return new Expr("(" + a.text + ")^" + k, a.value.pow(k));
            }
            default: return new Expr("-(" + a.text + ")", Frac.of(a.value.n.negate(), a.value.d));
        }
    }

    @Test
    void randomExpressionsMatchBigIntegerFractions() {
        long seed = seed("randomExpressionsMatchBigIntegerFractions");
        Random rnd = new Random(seed);
        for (int i = 0; i < 400; i++) {
            Expr e = randomExpr(rnd, 4);
            CalculatorTool.Value v = CalculatorTool.evaluate(e.text);
            assertTrue(v.exact(), e.text);
            assertEquals(e.value.n, v.numerator(), () -> "seed " + seed + ": " + e.text);
            assertEquals(e.value.d, v.denominator(), () -> "seed " + seed + ": " + e.text);
        }
    }

    @Test
    void randomDecimalSumsMatchBigDecimal() {
        long seed = seed("randomDecimalSumsMatchBigDecimal");
        Random rnd = new Random(seed);
        for (int i = 0; i < 200; i++) {
            BigDecimal a = new BigDecimal(new BigInteger(50, rnd), rnd.nextInt(10)).negate();
            BigDecimal b = new BigDecimal(new BigInteger(50, rnd), rnd.nextInt(10));
            BigDecimal c = new BigDecimal(new BigInteger(20, rnd), rnd.nextInt(5));
            BigDecimal expected = a.add(b).multiply(c).stripTrailingZeros();
            String text = "(" + a.toPlainString() + " + " + b.toPlainString() + ") * " + c.toPlainString();
            CalculatorTool.Value v = CalculatorTool.evaluate(text);
            assertEquals(0, expected.compareTo(v.toBigDecimal(MathContext.UNLIMITED)), () -> "seed " + seed + ": " + text);
            assertEquals(expected.signum() == 0 ? "0" : expected.toPlainString(), CalculatorTool.format(v), text);
        }
    }

    private void assertShows(String expected, String expression) {
        Observation o = calc.call(expression);
        assertTrue(o.success(), () -> expression + " -> " + o.text());
        assertEquals(expected, o.text(), expression);
    }

    @Test
    void handComputedCases() {
        assertShows("14", "2 + 3 * 4");
        assertShows("20", "(2 + 3) * 4");
        assertShows("-4", "-2^2");
        assertShows("512", "2^3^2");
        assertShows("0.25", "2^-2");
        assertShows("1024", "2**10");
        assertShows("0.3", "0.1 + 0.2");
        assertShows("2.5", "10 / 4");
        assertShows("1/3 ≈ 0.33333333333333333333", "1/3");
        assertShows("-22/7 ≈ -3.1428571428571428571", "-22/7");
        assertShows("1", "7 % 3");
        assertShows("2", "-7 % 3");
        assertShows("-2", "7 % -3");
        assertShows("0.5", "5.5 % 1");
        assertShows("-4", "-7 // 2");
        assertShows("0.5", "2 × 3 ÷ 4 − 1");
        assertShows("120", "5!");
        assertShows("720", "3!!");
        assertShows("1000", "1e3");
        assertShows("0.0015", "1.5e-3");
        assertShows("1000000", "1_000_000");
        assertShows("5.5", "1.25 * 4.4");
    }

    @Test
    void functions() {
        assertShows("1.5", "sqrt(2.25)");
        assertEquals(new BigDecimal(2).sqrt(MathContext.DECIMAL128), CalculatorTool.evaluate("sqrt(2)").approx());
        assertShows("1.414213562373095048801688724209698", "sqrt(2)");
        assertShows("2", "8^(1/3)");
        assertShows("-2", "(-8)^(1/3)");
        assertShows("-3", "cbrt(-27)");
        assertShows("27", "9^(3/2)");
        assertShows("6", "gcd(12, 18, 30)");
        assertShows("12", "lcm(4, 6)");
        assertShows("20", "perm(5, 2)");
        BigInteger f25 = BigInteger.ONE;
        for (int i = 2; i <= 25; i++) f25 = f25.multiply(BigInteger.valueOf(i));
        assertShows(f25.toString(), "factorial(25)");
        BigInteger c = BigInteger.ONE;
        for (int i = 0; i < 25; i++) c = c.multiply(BigInteger.valueOf(50 - i)).divide(BigInteger.valueOf(i + 1));
        assertShows(c.toString(), "comb(50, 25)"); // 126410606437752
        assertShows("10", "log(1024, 2)");
        assertShows("3", "log10(1000)");
        assertShows("1", "ln(e)");
        assertShows("0.5", "sin(pi / 6)");
        assertShows("2.71828182845905", "exp(1)");
        assertShows("2", "round(2.5)");
        assertShows("4", "round(3.5)");
        assertShows("3.14", "round(3.14159, 2)");
        assertShows("-3", "floor(-2.5)");
        assertShows("-2", "ceil(-2.5)");
        assertShows("0.75", "abs(-3/4)");
        assertShows("-1", "min(3, -1, 2.5)");
        assertShows("2.5", "max(-3, 1, 5/2)");
        assertShows("1.414213562373095048801688724209698", "2^0.5");
        assertShows("1.25992104989487", "2^(1/3)"); // double precision: 15 significant digits
        assertShows("1", "2^0.5 * sin(pi/4)"); // shown to the 15 digits of the least precise input
    }

    @Test
    void hugeIntegersStayExact() {
        CalculatorTool.Value v = CalculatorTool.evaluate("2^10000 + 1");
        assertEquals(BigInteger.TWO.pow(10000).add(BigInteger.ONE), v.numerator());
        Observation o = calc.call("2^10000");
        String digits = BigInteger.TWO.pow(10000).toString();
        assertEquals(digits.substring(0, 40) + "…" + digits.substring(digits.length() - 40) + " (3011 digits)", o.text());
        assertShows(BigInteger.valueOf(3).pow(200).subtract(BigInteger.ONE).divide(BigInteger.TWO).toString(), "(3^200 - 1) / 2");
    }

    private void assertFails(String expression, String mention) {
        Observation o = calc.call(expression);
        assertFalse(o.success(), () -> expression + " -> " + o.text());
        assertFalse(o.infrastructureFailure());
        assertTrue(o.text().startsWith("Error: ") && o.text().contains(mention), () -> expression + " -> " + o.text());
    }

    @Test
    void clearErrors() {
        assertFails("", "empty expression");
        assertFails("2 +", "unexpected end of expression");
        assertFails("2 + * 3", "unexpected '*' at position 5");
        assertFails("(2 + 3", "missing ')'");
        assertFails("2 + 3)", "unexpected ')'");
        assertFails("foo(2)", "unknown name 'foo'");
        assertFails("1/0", "division by zero");
        assertFails("5 % 0", "modulo by zero");
        assertFails("0^-1", "division by zero");
        assertFails("sqrt(-1)", "sqrt of a negative number (-1)");
        assertFails("(-8)^(1/2)", "even root of a negative number");
        assertFails("2 pi", "missing operator");
        assertFails("2(3)", "missing operator");
        assertFails("10^(10^10)", "result too large");
        assertFails("factorial(1000000)", "factorial argument too large");
        assertFails("2.5!", "factorial needs an integer, got 5/2");
        assertFails("log(0)", "math domain error");
        assertFails("$5", "unexpected '$'");
        assertFails("(".repeat(300) + "1" + ")".repeat(300), "nested deeper than 200");
        assertFails("gcd(4)", "gcd takes at least 2 arguments, got 1");
        assertFails("sqrt", "'sqrt' needs parentheses");
    }

    @Test
    void acceptsJsonArguments() throws Exception {
        assertShows("2", "{\"expression\": \"1 + 1\"}");
        assertFails("{\"expr\": \"1 + 1\"}", "\"expression\"");
        assertEquals("calculator", calc.name());
        var schema = new ObjectMapper().readTree(calc.parametersSchema());
        assertEquals("expression", schema.at("/required/0").asText());
        assertTrue(calc.description().contains("exactly"));
        Observation o = calc.call("6*7");
        assertEquals(BigInteger.valueOf(42), ((CalculatorTool.Value) o.raw()).numerator());
        assertNull(calc.call("1/0").raw());
    }
}
