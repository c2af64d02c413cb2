package ai.arbor.train.report;

import java.awt.BasicStroke;
import java.awt.Color;
import java.awt.Font;
import java.awt.Graphics2D;
import java.awt.RenderingHints;
import java.awt.image.BufferedImage;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import javax.imageio.ImageIO;

/**
 * Small multi-panel line charts written as PNG with Java2D (headless; no plotting dependency): one panel
 * per metric, one line per series (e.g. per recipe or seed), x = training step.
 */
public final class LinePlot {
    private static final Color[] PALETTE = {
        new Color(0x1f77b4), new Color(0xd62728), new Color(0x2ca02c), new Color(0xff7f0e),
        new Color(0x9467bd), new Color(0x8c564b), new Color(0xe377c2), new Color(0x7f7f7f),
    };

    /** One line: a label and its points. */
    public record Series(String label, double[] x, double[] y) {
        public Series {
            if (x.length != y.length) throw new IllegalArgumentException("x and y lengths differ: " + x.length + " vs " + y.length);
        }
    }

    private final String title;
    private final Map<String, List<Series>> panels = new LinkedHashMap<>();

    public LinePlot(String title) {
        this.title = title;
    }

    /** Adds a line to the panel named {@code metric} (panels appear in insertion order). */
    public LinePlot add(String metric, Series s) {
        panels.computeIfAbsent(metric, k -> new ArrayList<>()).add(s);
        return this;
    }

    /** Writes the chart; returns the path. */
    public Path write(Path png) throws IOException {
        System.setProperty("java.awt.headless", "true");
        int cols = Math.min(2, Math.max(1, panels.size())), rows = (panels.size() + cols - 1) / cols;
        int pw = 520, ph = 320, top = 40;
        BufferedImage img = new BufferedImage(cols * pw, top + Math.max(1, rows) * ph, BufferedImage.TYPE_INT_RGB);
        Graphics2D g = img.createGraphics();
        g.setRenderingHint(RenderingHints.KEY_ANTIALIASING, RenderingHints.VALUE_ANTIALIAS_ON);
        g.setColor(Color.WHITE);
        g.fillRect(0, 0, img.getWidth(), img.getHeight());
        g.setColor(Color.BLACK);
        g.setFont(new Font(Font.SANS_SERIF, Font.BOLD, 16));
        g.drawString(title, 12, 26);
        int i = 0;
        for (var e : panels.entrySet()) {
            drawPanel(g, e.getKey(), e.getValue(), (i % cols) * pw, top + (i / cols) * ph, pw, ph);
            i++;
        }
        g.dispose();
        if (png.getParent() != null) Files.createDirectories(png.getParent());
        ImageIO.write(img, "png", png.toFile());
        return png;
    }

    private static void drawPanel(Graphics2D g, String name, List<Series> series, int ox, int oy, int w, int h) {
        int l = ox + 60, r = ox + w - 15, t = oy + 28, b = oy + h - 45;
        double xmin = Double.POSITIVE_INFINITY, xmax = Double.NEGATIVE_INFINITY, ymin = xmin, ymax = xmax;
        for (Series s : series)
            for (int k = 0; k < s.x().length; k++) {
                if (!Double.isFinite(s.y()[k])) continue;
                xmin = Math.min(xmin, s.x()[k]);
                xmax = Math.max(xmax, s.x()[k]);
                ymin = Math.min(ymin, s.y()[k]);
                ymax = Math.max(ymax, s.y()[k]);
            }
        g.setFont(new Font(Font.SANS_SERIF, Font.BOLD, 13));
        g.setColor(Color.BLACK);
        g.drawString(name, l, oy + 18);
        g.setColor(new Color(0xcccccc));
        g.drawRect(l, t, r - l, b - t);
        if (!(xmin <= xmax)) return;  // no finite data
        if (xmax == xmin) xmax = xmin + 1;
        if (ymax == ymin) {
            ymax += 0.5 * Math.max(1e-9, Math.abs(ymax));
            ymin -= 0.5 * Math.max(1e-9, Math.abs(ymin));
        }
        g.setFont(new Font(Font.SANS_SERIF, Font.PLAIN, 11));
        for (int k = 0; k <= 4; k++) {
            double yv = ymin + (ymax - ymin) * k / 4;
            int yp = b - (int) Math.round((b - t) * (double) k / 4);
            g.setColor(new Color(0xeeeeee));
            g.drawLine(l + 1, yp, r - 1, yp);
            g.setColor(Color.DARK_GRAY);
            g.drawString(String.format(Locale.ROOT, "%.3g", yv), ox + 4, yp + 4);
            double xv = xmin + (xmax - xmin) * k / 4;
            int xp = l + (int) Math.round((r - l) * (double) k / 4);
            g.drawString(String.format(Locale.ROOT, "%.0f", xv), xp - 8, b + 15);
        }
        g.drawString("step", (l + r) / 2 - 10, b + 30);
        int c = 0, legendY = t + 14;
        for (Series s : series) {
            Color col = PALETTE[c++ % PALETTE.length];
            g.setColor(col);
            g.setStroke(new BasicStroke(1.8f));
            int px = -1, py = -1;
            for (int k = 0; k < s.x().length; k++) {
                if (!Double.isFinite(s.y()[k])) {
                    px = -1;
                    continue;
                }
                int xp = l + (int) Math.round((r - l) * (s.x()[k] - xmin) / (xmax - xmin));
                int yp = b - (int) Math.round((b - t) * (s.y()[k] - ymin) / (ymax - ymin));
                if (px >= 0) g.drawLine(px, py, xp, yp);
                else g.fillOval(xp - 2, yp - 2, 4, 4);
                px = xp;
                py = yp;
            }
            g.drawString(s.label(), r - 150, legendY);
            legendY += 13;
        }
        g.setStroke(new BasicStroke(1f));
    }
}
