package ai.arbor.reward;

import ai.arbor.reward.Verdict.Outcome;
import ai.arbor.reward.Verdict.Rule;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.SplittableRandom;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Math answer equivalence, the correctness test of the math rewards of CoRT, TAO-RL and GRPO-TCR
 * (docs/algorithms.md §5). Rules, in order (docs/rewards.md has the full list with examples):
 * <ol>
 *   <li><b>string</b>: both answers normalized ({@link LatexNormalizer}: {@code \left}, {@code \!},
 *       {@code ^\circ}, {@code \text{}}, units, {@code \dfrac}, {@code \frac12}, {@code $}, a trailing
 *       period…) and compared; text answers compare case-insensitively; multiple-choice letters
 *       ({@code \text{(C)}} = {@code C}); a base-b numeral {@code 52_8} equals its digits {@code 52};</li>
 *   <li><b>structural</b>: tuples and intervals (ordered, brackets must match: {@code (1,2) ≠ [1,2]}), sets
 *       and bare lists (unordered; {@code a \pm b} is two items; a bare list also matches a parenthesized
 *       tuple of three or more items, in order — not of two, which may be an open interval), matrices
 *       (element-wise; a column or row vector also matches a tuple), unions of intervals (unordered),
 *       equations ({@code x = 3} vs
 *       {@code 3}: a name on the left is dropped; two equations: {@code l₁−r₁ = ±(l₂−r₂)}); items are
 *       graded recursively by these same rules;</li>
 *   <li><b>numeric</b> (constants): exact rationals first ({@code 025 = 25}, {@code 27.0 = 27}, mixed numbers,
 *       scientific notation), then complex doubles with relative tolerance 1e-9, or
 *       {@link Builder#decimalTolerance} (1e-4, the Qwen2.5-Math grader's) when a side has a decimal
 *       literal ({@code 3.1416 = \pi}); a side with {@code %} also matches its value divided by 100;</li>
 *   <li><b>sampled</b> (free variables): both sides evaluated at fixed pseudo-random real points (some negative);
 *       equal when they agree at ≥ 3 points where both are finite, not equal when they differ at one
 *       (a Schwartz–Zippel-style identity test; on by default, {@link Builder#sampleVariables});</li>
 *   <li><b>symbolic</b> (optional): when the above cannot decide (non-finite values, too-large numbers,
 *       sampling off), sympy's {@code simplify(a - b) == 0} through a {@link SympyChecker}, bounded by a
 *       timeout.</li>
 * </ol>
 * A {@link Verdict} carries the rule that decided. Immutable and thread-safe (the symbolic checker
 * serializes its sandbox calls). Never throws for any answer text.
 */
public final class MathGrader implements AnswerChecker {

    /** Relative tolerance when a side contains a decimal literal (Qwen2.5-Math {@code math_equal}: 1e-4). */
    public static final double DEFAULT_DECIMAL_TOLERANCE = 1e-4;
    /** Relative tolerance between exact forms evaluated in floating point (rounding noise only). */
    static final double EXACT_TOLERANCE = 1e-9;
    static final int POINTS = 8;
    static final int MIN_AGREEING = 3;
    static final int MAX_VARS = 12;
    /** POINT_VALUES[k][j]: value of the j-th variable (sorted by name) at point k. Fixed so grading is deterministic. */
    private static final Complex[][] POINT_VALUES = new Complex[POINTS][MAX_VARS];

    static {
        SplittableRandom r = new SplittableRandom(0x5EED_A2B0L);
        for (int k = 0; k < POINTS; k++) {
            for (int j = 0; j < MAX_VARS; j++) {
                double v = 0.31 + 1.9 * r.nextDouble();
                // some negative values, so that |x| ≠ x is seen; real only, because answers assume real
                // variables (|x|^2 = x^2 must hold)
                if (r.nextInt(3) == 0) v = -v;
                POINT_VALUES[k][j] = Complex.real(v);
            }
        }
    }

    private static final Pattern BASE_NUMERAL = Pattern.compile("([0-9A-Za-z]+)_\\{?([0-9]+)\\}?");
    private static final Pattern ALNUM = Pattern.compile("[0-9A-Za-z]+");

    private final AnswerExtractor extractor;
    private final SympyChecker symbolic;
    private final boolean sampleVariables;
    private final double decimalTolerance;

    private MathGrader(Builder b) {
        this.extractor = b.extractor;
        this.symbolic = b.symbolic;
        this.sampleVariables = b.sampleVariables;
        this.decimalTolerance = b.decimalTolerance;
    }

    /** Boxed / {@code <answer>} extraction, variable sampling on, no symbolic check. */
    public static MathGrader standard() {
        return builder().build();
    }

    public static Builder builder() {
        return new Builder();
    }

    /** Options of a {@link MathGrader}. */
    public static final class Builder {
        private AnswerExtractor extractor = AnswerExtractor.MATH;
        private SympyChecker symbolic;
        private boolean sampleVariables = true;
        private double decimalTolerance = DEFAULT_DECIMAL_TOLERANCE;

        private Builder() {
        }

        /** How {@link #gradeResponse} finds the answer (default {@link AnswerExtractor#MATH}). */
        public Builder extractor(AnswerExtractor e) {
            if (e == null) throw new IllegalArgumentException("extractor must not be null");
            this.extractor = e;
            return this;
        }

        /** The symbolic fallback (default none: undecidable pairs are {@link Outcome#UNPARSEABLE}). */
        public Builder symbolic(SympyChecker checker) {
            this.symbolic = checker;
            return this;
        }

        /** Compare expressions with free variables by evaluation at fixed points (default true). */
        public Builder sampleVariables(boolean on) {
            this.sampleVariables = on;
            return this;
        }

        /** Relative tolerance when a side has a decimal literal (default 1e-4); in [0, 0.1]. */
        public Builder decimalTolerance(double tol) {
            if (!(tol >= 0 && tol <= 0.1)) throw new IllegalArgumentException("decimalTolerance must be in [0, 0.1], got " + tol);
            this.decimalTolerance = tol;
            return this;
        }

        public MathGrader build() {
            return new MathGrader(this);
        }
    }

    public AnswerExtractor extractor() {
        return extractor;
    }

    /** Grades a response: extracts its final answer, then {@link #grade(String, List)}. */
    public Verdict gradeResponse(String response, List<String> goldAnswers) {
        checkGold(goldAnswers);
        Optional<AnswerExtractor.Extraction> ex = extractor.extract(response);
        if (ex.isEmpty()) return Verdict.notEqual(Rule.NO_ANSWER, "no final answer found");
        return grade(ex.get().answer(), goldAnswers);
    }

    public Verdict gradeResponse(String response, String goldAnswer) {
        return gradeResponse(response, List.of(checkGold(goldAnswer)));
    }

    /** True when the response's final answer equals one of the gold answers. */
    @Override
    public boolean isCorrect(String response, List<String> goldAnswers) {
        return gradeResponse(response, goldAnswers).isEqual();
    }

    /** Grades an extracted answer against several gold answers: the first equal verdict, else the most decided. */
    public Verdict grade(String answer, List<String> goldAnswers) {
        checkGold(goldAnswers);
        Verdict best = null;
        for (String g : goldAnswers) {
            Verdict v = grade(answer, g);
            if (v.isEqual()) return v;
            if (best == null || (best.outcome() == Outcome.UNPARSEABLE && v.outcome() == Outcome.NOT_EQUAL)) best = v;
        }
        return best;
    }

    /** Grades an extracted answer (the content of the box) against a gold answer. */
    public Verdict grade(String answer, String goldAnswer) {
        checkGold(goldAnswer);
        if (answer == null) return Verdict.notEqual(Rule.NO_ANSWER, "no answer");
        try {
            return gradeChecked(answer, goldAnswer);
        } catch (RuntimeException e) {
            // A reward must not take a trainer down; the test suite asserts this never happens on its corpus.
            return Verdict.unparseable(Rule.STRING, "grader error: " + e);
        }
    }

    private Verdict gradeChecked(String answer, String gold) {
        // a gold answer may be a boxed solution; an answer may hold a box in its box: both sides alike
        gold = innermostBox(gold);
        answer = innermostBox(answer);
        NormalizedAnswer a = LatexNormalizer.normalize(answer);
        NormalizedAnswer g = LatexNormalizer.normalize(gold);
        if (a.tooLong() || g.tooLong()) return Verdict.unparseable(Rule.STRING, "longer than " + LatexNormalizer.MAX_CHARS + " characters");
        if (g.tokens().isEmpty()) return Verdict.unparseable(Rule.STRING, "empty gold answer");
        if (a.tokens().isEmpty()) return Verdict.notEqual(Rule.STRING, "empty answer");
        if (a.canonical().equals(g.canonical())) return Verdict.equal(Rule.STRING, "normalized strings match: " + clip(g.canonical()));
        Verdict v = baseNumeral(a.canonical(), g.canonical());
        if (v != null) return v;
        if (a.wordLike() || g.wordLike()) {
            if (a.word() != null && g.word() != null) {
                boolean eq = stripArticles(a.word()).equals(stripArticles(g.word()));
                return eq ? Verdict.equal(Rule.STRING, "text answers match") : Verdict.notEqual(Rule.STRING, "text answers differ");
            }
            return Verdict.notEqual(Rule.STRING, "text answer vs math answer");
        }
        return compare(Shape.of(a.tokens()), Shape.of(g.tokens()), a.percent(), g.percent());
    }

    private static String innermostBox(String s) {
        for (int k = 0; k < 8 && (s.contains("\\boxed") || s.contains("\\fbox")); k++) {
            String inner = AnswerExtractor.lastBoxed(s).orElse(null);
            if (inner == null || inner.equals(s)) break;
            s = inner;
        }
        return s;
    }

    private static String stripArticles(String w) {
        return (" " + w + " ").replaceAll(" (a|an|the) ", " ").replace(" ", "");
    }

    /** {@code 52_8} vs {@code 52} / {@code 52_{8}}: digits equal (and bases, when both are given). */
    private static Verdict baseNumeral(String a, String g) {
        if (a.indexOf('_') < 0 && g.indexOf('_') < 0) return null;
        Matcher ma = BASE_NUMERAL.matcher(a);
        Matcher mg = BASE_NUMERAL.matcher(g);
        boolean ba = ma.matches();
        boolean bg = mg.matches();
        if (!ba && !bg) return null;
        if ((!ba && !ALNUM.matcher(a).matches()) || (!bg && !ALNUM.matcher(g).matches())) {
            return Verdict.notEqual(Rule.STRING, "base-b numeral vs another kind of answer");
        }
        String da = stripZeros(ba ? ma.group(1) : a);
        String dg = stripZeros(bg ? mg.group(1) : g);
        if (!da.equalsIgnoreCase(dg)) return Verdict.notEqual(Rule.STRING, "base-b numerals differ");
        if (ba && bg && !stripZeros(ma.group(2)).equals(stripZeros(mg.group(2)))) return Verdict.notEqual(Rule.STRING, "bases differ");
        return Verdict.equal(Rule.STRING, "base-b numeral digits match");
    }

    private static String stripZeros(String s) {
        int i = 0;
        while (i < s.length() - 1 && s.charAt(i) == '0') i++;
        return s.substring(i);
    }

    // ---------------------------------------------------------------- structural

    private Verdict compare(Shape a, Shape b, boolean pctA, boolean pctB) {
        if (a instanceof Shape.Equation ea && !(b instanceof Shape.Equation)) {
            if (!ea.namedLhs()) return Verdict.notEqual(Rule.STRUCTURAL, "equation vs expression");
            return lhsDropped(compare(Shape.of(ea.rhs()), b, pctA, pctB));
        }
        if (b instanceof Shape.Equation eb && !(a instanceof Shape.Equation)) {
            if (!eb.namedLhs()) return Verdict.notEqual(Rule.STRUCTURAL, "expression vs equation");
            return lhsDropped(compare(a, Shape.of(eb.rhs()), pctA, pctB));
        }
        if (a instanceof Shape.Equation ea && b instanceof Shape.Equation eb) return equations(ea, eb);
        if (a instanceof Shape.Scalar sa && b instanceof Shape.Scalar sb) return scalars(sa.toks(), sb.toks(), pctA, pctB);
        if (a instanceof Shape.Seq qa && b instanceof Shape.Seq qb) return sequences(qa, qb);
        if (a instanceof Shape.Matrix ma && b instanceof Shape.Matrix mb) {
            if (ma.rows().size() != mb.rows().size() || ma.cols() != mb.cols()) {
                return Verdict.notEqual(Rule.STRUCTURAL, "matrix shapes differ: " + dims(ma) + " vs " + dims(mb));
            }
            List<Shape> xa = new ArrayList<>();
            List<Shape> xb = new ArrayList<>();
            for (List<Shape> r : ma.rows()) xa.addAll(r);
            for (List<Shape> r : mb.rows()) xb.addAll(r);
            return ordered(xa, xb, "matrix " + dims(ma));
        }
        if (a instanceof Shape.Matrix m && b instanceof Shape.Seq q && isTuple(q)) return vectorVsTuple(m, q);
        if (b instanceof Shape.Matrix m && a instanceof Shape.Seq q && isTuple(q)) return vectorVsTuple(m, q);
        if (a instanceof Shape.Union ua && b instanceof Shape.Union ub) return unordered(ua.parts(), ub.parts(), "union");
        return Verdict.notEqual(Rule.STRUCTURAL, "different shapes: " + name(a) + " vs " + name(b));
    }

    private static boolean isTuple(Shape.Seq q) {
        return q.open() == '(' && q.close() == ')';
    }

    private Verdict vectorVsTuple(Shape.Matrix m, Shape.Seq q) {
        if (m.rows().size() != 1 && m.cols() != 1) return Verdict.notEqual(Rule.STRUCTURAL, "matrix vs tuple");
        List<Shape> xs = new ArrayList<>();
        for (List<Shape> r : m.rows()) xs.addAll(r);
        return ordered(xs, q.items(), "vector");
    }

    private static String dims(Shape.Matrix m) {
        return m.rows().size() + "x" + m.cols();
    }

    private static String name(Shape s) {
        if (s instanceof Shape.Scalar) return "expression";
        if (s instanceof Shape.Seq q) return q.kind();
        if (s instanceof Shape.Matrix) return "matrix";
        if (s instanceof Shape.Union) return "union";
        return "equation";
    }

    private Verdict sequences(Shape.Seq a, Shape.Seq b) {
        String what = a.kind().equals(b.kind()) ? a.kind() : a.kind() + " vs " + b.kind();
        if (a.items().size() != b.items().size()) {
            return Verdict.notEqual(Rule.STRUCTURAL, what + ": " + a.items().size() + " vs " + b.items().size() + " items");
        }
        boolean unorderedA = a.bare() || a.set();
        boolean unorderedB = b.bare() || b.set();
        if (unorderedA && unorderedB) return unordered(a.items(), b.items(), what);
        // 6, 31, -1 vs (6,31,-1); not for two items, where (a,b) may be an open interval
        if (((a.bare() && isTuple(b)) || (b.bare() && isTuple(a))) && a.items().size() != 2) return ordered(a.items(), b.items(), what);
        if (unorderedA || unorderedB) return Verdict.notEqual(Rule.STRUCTURAL, what);
        if (a.open() != b.open() || a.close() != b.close()) {
            return Verdict.notEqual(Rule.STRUCTURAL, "brackets differ: " + a.open() + "…" + a.close() + " vs " + b.open() + "…" + b.close());
        }
        return ordered(a.items(), b.items(), what);
    }

    private Verdict ordered(List<Shape> xs, List<Shape> ys, String what) {
        if (xs.size() != ys.size()) return Verdict.notEqual(Rule.STRUCTURAL, what + ": " + xs.size() + " vs " + ys.size() + " items");
        Verdict unknown = null;
        for (int i = 0; i < xs.size(); i++) {
            Verdict v = compare(xs.get(i), ys.get(i), false, false);
            if (v.outcome() == Outcome.NOT_EQUAL) return Verdict.notEqual(Rule.STRUCTURAL, what + " item " + (i + 1) + ": " + v.detail());
            if (v.outcome() == Outcome.UNPARSEABLE && unknown == null) unknown = new Verdict(Outcome.UNPARSEABLE, v.rule(), what + " item " + (i + 1) + ": " + v.detail());
        }
        return unknown != null ? unknown : Verdict.equal(Rule.STRUCTURAL, what + " of " + xs.size() + ": items equal in order");
    }

    private Verdict unordered(List<Shape> xs, List<Shape> ys, String what) {
        if (xs.size() != ys.size()) return Verdict.notEqual(Rule.STRUCTURAL, what + ": " + xs.size() + " vs " + ys.size() + " items");
        boolean[] used = new boolean[ys.size()];
        for (int i = 0; i < xs.size(); i++) {
            Verdict unknown = null;
            boolean found = false;
            for (int j = 0; j < ys.size() && !found; j++) {
                if (used[j]) continue;
                Verdict v = compare(xs.get(i), ys.get(j), false, false);
                if (v.isEqual()) {
                    used[j] = true;
                    found = true;
                } else if (v.outcome() == Outcome.UNPARSEABLE && unknown == null) {
                    unknown = v;
                }
            }
            if (!found) {
                if (unknown != null) return new Verdict(Outcome.UNPARSEABLE, unknown.rule(), what + " item " + (i + 1) + ": " + unknown.detail());
                return Verdict.notEqual(Rule.STRUCTURAL, what + ": item " + (i + 1) + " has no equal partner");
            }
        }
        return Verdict.equal(Rule.STRUCTURAL, what + " of " + xs.size() + ": items equal in some order");
    }

    /** The verdict on the right-hand side, reported as the structural (equation) rule unless undecided. */
    private static Verdict lhsDropped(Verdict v) {
        if (v.outcome() == Outcome.UNPARSEABLE) return v;
        return new Verdict(v.outcome(), Rule.STRUCTURAL, "equation, name on the left dropped; " + v.detail());
    }

    private Verdict equations(Shape.Equation a, Shape.Equation b) {
        if (a.namedLhs() && b.namedLhs()) return lhsDropped(compare(Shape.of(a.rhs()), Shape.of(b.rhs()), false, false));
        ExprParser.Result la = ExprParser.parse(a.lhs());
        ExprParser.Result ra = ExprParser.parse(a.rhs());
        ExprParser.Result lb = ExprParser.parse(b.lhs());
        ExprParser.Result rb = ExprParser.parse(b.rhs());
        for (ExprParser.Result r : List.of(la, ra, lb, rb)) {
            if (!r.ok()) return Verdict.unparseable(Rule.STRUCTURAL, "equation side does not parse: " + r.error());
        }
        Expr da = new Expr.Nary(false, List.of(la.expr(), new Expr.Neg(ra.expr())));
        Expr db = new Expr.Nary(false, List.of(lb.expr(), new Expr.Neg(rb.expr())));
        Verdict same = exprs(da, db, false, false);
        if (same.isEqual()) return Verdict.equal(Rule.STRUCTURAL, "equations: l1-r1 = l2-r2 (" + same.rule() + ")");
        Verdict swapped = exprs(da, new Expr.Neg(db), false, false);
        if (swapped.isEqual()) return Verdict.equal(Rule.STRUCTURAL, "equations: l1-r1 = -(l2-r2) (" + swapped.rule() + ")");
        if (same.outcome() == Outcome.UNPARSEABLE) return same;
        if (swapped.outcome() == Outcome.UNPARSEABLE) return swapped;
        return Verdict.notEqual(Rule.STRUCTURAL, "equations differ (" + same.detail() + ")");
    }

    // ---------------------------------------------------------------- numeric, sampled, symbolic

    private Verdict scalars(List<Tok> a, List<Tok> b, boolean pctA, boolean pctB) {
        String sa = Tok.render(a);
        String sb = Tok.render(b);
        if (sa.equals(sb)) return Verdict.equal(Rule.STRING, "normalized strings match: " + clip(sa));
        ExprParser.Result ra = ExprParser.parse(a);
        if (!ra.ok()) return Verdict.unparseable(Rule.NUMERIC, "cannot read '" + clip(sa) + "': " + ra.error());
        ExprParser.Result rb = ExprParser.parse(b);
        if (!rb.ok()) return Verdict.unparseable(Rule.NUMERIC, "cannot read '" + clip(sb) + "': " + rb.error());
        return exprs(ra.expr(), rb.expr(), pctA, pctB);
    }

    private Verdict exprs(Expr a, Expr b, boolean pctA, boolean pctB) {
        TreeSet<String> vars = new TreeSet<>();
        a.vars(vars);
        b.vars(vars);
        boolean decimal = a.hasDecimal() || b.hasDecimal();
        double tol = decimal ? decimalTolerance : EXACT_TOLERANCE;
        String why;
        if (vars.isEmpty()) {
            BigRational xa = a.exact();
            BigRational xb = xa == null ? null : b.exact();
            if (xa != null && xb != null) {
                if (xa.equals(xb)) return Verdict.equal(Rule.NUMERIC, "exact: " + clip(xa.toString()));
                if (pctA && !pctB && xa.divide(BigRational.of(100)).equals(xb)) return Verdict.equal(Rule.NUMERIC, "exact, as a percentage");
                if (pctB && !pctA && xb.divide(BigRational.of(100)).equals(xa)) return Verdict.equal(Rule.NUMERIC, "exact, as a percentage");
                if (!decimal) return Verdict.notEqual(Rule.NUMERIC, "exact: " + clip(xa.toString()) + " vs " + clip(xb.toString()));
            }
            Complex va = a.eval(Map.of());
            Complex vb = b.eval(Map.of());
            Verdict v = constants(va, vb, tol, hasInfinity(a) && hasInfinity(b));
            if (v != null && !v.isEqual()) {
                if (pctA && !pctB && close(va.div(Complex.real(100)), vb, tol)) return Verdict.equal(Rule.NUMERIC, "as a percentage, within tolerance");
                if (pctB && !pctA && close(vb.div(Complex.real(100)), va, tol)) return Verdict.equal(Rule.NUMERIC, "as a percentage, within tolerance");
            }
            if (v != null) return v;
            why = "values are not finite";
        } else if (vars.size() > MAX_VARS) {
            why = "more than " + MAX_VARS + " variables";
        } else if (!sampleVariables) {
            why = "free variables " + vars + " and sampling is off";
        } else {
            Verdict v = sampled(a, b, new ArrayList<>(vars), tol);
            if (v != null) return v;
            why = "too few finite sample points";
        }
        if (symbolic == null) return Verdict.unparseable(Rule.SYMBOLIC, "needs the symbolic check (not configured): " + why);
        return symbolic.check(a, b);
    }

    private static boolean hasInfinity(Expr e) {
        return Expr.any(e, x -> x instanceof Expr.Const c && c.name().equals("infty"));
    }

    /**
     * Equal / not equal for two constant values, or null when undecided: a NaN, or two infinities that are
     * not both written with {@code \infty} (an overflow such as {@code 2^{2^{100}}} says nothing).
     */
    private static Verdict constants(Complex a, Complex b, double tol, boolean writtenInfinities) {
        if (a.isNaN() || b.isNaN()) return null;
        if (a.isFinite() && b.isFinite()) {
            return close(a, b, tol) ? Verdict.equal(Rule.NUMERIC, "within relative tolerance " + tol)
                    : Verdict.notEqual(Rule.NUMERIC, "values differ: " + fmt(a) + " vs " + fmt(b));
        }
        boolean ia = !a.isFinite();
        boolean ib = !b.isFinite();
        if (ia && ib) {
            if (!writtenInfinities) return null;
            if (a.im() == 0 && b.im() == 0 && Math.signum(a.re()) == Math.signum(b.re())) return Verdict.equal(Rule.NUMERIC, "same infinity");
            return a.im() == 0 && b.im() == 0 ? Verdict.notEqual(Rule.NUMERIC, "infinities of opposite sign") : null;
        }
        // one side overflowed: only a finite value that is huge could be the same number
        Complex fin = ia ? b : a;
        return fin.abs() < 1e300 && (ia ? a : b).im() == 0 && Math.abs(fin.re()) < 1e15
                ? Verdict.notEqual(Rule.NUMERIC, "infinite vs finite") : null;
    }

    private Verdict sampled(Expr a, Expr b, List<String> vars, double tol) {
        int agree = 0;
        Map<String, Complex> env = new HashMap<>();
        for (int k = 0; k < POINTS; k++) {
            for (int j = 0; j < vars.size(); j++) env.put(vars.get(j), POINT_VALUES[k][j]);
            Complex va = a.eval(env);
            Complex vb = b.eval(env);
            if (!va.isFinite() || !vb.isFinite()) continue;
            if (!close(va, vb, tol)) return Verdict.notEqual(Rule.SAMPLED, "differ at point " + (k + 1) + " of " + vars + ": " + fmt(va) + " vs " + fmt(vb));
            agree++;
        }
        return agree >= MIN_AGREEING ? Verdict.equal(Rule.SAMPLED, "agree at " + agree + " points of " + vars) : null;
    }

    /** |a − b| ≤ tol·max(|a|, |b|), or both within 1e-12 of each other (values near zero). */
    static boolean close(Complex a, Complex b, double tol) {
        double d = a.sub(b).abs();
        return d <= tol * Math.max(a.abs(), b.abs()) || d <= 1e-12;
    }

    private static String fmt(Complex c) {
        return c.im() == 0 ? Double.toString(c.re()) : c.re() + (c.im() < 0 ? "" : "+") + c.im() + "i";
    }

    private static String clip(String s) {
        return s.length() <= 60 ? s : s.substring(0, 57) + "...";
    }

    private static String checkGold(String g) {
        if (g == null) throw new IllegalArgumentException("gold answer must not be null");
        return g;
    }

    private static List<String> checkGold(List<String> golds) {
        if (golds == null || golds.isEmpty()) throw new IllegalArgumentException("gold answers must be a non-empty list, got " + golds);
        for (String g : golds) checkGold(g);
        return golds;
    }
}
