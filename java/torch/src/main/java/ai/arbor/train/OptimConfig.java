package ai.arbor.train;

import java.util.Locale;

/**
 * AdamW (libtorch's, β = (0.9, 0.999)) with gradient clipping and a learning-rate schedule: linear warm-up from 0 over
 * {@code warmupSteps} optimizer steps, then constant or cosine decay to {@code minLrRatio · lr} at the
 * last step.
 *
 * <pre>
 *   lr(s) = lr · (s + 1) / warmup                                        s &lt; warmup
 *   lr(s) = lr                                                           constant
 *   lr(s) = lr · (r + (1 − r) · ½ (1 + cos(π · min(1, (s − warmup) / max(1, S − 1 − warmup)))))   cosine, r = minLrRatio
 * </pre>
 * (docs/algorithms.md §12)
 *
 * @param lr          peak learning rate
 * @param weightDecay AdamW's decoupled weight decay
 * @param eps         AdamW ε
 * @param maxGradNorm gradients are scaled so their global L2 norm is at most this; 0 = no clipping
 * @param warmupSteps linear warm-up length in optimizer steps
 * @param schedule    after the warm-up
 * @param minLrRatio  the cosine schedule's floor as a fraction of {@code lr}
 */
public record OptimConfig(double lr, double weightDecay, double eps, double maxGradNorm, int warmupSteps,
                          Schedule schedule, double minLrRatio) {

    /** What the learning rate does after the warm-up. */
    public enum Schedule {
        CONSTANT, COSINE;

        public static Schedule byName(String name) {
            try {
                return valueOf(name.trim().toUpperCase(Locale.ROOT));
            } catch (RuntimeException e) {
                throw new IllegalArgumentException("unknown schedule '" + name + "'; one of constant, cosine");
            }
        }
    }

    public OptimConfig {
        if (!(lr > 0) || Double.isInfinite(lr)) throw new IllegalArgumentException("lr must be finite and > 0, got " + lr);
        if (!(weightDecay >= 0) || Double.isInfinite(weightDecay)) throw new IllegalArgumentException("weightDecay must be finite and >= 0, got " + weightDecay);
        if (!(eps > 0)) throw new IllegalArgumentException("eps must be > 0, got " + eps);
        if (!(maxGradNorm >= 0) || Double.isInfinite(maxGradNorm)) throw new IllegalArgumentException("maxGradNorm must be finite and >= 0, got " + maxGradNorm);
        if (warmupSteps < 0) throw new IllegalArgumentException("warmupSteps must be >= 0, got " + warmupSteps);
        if (schedule == null) throw new IllegalArgumentException("schedule must not be null");
        if (!(minLrRatio >= 0 && minLrRatio <= 1)) throw new IllegalArgumentException("minLrRatio must be in [0, 1], got " + minLrRatio);
    }

    /** AdamW(lr, weight decay 0.01, β = (0.9, 0.999), ε = 1e-8), clip 1.0, no warm-up, constant. */
    public static OptimConfig adamW(double lr) {
        return new OptimConfig(lr, 0.01, 1e-8, 1.0, 0, Schedule.CONSTANT, 0.1);
    }

    public OptimConfig withLr(double peak) {
        return new OptimConfig(peak, weightDecay, eps, maxGradNorm, warmupSteps, schedule, minLrRatio);
    }

    public OptimConfig withWarmup(int steps) {
        return new OptimConfig(lr, weightDecay, eps, maxGradNorm, steps, schedule, minLrRatio);
    }

    public OptimConfig withSchedule(Schedule s) {
        return new OptimConfig(lr, weightDecay, eps, maxGradNorm, warmupSteps, s, minLrRatio);
    }

    public OptimConfig withMaxGradNorm(double norm) {
        return new OptimConfig(lr, weightDecay, eps, norm, warmupSteps, schedule, minLrRatio);
    }

    public OptimConfig withWeightDecay(double wd) {
        return new OptimConfig(lr, wd, eps, maxGradNorm, warmupSteps, schedule, minLrRatio);
    }

    /** The learning rate of optimizer step {@code step} (0-based) out of {@code totalSteps}. */
    public double lrAt(long step, long totalSteps) {
        if (step < warmupSteps) return lr * (step + 1) / warmupSteps;
        if (schedule == Schedule.CONSTANT || totalSteps <= warmupSteps) return lr;
        double progress = Math.min(1.0, (double) (step - warmupSteps) / Math.max(1, totalSteps - 1 - warmupSteps));
        return lr * (minLrRatio + (1 - minLrRatio) * 0.5 * (1 + Math.cos(Math.PI * progress)));
    }
}
