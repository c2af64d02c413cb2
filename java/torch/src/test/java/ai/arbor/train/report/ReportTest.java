package ai.arbor.train.report;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.awt.image.BufferedImage;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import javax.imageio.ImageIO;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ReportTest {

    @Test
    void metricsAreWrittenAsJsonLinesAndReadBackAsSeries(@TempDir Path dir) throws Exception {
        Path f = dir.resolve("m/metrics.jsonl");
        try (MetricsLog log = new MetricsLog(f)) {
            log.log(Map.of("step", 0, "reward", 0.25));
            log.log(Map.of("step", 1, "reward", 0.5, "kl", 0.01));
            assertArrayEquals(new double[] {0.25, 0.5}, log.series("reward"));
            assertTrue(Double.isNaN(log.series("kl")[0]));
        }
        List<String> lines = Files.readAllLines(f);
        assertEquals(2, lines.size());
        assertTrue(lines.get(1).contains("\"kl\":0.01"), lines.get(1));
    }

    @Test
    void plotIsAPngWithOneColouredLinePerSeries(@TempDir Path dir) throws Exception {
        double[] x = {0, 1, 2, 3};
        Path png = new LinePlot("test").add("reward", new LinePlot.Series("a", x, new double[] {0, 1, 2, 3}))
                .add("reward", new LinePlot.Series("b", x, new double[] {3, 2, 1, 0}))
                .add("entropy", new LinePlot.Series("a", x, new double[] {1, 1, 1, Double.NaN}))
                .write(dir.resolve("p.png"));
        BufferedImage img = ImageIO.read(png.toFile());
        assertEquals(1040, img.getWidth());
        int blue = 0, red = 0;
        for (int yy = 0; yy < img.getHeight(); yy++)
            for (int xx = 0; xx < img.getWidth(); xx++) {
                int rgb = img.getRGB(xx, yy) & 0xffffff;
                if (rgb == 0x1f77b4) blue++;
                if (rgb == 0xd62728) red++;
            }
        assertTrue(blue > 50 && red > 50, "both series drawn: blue=" + blue + " red=" + red);
    }
}
