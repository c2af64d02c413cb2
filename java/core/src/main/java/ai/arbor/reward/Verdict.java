package ai.arbor.reward;

/**
 * What {@link MathGrader} decided about an answer, and which rule decided it — for reward metrics
 * (how often each rule fires, how often the grader could not decide) and for debugging a reward.
 *
 * @param outcome equal, not equal, or could not parse
 * @param rule    the stage that decided (for {@link Outcome#UNPARSEABLE}: the stage that gave up)
 * @param detail  a short human-readable reason, e.g. {@code "exact: 25 = 25"}, {@code "tuple brackets differ"}
 */
public record Verdict(Outcome outcome, Rule rule, String detail) {

    /** The three answers a grader can give. */
    public enum Outcome {
        EQUAL,
        NOT_EQUAL,
        /** Neither side could be decided: a side does not parse, or only the (absent or failed) symbolic check could tell. */
        UNPARSEABLE
    }

    /** The grader's stages, in the order they run (docs/rewards.md). */
    public enum Rule {
        /** No final answer was found in the response (no {@code \boxed{}}, no {@code <answer>}). */
        NO_ANSWER,
        /** Normalized strings; also text answers, multiple-choice letters, base-b numerals. */
        STRING,
        /** Constant values: exact rationals, then complex doubles with a tolerance. */
        NUMERIC,
        /** Expressions with free variables evaluated at fixed pseudo-random points. */
        SAMPLED,
        /** Tuples, intervals, sets, lists, matrices, unions, equations (elements graded recursively). */
        STRUCTURAL,
        /** sympy {@code simplify(a - b) == 0} through a sandbox. */
        SYMBOLIC
    }

    public Verdict {
        if (outcome == null) throw new IllegalArgumentException("outcome must not be null");
        if (rule == null) throw new IllegalArgumentException("rule must not be null");
        if (detail == null) detail = "";
    }

    public boolean isEqual() {
        return outcome == Outcome.EQUAL;
    }

    static Verdict equal(Rule rule, String detail) {
        return new Verdict(Outcome.EQUAL, rule, detail);
    }

    static Verdict notEqual(Rule rule, String detail) {
        return new Verdict(Outcome.NOT_EQUAL, rule, detail);
    }

    static Verdict unparseable(Rule rule, String detail) {
        return new Verdict(Outcome.UNPARSEABLE, rule, detail);
    }
}
