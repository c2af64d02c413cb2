package ai.arbor.reward;

import java.util.List;

/**
 * An answer after the string stage of {@link MathGrader} (see {@link LatexNormalizer}).
 *
 * @param tokens    canonical tokens, no whitespace
 * @param canonical the tokens rendered; two answers with equal canonical strings are equal
 * @param percent   a percent sign was removed
 * @param word      the answer in lower case with single spaces when it consists of letters only, else null
 * @param wordLike  the answer is text rather than a product of variables: letters only, and either
 *                  unwrapped from {@code \text{…}} or at least four letters ("east", "ellipse")
 * @param tooLong   the input exceeded {@link LatexNormalizer#MAX_CHARS} and was not read
 */
record NormalizedAnswer(List<Tok> tokens, String canonical, boolean percent, String word, boolean wordLike,
                        boolean tooLong) {
}
