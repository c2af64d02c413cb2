package ai.arbor.reward;

import org.junit.jupiter.api.Test;

import java.util.List;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

/** SQuAD normalization, exact match over several gold answers, token F1 (hand-computed values). */
class QaGraderTest {

    @Test
    void squadNormalization() {
        // each step of normalize_answer: lower, remove punctuation, remove articles, fix whitespace
        assertEquals("quick brown fox", QaGrader.normalize("The Quick, Brown Fox!"));
        assertEquals("cat", QaGrader.normalize("  a  cat. "));
        assertEquals("apple", QaGrader.normalize("An apple"));
        assertEquals("", QaGrader.normalize("the the a an"));
        assertEquals("usa", QaGrader.normalize("U.S.A."));
        assertEquals("rocknroll", QaGrader.normalize("rock-n-roll"), "hyphens are punctuation and vanish");
        assertEquals("hello world", QaGrader.normalize("Hello\tworld\n"));
        assertEquals("banana", QaGrader.normalize("a banana"), "the article goes, the a's inside words stay");
        assertEquals("anthem", QaGrader.normalize("anthem"), "'an' inside a word is not an article");
        assertEquals("théâtre", QaGrader.normalize("Théâtre"), "non-ASCII letters are kept");
        assertEquals("1976", QaGrader.normalize("1976."));
        assertEquals("50", QaGrader.normalize("$50"));
    }

    @Test
    void exactMatchAgainstAnyGold() {
        List<String> golds = List.of("Denver Broncos", "The Broncos");
        assertTrue(QaGrader.exactMatch("denver broncos", golds));
        assertTrue(QaGrader.exactMatch("the broncos!", golds));
        assertTrue(QaGrader.exactMatch("Broncos", golds));
        assertFalse(QaGrader.exactMatch("Denver", golds));
        assertFalse(QaGrader.exactMatch("Carolina Panthers", golds));
    }

    @Test
    void f1OnPartialOverlaps() {
        // "cat sat on mat" vs "cat on mat": common 3, P = 3/4, R = 3/3, F1 = 2·0.75·1/1.75
        assertEquals(2 * 0.75 / 1.75, QaGrader.f1("the cat sat on the mat", "a cat on a mat"), 1e-12);
        // repeated tokens count once per occurrence in gold: common 1, P = 1/3, R = 1/2, F1 = 0.4
        assertEquals(0.4, QaGrader.f1("red red red", "red blue"), 1e-12);
        assertEquals(1.0, QaGrader.f1("The Denver Broncos", "denver broncos"), 1e-12);
        assertEquals(0.0, QaGrader.f1("Carolina Panthers", "Denver Broncos"), 0);
        // SQuAD 2.0 rule for empty token lists
        assertEquals(1.0, QaGrader.f1("the", "a"), 0);
        assertEquals(0.0, QaGrader.f1("the", "Broncos"), 0);
        // several golds: the best one (P = 1/2, R = 1 against "Broncos" → 2/3)
        assertEquals(2.0 / 3, QaGrader.f1("the Carolina Broncos", List.of("Denver Broncos", "Broncos")), 1e-12);
        assertEquals(0.5, QaGrader.f1("Broncos team", List.of("Denver Broncos")), 1e-12);
    }

    @Test
    void responsesAreReadFromAnswerTags() {
        QaGrader g = QaGrader.standard();
        String r = "<think>search</think><answer> The Denver Broncos </answer>";
        assertTrue(g.isCorrect(r, List.of("Denver Broncos")));
        assertFalse(g.isCorrect("Denver Broncos", List.of("Denver Broncos")), "no tag, no answer");
        assertEquals(0.5, g.f1Response("<answer>Broncos team</answer>", List.of("Denver Broncos")), 1e-12);
        assertEquals(0.0, g.f1Response("no answer", List.of("Denver Broncos")), 0);
        assertThrows(IllegalArgumentException.class, () -> g.isCorrect(r, List.of()));
        assertThrows(IllegalArgumentException.class, () -> QaGrader.normalize(null));
    }
}
