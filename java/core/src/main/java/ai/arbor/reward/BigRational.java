package ai.arbor.reward;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.math.MathContext;

/**
 * Exact rational numbers for the numeric stage: {@code 025 = 25}, {@code 27.0 = 27},
 * {@code 2^{100}+1 ≠ 2^{100}} (which doubles cannot tell apart). Sizes are capped so that an answer such as
 * {@code 9^{9^{9}}} costs nothing: an operation whose result would exceed {@link #MAX_BITS} gives null
 * (not exact) and the caller falls back to floating point.
 */
final class BigRational implements Comparable<BigRational> {
    static final int MAX_BITS = 1 << 15;
    static final BigRational ZERO = new BigRational(BigInteger.ZERO, BigInteger.ONE);
    static final BigRational ONE = new BigRational(BigInteger.ONE, BigInteger.ONE);

    final BigInteger num;
    final BigInteger den; // > 0, gcd(num, den) = 1

    private BigRational(BigInteger num, BigInteger den) {
        this.num = num;
        this.den = den;
    }

    static BigRational of(BigInteger num, BigInteger den) {
        if (den.equals(BigInteger.ONE)) return num.bitLength() > MAX_BITS ? null : new BigRational(num, den);
        if (den.signum() == 0) return null;
        if (den.signum() < 0) {
            num = num.negate();
            den = den.negate();
        }
        BigInteger g = num.gcd(den);
        if (!g.equals(BigInteger.ONE) && g.signum() != 0) {
            num = num.divide(g);
            den = den.divide(g);
        }
        if (num.bitLength() > MAX_BITS || den.bitLength() > MAX_BITS) return null;
        return new BigRational(num, den);
    }

    static BigRational of(long v) {
        return new BigRational(BigInteger.valueOf(v), BigInteger.ONE);
    }

    /** Parses {@code 123}, {@code 0.25}, {@code .5}; null when it is not such a literal. */
    static BigRational parseDecimal(String s) {
        if (s.length() < 18 && s.indexOf('.') < 0 && s.indexOf('e') < 0 && s.indexOf('E') < 0) {
            try {
                return new BigRational(BigInteger.valueOf(Long.parseLong(s)), BigInteger.ONE);
            } catch (NumberFormatException e) {
                return null;
            }
        }
        try {
            BigDecimal d = new BigDecimal(s);
            if (d.scale() > 400 || d.precision() > 4000) return null;
            return d.scale() <= 0 ? of(d.toBigIntegerExact(), BigInteger.ONE)
                    : of(d.unscaledValue(), BigInteger.TEN.pow(d.scale()));
        } catch (NumberFormatException | ArithmeticException e) {
            return null;
        }
    }

    BigRational add(BigRational o) {
        return of(num.multiply(o.den).add(o.num.multiply(den)), den.multiply(o.den));
    }

    BigRational negate() {
        return new BigRational(num.negate(), den);
    }

    BigRational multiply(BigRational o) {
        return of(num.multiply(o.num), den.multiply(o.den));
    }

    /** Null on division by zero. */
    BigRational divide(BigRational o) {
        return o.num.signum() == 0 ? null : of(num.multiply(o.den), den.multiply(o.num));
    }

    /** {@code this^e} for an integer exponent, or null when not exact or too large. */
    BigRational pow(BigRational e) {
        if (!e.isInteger() || e.num.bitLength() > 31) return null;
        int n = e.num.intValue();
        if (num.signum() == 0) return n > 0 ? ZERO : (n == 0 ? ONE : null);
        long bits = (long) Math.abs(n) * Math.max(num.bitLength(), den.bitLength());
        if (bits > MAX_BITS) return null;
        BigRational p = of(num.pow(Math.abs(n)), den.pow(Math.abs(n)));
        return p == null ? null : (n >= 0 ? p : ONE.divide(p));
    }

    /** The exact square root when both parts are perfect squares, else null. */
    BigRational sqrt() {
        if (num.signum() < 0) return null;
        BigInteger a = num.sqrt();
        BigInteger b = den.sqrt();
        return a.multiply(a).equals(num) && b.multiply(b).equals(den) ? of(a, b) : null;
    }

    boolean isInteger() {
        return den.equals(BigInteger.ONE);
    }

    BigInteger floor() {
        BigInteger[] qr = num.divideAndRemainder(den);
        return qr[1].signum() < 0 ? qr[0].subtract(BigInteger.ONE) : qr[0];
    }

    double doubleValue() {
        if (num.bitLength() <= 53 && den.bitLength() <= 53) {
            return (double) num.longValue() / (double) den.longValue(); // both exact: one correctly rounded division
        }
        if (num.bitLength() < 1000 && den.bitLength() < 1000) {
            return new BigDecimal(num).divide(new BigDecimal(den), MathContext.DECIMAL64).doubleValue();
        }
        int shift = Math.max(num.bitLength(), den.bitLength()) - 900;
        double n = num.shiftRight(Math.max(0, num.bitLength() - 900)).doubleValue();
        double d = den.shiftRight(Math.max(0, den.bitLength() - 900)).doubleValue();
        int e = Math.max(0, num.bitLength() - 900) - Math.max(0, den.bitLength() - 900);
        return shift > 0 ? n / d * Math.pow(2, e) : n / d;
    }

    @Override
    public int compareTo(BigRational o) {
        return num.multiply(o.den).compareTo(o.num.multiply(den));
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof BigRational r && num.equals(r.num) && den.equals(r.den);
    }

    @Override
    public int hashCode() {
        return num.hashCode() * 31 + den.hashCode();
    }

    @Override
    public String toString() {
        return isInteger() ? num.toString() : num + "/" + den;
    }
}
