package ai.arbor.reward;

/**
 * Complex doubles for the numeric stage. Complex because answers contain {@code i} ({@code 6-5i}) and
 * because sampled points may be negative: {@code \sqrt{4x}} and {@code 2\sqrt{x}} then still agree, on the
 * principal branch, as sympy's would. Non-finite results are allowed; the caller skips such points.
 */
record Complex(double re, double im) {
    static final Complex ZERO = new Complex(0, 0);
    static final Complex ONE = new Complex(1, 0);
    static final Complex I = new Complex(0, 1);
    static final Complex NaN = new Complex(Double.NaN, Double.NaN);

    static Complex real(double x) {
        return new Complex(x, 0);
    }

    boolean isFinite() {
        return Double.isFinite(re) && Double.isFinite(im);
    }

    boolean isNaN() {
        return Double.isNaN(re) || Double.isNaN(im);
    }

    boolean isReal() {
        return im == 0 || Math.abs(im) <= 1e-12 * Math.max(1, Math.abs(re));
    }

    double abs() {
        return Math.hypot(re, im);
    }

    Complex add(Complex o) {
        return new Complex(re + o.re, im + o.im);
    }

    Complex sub(Complex o) {
        return new Complex(re - o.re, im - o.im);
    }

    Complex negate() {
        return new Complex(-re, -im);
    }

    Complex mul(Complex o) {
        if (im == 0 && o.im == 0) return real(re * o.re); // keeps ±inf real (no inf*0 = NaN imaginary part)
        return new Complex(re * o.re - im * o.im, re * o.im + im * o.re);
    }

    Complex div(Complex o) {
        if (im == 0 && o.im == 0) return real(re / o.re);
        double d = o.re * o.re + o.im * o.im;
        return new Complex((re * o.re + im * o.im) / d, (im * o.re - re * o.im) / d);
    }

    Complex exp() {
        double m = Math.exp(re);
        return im == 0 ? real(m) : new Complex(m * Math.cos(im), m * Math.sin(im));
    }

    /** Principal logarithm. */
    Complex log() {
        return new Complex(Math.log(abs()), Math.atan2(im, re));
    }

    /** Principal square root. */
    Complex sqrt() {
        if (im == 0) return re >= 0 ? real(Math.sqrt(re)) : new Complex(0, Math.sqrt(-re));
        double m = abs();
        double a = Math.sqrt((m + re) / 2);
        double b = Math.copySign(Math.sqrt((m - re) / 2), im);
        return new Complex(a, b);
    }

    /** {@code this^n} by repeated squaring (exact for small integer powers of negative reals). */
    Complex powInt(long n) {
        if (n < 0) return ONE.div(powInt(-n));
        Complex r = ONE;
        Complex b = this;
        while (n > 0) {
            if ((n & 1) == 1) r = r.mul(b);
            b = b.mul(b);
            n >>= 1;
        }
        return r;
    }

    /** Principal power {@code this^e}. */
    Complex pow(Complex e) {
        if (e.im == 0 && e.re == Math.rint(e.re) && Math.abs(e.re) <= 1 << 20) return powInt((long) e.re);
        if (re == 0 && im == 0) return e.re > 0 ? ZERO : NaN;
        if (im == 0 && e.im == 0 && re > 0) return real(Math.pow(re, e.re));
        return e.mul(log()).exp();
    }

    Complex sin() {
        return new Complex(Math.sin(re) * Math.cosh(im), Math.cos(re) * Math.sinh(im));
    }

    Complex cos() {
        return new Complex(Math.cos(re) * Math.cosh(im), -Math.sin(re) * Math.sinh(im));
    }

    Complex tan() {
        return sin().div(cos());
    }

    /** arcsin z = −i·log(iz + √(1−z²)). */
    Complex asin() {
        if (im == 0 && Math.abs(re) <= 1) return real(Math.asin(re));
        Complex w = I.mul(this).add(ONE.sub(mul(this)).sqrt()).log();
        return new Complex(w.im, -w.re);
    }

    Complex acos() {
        if (im == 0 && Math.abs(re) <= 1) return real(Math.acos(re));
        return real(Math.PI / 2).sub(asin());
    }

    /** arctan z = (i/2)·(log(1−iz) − log(1+iz)). */
    Complex atan() {
        if (im == 0) return real(Math.atan(re));
        Complex iz = I.mul(this);
        Complex d = ONE.sub(iz).log().sub(ONE.add(iz).log());
        return new Complex(-d.im / 2, d.re / 2);
    }

    Complex sinh() {
        return exp().sub(negate().exp()).div(real(2));
    }

    Complex cosh() {
        return exp().add(negate().exp()).div(real(2));
    }
}
