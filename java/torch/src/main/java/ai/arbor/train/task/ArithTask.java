package ai.arbor.train.task;

import java.math.BigInteger;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Random;
import java.util.Set;

/**
 * {@code arith}: multi-step integer arithmetic, generated from a seed. Expressions of 3–4 operands with
 * up to 3 digits joined by {@code + - *} (standard precedence), e.g. {@code 417*38-2905+66}. A tiny
 * policy cannot multiply 3-digit numbers in its head reliably, but it can by writing the expression as a
 * program for the Python tool ({@code print(417*38-2905+66)}) and copying the result. Reward: the exact
 * integer.
 *
 * <p>The train and held-out splits are disjoint: both come from one seeded stream of distinct
 * expressions, the held-out split first.
 */
public final class ArithTask {
    private final List<Problem> train;
    private final List<Problem> heldOut;

    public ArithTask(long seed, int trainSize, int heldOutSize) {
        if (trainSize < 0 || heldOutSize < 0) throw new IllegalArgumentException("split sizes must be >= 0");
        Random rnd = new Random(seed);
        Set<String> seen = new HashSet<>();
        heldOut = generate(rnd, seen, heldOutSize, "arith-test-");
        train = generate(rnd, seen, trainSize, "arith-train-");
    }

    public List<Problem> train() {
        return train;
    }

    public List<Problem> heldOut() {
        return heldOut;
    }

    private static List<Problem> generate(Random rnd, Set<String> seen, int n, String prefix) {
        List<Problem> out = new ArrayList<>(n);
        while (out.size() < n) {
            String expr = expression(rnd);
            if (!seen.add(expr)) continue;
            String value = evaluate(expr).toString();
            out.add(new Problem(prefix + out.size(), expr, List.of(value),
                    List.of(new Problem.ToolStep("python", "print(" + expr + ")"))));
        }
        return out;
    }

    static String expression(Random rnd) {
        int operands = 3 + rnd.nextInt(2);
        StringBuilder sb = new StringBuilder();
        boolean hasProduct = false;
        for (int i = 0; i < operands; i++) {
            if (i > 0) {
                char op = "+-*".charAt(rnd.nextInt(3));
                if (i == operands - 1 && !hasProduct) op = '*';  // at least one multiplication
                hasProduct |= op == '*';
                sb.append(op);
            }
            int digits = 1 + rnd.nextInt(3);
            int lo = digits == 1 ? 2 : (int) Math.pow(10, digits - 1);
            sb.append(lo + rnd.nextInt((int) Math.pow(10, digits) - lo));
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
