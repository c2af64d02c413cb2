package ai.arbor.cli;

import ai.arbor.train.TrainingRun;
import java.io.PrintStream;
import java.util.Locale;
import java.util.Map;

/**
 * A one-line progress bar for {@link TrainingRun}: redrawn in place on a terminal (carriage return), one
 * line per 10 % otherwise (logs and pipes stay readable). Shows the live loss (SFT) or reward, accuracy and
 * tool calls per trajectory (RL).
 */
final class ProgressBar implements TrainingRun.Listener {
    private final PrintStream out;
    private final boolean terminal = System.console() != null;
    private long phaseStart;
    private int lastDecile = -1;

    ProgressBar(PrintStream out) {
        this.out = out;
    }

    @Override
    public void phase(String name, int steps) {
        phaseStart = System.nanoTime();
        lastDecile = -1;
    }

    @Override
    public void message(String text) {
        out.println(text);
    }

    @Override
    public void step(String phase, int step, int steps, Map<String, Object> m) {
        double elapsed = (System.nanoTime() - phaseStart) / 1e9;
        int width = 24, filled = (int) Math.round(width * (double) step / steps);
        String bar = "[" + "=".repeat(Math.max(0, filled - 1)) + (filled > 0 ? ">" : "") + " ".repeat(width - filled) + "]";
        String live = "sft".equals(phase)
                ? String.format(Locale.ROOT, "loss %.3f", num(m, "loss"))
                : String.format(Locale.ROOT, "reward %+.3f  acc %.3f  tools/traj %.2f  entropy %.3f", num(m, "reward"), num(m, "accuracy"),
                        num(m, "tool_calls"), num(m, "entropy"));
        double eta = step == 0 ? 0 : elapsed / step * (steps - step);
        String line = String.format(Locale.ROOT, "%-4s %4d/%-4d %s %s  %4.0fs (eta %3.0fs)", phase, step, steps, bar, live, elapsed, eta);
        if (terminal) {
            out.print("\r" + line);
            if (step == steps) out.println();
            out.flush();
        } else {
            int decile = (int) (10L * step / steps);
            if (decile != lastDecile || step == steps) {
                out.println(line);
                lastDecile = decile;
            }
        }
    }

    private static double num(Map<String, Object> m, String key) {
        return m.get(key) instanceof Number n ? n.doubleValue() : Double.NaN;
    }
}
