package ai.arbor.task;

import java.math.BigInteger;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;

/**
 * {@code arith}: multi-step integer arithmetic, generated from a seed. Every expression has the same shape,
 * a 3-digit, a 2-digit and a 3-digit operand joined by two of {@code + - *} with at least one
 * multiplication (standard precedence), e.g. {@code 417*38-290}. A tiny policy cannot multiply in its head
 * reliably, but it can by writing the expression as a program for the Python tool
 * ({@code print(417*38-290)}) and copying the result. Reward: the exact integer.
 *
 * <p>Why one shape: a character-level policy must copy the expression into its program. With a fixed
 * length the copy is at a fixed distance, which attention with rotary positions learns in a few hundred
 * SFT steps; with variable lengths (3–4 operands of 1–3 digits) the 0.1 M-parameter policy still copied
 * only ~5 % of the expressions correctly after 1000 steps (measured), too rare a success for RL to build on.
 *
 * <p>{@code arith-small} ({@link #SMALL_DIGITS}, {@code dd o d o dd}) is the same task with fewer digits to copy, for
 * a policy that must learn copying from few demonstrations (a random model at a 151,936-token vocabulary).
 *
 * <p>The train and held-out splits are disjoint: both come from one seeded stream of distinct
 * expressions, the held-out split first.
 */
public final class ArithTask {
    private final List<Problem> train;
    private final List<Problem> heldOut;

    /** The default shape {@code ddd o dd o ddd} ({@link #DIGITS}). */
    public ArithTask(long seed, int trainSize, int heldOutSize) {
        this(seed, trainSize, heldOutSize, DIGITS);
    }

    /**
     * Expressions whose operands have {@code digits[i]} digits (at least two operands, 1–9 digits each), joined by
     * {@code + - *} with at least one multiplication.
     */
    public ArithTask(long seed, int trainSize, int heldOutSize, int[] digits) {
        if (trainSize < 0 || heldOutSize < 0) throw new IllegalArgumentException("split sizes must be >= 0");
        checkShape(digits);
        double distinct = distinctExpressions(digits);
        if ((double) trainSize + heldOutSize > distinct / 2)
            throw new IllegalArgumentException("the shape " + java.util.Arrays.toString(digits) + " has only " + (long) distinct
                    + " distinct expressions; " + trainSize + " + " + heldOutSize + " problems need at least twice as many");
        this.digits = digits.clone();
        Random rnd = new Random(seed);
        Set<String> seen = new HashSet<>();
        heldOut = generate(rnd, seen, heldOutSize, "arith-test-", this.digits);
        train = generate(rnd, seen, trainSize, "arith-train-", this.digits);
    }

    private final int[] digits;

    /** The operands' digit counts. */
    public int[] digits() {
        return digits.clone();
    }

    static void checkShape(int[] digits) {
        if (digits == null || digits.length < 2) throw new IllegalArgumentException("an arith shape needs at least two operands, got "
                + java.util.Arrays.toString(digits));
        for (int d : digits)
            if (d < 1 || d > 9) throw new IllegalArgumentException("operand digits must be 1..9, got " + d + " in " + java.util.Arrays.toString(digits));
    }

    /** Distinct expressions of the shape: operand values times the operator choices that contain a {@code *}. */
    static double distinctExpressions(int[] digits) {
        double n = 1;
        for (int d : digits) n *= 9 * Math.pow(10, d - 1);
        int ops = digits.length - 1;
        return n * (Math.pow(3, ops) - Math.pow(2, ops));
    }

    public List<Problem> train() {
        return train;
    }

    public List<Problem> heldOut() {
        return heldOut;
    }

    private static List<Problem> generate(Random rnd, Set<String> seen, int n, String prefix, int[] digits) {
        List<Problem> out = new ArrayList<>(n);
        while (out.size() < n) {
            String expr = expression(rnd, digits);
            if (!seen.add(expr)) continue;
            String value = evaluate(expr).toString();
            out.add(new Problem(prefix + out.size(), expr, List.of(value),
                    List.of(new Problem.ToolStep("python", "print(" + expr + ")"))));
        }
        return out;
    }

    /** Digits of the operands: {@code ddd o dd o ddd}, always 10 characters. */
    static final int[] DIGITS = {3, 2, 3};

    /** {@code arith-small}'s operands: {@code dd o d o dd}, always 7 characters (e.g. {@code 47*3-58}). */
    static final int[] SMALL_DIGITS = {2, 1, 2};

    static String expression(Random rnd) {
        return expression(rnd, DIGITS);
    }

    static String expression(Random rnd, int[] digits) {
        StringBuilder sb = new StringBuilder();
        boolean hasProduct = false;
        for (int i = 0; i < digits.length; i++) {
            if (i > 0) {
                char op = "+-*".charAt(rnd.nextInt(3));
                if (i == digits.length - 1 && !hasProduct) op = '*';  // at least one multiplication
                hasProduct |= op == '*';
                sb.append(op);
            }
            int lo = (int) Math.pow(10, digits[i] - 1);
            sb.append(lo + rnd.nextInt(9 * lo));
        }
        return sb.toString();
    }

    /** Exact value of a {@code + - *} expression over non-negative integers (precedence: * before + -). */
    static BigInteger evaluate(String expr) {
        BigInteger total = BigInteger.ZERO, term = null;
        int sign = 1;
        int i = 0;
        while (i < expr.length()) {
            int j = i;
            while (j < expr.length() && Character.isDigit(expr.charAt(j))) j++;
            if (j == i) throw new IllegalArgumentException("expected a number at " + i + " in " + expr);
            BigInteger v = new BigInteger(expr.substring(i, j));
            term = term == null ? v : term.multiply(v);
            if (j == expr.length() || expr.charAt(j) != '*') {
                total = sign > 0 ? total.add(term) : total.subtract(term);
                term = null;
                if (j < expr.length()) sign = expr.charAt(j) == '+' ? 1 : -1;
            }
            i = j + 1;
        }
        return total;
    }
}
