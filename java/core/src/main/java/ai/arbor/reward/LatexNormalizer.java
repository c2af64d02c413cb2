package ai.arbor.reward;

import ai.arbor.reward.Tok.Kind;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

/**
 * The string stage of {@link MathGrader}: turns an answer into canonical tokens. The rules, in the order
 * they run (docs/rewards.md lists them with examples):
 * <ol>
 *   <li>delimiters and sizing: {@code $}, {@code \( \)}, {@code \left}/{@code \right} (and {@code \left.}),
 *       {@code \big…}, {@code \displaystyle} go; {@code \boxed{x}} is unwrapped;</li>
 *   <li>spacing: {@code \! \, \; \:} go (so {@code 10,\!080} keeps its digits together); {@code \ },
 *       {@code ~}, {@code \quad} become a space;</li>
 *   <li>synonyms: {@code \dfrac \tfrac \cfrac → \frac}, {@code \dbinom → \binom}, {@code \le → \leq},
 *       {@code \lbrace → \{}, {@code \vert → |}, {@code \langle x\rangle → (x)}, …;</li>
 *   <li>degrees ({@code ^\circ}, {@code ^{\circ}}, {@code °}, {@code \degree}), percent signs (recorded in
 *       {@link NormalizedAnswer#percent()}) and dollar signs go;</li>
 *   <li>{@code \text{…}}-like wrappers: {@code \text{ and }} / {@code \text{or}} become a comma; a wrapper
 *       of plain words after some math is a unit and goes together with a following {@code ^2};
 *       otherwise the wrapper is unwrapped (and the answer marked textual);</li>
 *   <li>TeX argument rules: {@code \frac12 → \frac{1}{2}}, {@code \sqrt3 → \sqrt{3}}, and {@code x^{2} → x^2}
 *       (a single-character group after {@code ^} or {@code _} loses its braces);</li>
 *   <li>trailing unit words from a fixed list ("5 cm", "3 square feet"), a trailing period, the words
 *       "and"/"or" between items (→ comma);</li>
 *   <li>a multiple-choice letter in parentheses {@code (C)} becomes {@code C}.</li>
 * </ol>
 * Whitespace is then dropped except where it separates a command from a letter.
 */
final class LatexNormalizer {
    private LatexNormalizer() {}

    /** Longer answers are not normalized (they are not answers); the grader reports them unparseable. */
    static final int MAX_CHARS = 4000;

    private static final Set<String> SIZING = Set.of("left", "right", "middle", "big", "Big", "bigg", "Bigg", "bigl",
            "bigr", "Bigl", "Bigr", "biggl", "biggr", "Biggl", "Biggr");
    private static final Set<String> DROP = Set.of("displaystyle", "textstyle", "scriptstyle",
            "scriptscriptstyle", "limits", "nolimits", "mathstrut", "strut", "hfill", "nonumber", "notag", "rm", "bf",
            "it", "negthinspace", "circ", "degree", "degrees", "ensuremath");
    private static final Set<String> SPACES = Set.of("quad", "qquad", "enspace", "enskip", "thinspace", "medspace",
            "thickspace");
    private static final Set<String> DROP_WITH_ARG = Set.of("hspace", "vspace", "phantom", "hphantom", "vphantom",
            "label", "tag");
    /** Wrappers whose content is kept (or dropped as a unit, for the first group). */
    private static final Set<String> UNIT_WRAPPERS = Set.of("text", "textnormal", "textrm", "mbox", "hbox", "mathrm",
            "textup", "textsf", "mathsf");
    private static final Set<String> WRAPPERS = Set.of("textbf", "textit", "texttt", "emph", "mathbf", "mathit",
            "mathtt", "boldsymbol", "bm", "mathbb", "mathcal", "operatorname", "boxed", "fbox", "framebox",
            "underline", "overline", "color");
    private static final Map<String, Tok> RENAME = Map.ofEntries(
            Map.entry("dfrac", Tok.cmd("frac")), Map.entry("tfrac", Tok.cmd("frac")), Map.entry("cfrac", Tok.cmd("frac")),
            Map.entry("dbinom", Tok.cmd("binom")), Map.entry("tbinom", Tok.cmd("binom")),
            Map.entry("le", Tok.cmd("leq")), Map.entry("leqslant", Tok.cmd("leq")),
            Map.entry("ge", Tok.cmd("geq")), Map.entry("geqslant", Tok.cmd("geq")), Map.entry("ne", Tok.cmd("neq")),
            Map.entry("lbrace", new Tok(Kind.ESC, "{")), Map.entry("rbrace", new Tok(Kind.ESC, "}")),
            Map.entry("lbrack", Tok.sym('[')), Map.entry("rbrack", Tok.sym(']')),
            Map.entry("langle", Tok.sym('(')), Map.entry("rangle", Tok.sym(')')),
            Map.entry("vert", Tok.sym('|')), Map.entry("lvert", Tok.sym('|')), Map.entry("rvert", Tok.sym('|')),
            Map.entry("mid", Tok.sym('|')), Map.entry("Vert", Tok.sym('|')), Map.entry("lVert", Tok.sym('|')),
            Map.entry("rVert", Tok.sym('|')), Map.entry("lt", Tok.sym('<')), Map.entry("gt", Tok.sym('>')),
            Map.entry("ast", Tok.sym('*')), Map.entry("colon", Tok.sym(':')), Map.entry("inf", Tok.cmd("infty")),
            Map.entry("cdotp", Tok.cmd("cdot")), Map.entry("varepsilon", Tok.cmd("epsilon")),
            Map.entry("varphi", Tok.cmd("phi")), Map.entry("vartheta", Tok.cmd("theta")),
            Map.entry("tg", Tok.cmd("tan")), Map.entry("ctg", Tok.cmd("cot")), Map.entry("arctg", Tok.cmd("arctan")),
            Map.entry("dots", Tok.cmd("ldots")), Map.entry("cdots", Tok.cmd("ldots")));
    /** Unit words dropped at the end of an answer (after a space); lower case. */
    static final Set<String> UNITS = Set.of("cm", "mm", "km", "m", "meter", "meters", "metre", "metres",
            "centimeter", "centimeters", "kilometer", "kilometers", "in", "inch", "inches", "ft", "foot", "feet", "yd",
            "yard", "yards", "mile", "miles", "mi", "mph", "kph", "units", "unit", "sq", "square", "cubic", "degree",
            "degrees", "deg", "radian", "radians", "rad", "dollar", "dollars", "cent", "cents", "euro", "euros", "hour",
            "hours", "hr", "hrs", "minute", "minutes", "min", "mins", "second", "seconds", "sec", "s", "day", "days",
            "week", "weeks", "month", "months", "year", "years", "g", "gram", "grams", "kg", "kilogram", "kilograms",
            "lb", "lbs", "pound", "pounds", "oz", "ounce", "ounces", "l", "liter", "liters", "litre", "litres", "ml",
            "gallon", "gallons", "percent", "points", "point", "people", "students", "ways", "times");

    /** Normalizes an answer; never throws. */
    static NormalizedAnswer normalize(String raw) {
        if (raw == null) raw = "";
        if (raw.length() > MAX_CHARS) return new NormalizedAnswer(List.of(), "", false, null, false, true);
        State st = new State();
        List<Tok> toks = rewrite(new ArrayList<>(Tok.tokenize(raw.replace("{,}", ","))), st);
        braceArguments(toks);
        trimEnds(toks);
        dropTrailingUnits(toks);
        wordsToCommas(toks);
        trimEnds(toks);
        String word = wordForm(toks);
        boolean wordLike = word != null && (st.textual || word.replace(" ", "").length() >= 4);
        List<Tok> dense = new ArrayList<>(toks.size());
        for (Tok t : toks) if (!t.is(Kind.SPACE)) dense.add(t);
        dropEmptyGroups(dense);
        if (dense.size() == 3 && dense.get(0).isSym('(') && dense.get(2).isSym(')') && dense.get(1).is(Kind.LETTER)
                && Character.isUpperCase(dense.get(1).text().charAt(0))) {
            dense = List.of(dense.get(1)); // multiple-choice letter: text, not a variable
            word = dense.get(0).text().toLowerCase(Locale.ROOT);
            wordLike = true;
        }
        return new NormalizedAnswer(List.copyOf(dense), Tok.render(dense), st.percent, word, wordLike, false);
    }

    private static final class State {
        boolean percent;
        boolean textual;
    }

    /** Pass 1: delimiters, spacing, synonyms, degrees, percent, wrappers. Works in place on a mutable list. */
    private static List<Tok> rewrite(List<Tok> in, State st) {
        List<Tok> out = new ArrayList<>(in.size());
        int i = 0;
        while (i < in.size()) {
            Tok t = in.get(i);
            switch (t.kind()) {
                case CMD -> {
                    String name = t.text();
                    if (SIZING.contains(name)) {
                        int j = skipSpaces(in, i + 1);
                        if (j < in.size() && in.get(j).isSym('.')) i = j; // \left. and \right. are invisible
                        i++;
                    } else if (DROP.contains(name)) {
                        if (name.equals("circ") || name.startsWith("degree")) removeTrailingCaret(out);
                        i++;
                    } else if (SPACES.contains(name)) {
                        out.add(Tok.SPACE);
                        i++;
                    } else if (DROP_WITH_ARG.contains(name)) {
                        int j = skipSpaces(in, i + 1);
                        int end = j < in.size() && in.get(j).is(Kind.LBRACE) ? matchBrace(in, j) : -1;
                        i = end < 0 ? i + 1 : end + 1;
                    } else if (UNIT_WRAPPERS.contains(name) || WRAPPERS.contains(name)) {
                        i = unwrap(in, i, out, st, UNIT_WRAPPERS.contains(name));
                    } else {
                        out.add(RENAME.getOrDefault(name, t));
                        i++;
                    }
                }
                case ESC -> {
                    char c = t.text().charAt(0);
                    switch (c) {
                        case ',', '!', ';', ':', '(', ')', '[', ']', '$', '>' -> { }
                        case ' ' -> out.add(Tok.SPACE);
                        case '%' -> st.percent = true;
                        default -> out.add(t);
                    }
                    i++;
                }
                case SYM -> {
                    char c = t.text().charAt(0);
                    if (c == '%') st.percent = true;
                    else if (c == '~') out.add(Tok.SPACE);
                    else if (c == '^' && isDegreeAfter(in, i + 1) >= 0) i = isDegreeAfter(in, i + 1) - 1;
                    else if (c != '$') out.add(t);
                    i++;
                }
                default -> {
                    out.add(t);
                    i++;
                }
            }
        }
        return out;
    }

    /** After a '^' at i-1: the index just past {@code \circ} or {@code {\circ}}, or -1. */
    private static int isDegreeAfter(List<Tok> in, int i) {
        int j = skipSpaces(in, i);
        if (j >= in.size()) return -1;
        if (in.get(j).isCmd("circ")) return j + 1;
        if (in.get(j).is(Kind.LBRACE)) {
            int k = skipSpaces(in, j + 1);
            if (k < in.size() && in.get(k).isCmd("circ")) {
                int m = skipSpaces(in, k + 1);
                if (m < in.size() && in.get(m).is(Kind.RBRACE)) return m + 1;
            }
        }
        return -1;
    }

    private static void removeTrailingCaret(List<Tok> out) {
        int k = out.size() - 1;
        while (k >= 0 && out.get(k).is(Kind.SPACE)) k--;
        if (k >= 0 && out.get(k).isSym('^')) out.subList(k, out.size()).clear();
    }

    /**
     * Handles {@code \text{…}}-like wrappers at {@code in[i]}: a comma for "and"/"or", nothing for a unit
     * after some math, else the content spliced back into {@code in} to be rewritten like the rest.
     * Returns the next index to process.
     */
    private static int unwrap(List<Tok> in, int i, List<Tok> out, State st, boolean unitWrapper) {
        String name = in.get(i).text();
        int j = skipSpaces(in, i + 1);
        if (name.equals("color") && j < in.size() && in.get(j).is(Kind.LBRACE)) { // \color{red}{x}: drop the colour
            int end = matchBrace(in, j);
            if (end < 0) return i + 1;
            j = skipSpaces(in, end + 1);
        }
        if (j >= in.size() || !in.get(j).is(Kind.LBRACE)) return i + 1; // \text without a group: drop the command
        int end = matchBrace(in, j);
        if (end < 0) return i + 1;
        List<Tok> inner = new ArrayList<>(in.subList(j + 1, end));
        String content = plainText(inner).trim().toLowerCase(Locale.ROOT);
        if (content.equals("and") || content.equals("or") || content.equals(",") || content.equals("and/or")) {
            out.add(Tok.sym(','));
            return end + 1;
        }
        if (unitWrapper && hasContent(out) && isWords(inner)) {
            int k = skipSpaces(in, end + 1);
            if (k < in.size() && in.get(k).isSym('^')) { // \mbox{ inches}^2
                int m = skipSpaces(in, k + 1);
                if (m < in.size() && in.get(m).is(Kind.LBRACE)) {
                    int e = matchBrace(in, m);
                    if (e >= 0) return e + 1;
                } else if (m < in.size()) {
                    return m + 1;
                }
            }
            return end + 1;
        }
        if (!name.equals("boxed") && !name.equals("fbox") && !name.equals("framebox")) st.textual = true;
        in.subList(i, end + 1).clear();
        in.addAll(i, inner);
        return i;
    }

    private static boolean hasContent(List<Tok> out) {
        for (Tok t : out) if (!t.is(Kind.SPACE) && !t.isSym(',')) return true;
        return false;
    }

    private static boolean isWords(List<Tok> toks) {
        boolean any = false;
        for (Tok t : toks) {
            if (t.is(Kind.LETTER)) any = true;
            else if (!t.is(Kind.SPACE) && !t.isSym('.') && !t.isSym('-')) return false;
        }
        return any;
    }

    private static String plainText(List<Tok> toks) {
        StringBuilder b = new StringBuilder();
        for (Tok t : toks) b.append(t.is(Kind.SPACE) ? " " : t.source());
        return b.toString();
    }

    /** Pass 2: TeX's one-token arguments get braces; single-character scripts lose theirs. */
    private static void braceArguments(List<Tok> toks) {
        for (int i = 0; i < toks.size(); i++) {
            Tok t = toks.get(i);
            if (t.isCmd("frac") || t.isCmd("binom")) {
                int p = ensureGroup(toks, i + 1);
                if (p >= 0) ensureGroup(toks, p);
            } else if (t.isCmd("sqrt")) {
                int j = skipSpaces(toks, i + 1);
                if (j < toks.size() && toks.get(j).isSym('[')) {
                    int k = j;
                    while (k < toks.size() && !toks.get(k).isSym(']')) k++;
                    if (k >= toks.size()) continue;
                    j = k + 1;
                }
                ensureGroup(toks, j);
            } else if (t.isSym('^') || t.isSym('_')) {
                int j = skipSpaces(toks, i + 1);
                if (j >= toks.size()) continue;
                toks.subList(i + 1, j).clear();
                j = i + 1;
                Tok a = toks.get(j);
                if (a.is(Kind.LBRACE)) {
                    int end = matchBrace(toks, j);
                    if (end < 0) continue;
                    int first = skipSpaces(toks, j + 1);
                    int last = end - 1;
                    while (last > first && toks.get(last).is(Kind.SPACE)) last--;
                    if (first == last && isSingleChar(toks.get(first))) {
                        Tok only = toks.get(first);
                        toks.subList(j, end + 1).clear();
                        toks.add(j, only);
                    }
                } else if (a.is(Kind.NUM) && a.text().length() > 1) {
                    toks.set(j, new Tok(Kind.NUM, a.text().substring(0, 1)));
                    toks.add(j + 1, new Tok(Kind.NUM, a.text().substring(1)));
                }
            }
        }
    }

    private static boolean isSingleChar(Tok t) {
        return (t.is(Kind.NUM) || t.is(Kind.LETTER)) && t.text().length() == 1;
    }

    /** Makes toks[skipSpaces(p)] a brace group; returns the index after it, or -1 when there is none. */
    private static int ensureGroup(List<Tok> toks, int p) {
        int j = skipSpaces(toks, p);
        if (j >= toks.size()) return -1;
        toks.subList(p, j).clear();
        j = p;
        Tok a = toks.get(j);
        switch (a.kind()) {
            case LBRACE -> {
                int end = matchBrace(toks, j);
                return end < 0 ? -1 : end + 1;
            }
            case NUM -> {
                toks.set(j, new Tok(Kind.NUM, a.text().substring(0, 1)));
                if (a.text().length() > 1) toks.add(j + 1, new Tok(Kind.NUM, a.text().substring(1)));
                toks.add(j + 1, Tok.RBRACE);
                toks.add(j, Tok.LBRACE);
                return j + 3;
            }
            case LETTER, CMD, ESC -> {
                toks.add(j + 1, Tok.RBRACE);
                toks.add(j, Tok.LBRACE);
                return j + 3;
            }
            default -> {
                return -1;
            }
        }
    }

    private static void trimEnds(List<Tok> toks) {
        while (!toks.isEmpty() && toks.get(0).is(Kind.SPACE)) toks.remove(0);
        while (!toks.isEmpty()) {
            Tok last = toks.get(toks.size() - 1);
            if (last.is(Kind.SPACE) || last.isSym('.')) toks.remove(toks.size() - 1);
            else break;
        }
    }

    /** "5 cm", "12 square feet", "3 cm^2": unit words after a space at the end go. */
    private static void dropTrailingUnits(List<Tok> toks) {
        for (int round = 0; round < 3; round++) {
            int end = toks.size();
            int k = end - 1;
            if (k >= 1 && toks.get(k).is(Kind.NUM) && toks.get(k - 1).isSym('^')) k -= 2; // cm^2
            int wordEnd = k;
            while (k >= 0 && toks.get(k).is(Kind.LETTER)) k--;
            if (wordEnd - k < 1 || k < 1 || !toks.get(k).is(Kind.SPACE)) return;
            StringBuilder w = new StringBuilder();
            for (int m = k + 1; m <= wordEnd; m++) w.append(toks.get(m).text());
            String word = w.toString().toLowerCase(Locale.ROOT);
            if (!UNITS.contains(word)) return;
            List<Tok> before = toks.subList(0, k);
            if (!hasContent(before) || isWords(before)) return; // "square units" alone, or a sentence
            toks.subList(k, end).clear();
            trimEnds(toks);
        }
    }

    /** "1 and 2", "x=1 or x=2": the words and/or between items become commas. */
    private static void wordsToCommas(List<Tok> toks) {
        for (int i = 1; i + 1 < toks.size(); i++) {
            if (!toks.get(i - 1).is(Kind.SPACE)) continue;
            for (String w : new String[]{"and", "or"}) {
                int n = w.length();
                if (i + n < toks.size() && toks.get(i + n).is(Kind.SPACE) && matchesWord(toks, i, w)
                        && hasContent(toks.subList(0, i)) && hasContent(toks.subList(i + n, toks.size()))
                        && !isWords(toks.subList(0, i))) {
                    toks.subList(i, i + n).clear();
                    toks.add(i, Tok.sym(','));
                    break;
                }
            }
        }
    }

    private static boolean matchesWord(List<Tok> toks, int i, String w) {
        for (int k = 0; k < w.length(); k++) {
            Tok t = toks.get(i + k);
            if (!t.is(Kind.LETTER) || Character.toLowerCase(t.text().charAt(0)) != w.charAt(k)) return false;
        }
        return true;
    }

    /** Lower-cased words with single spaces when the answer is only letters, else null. */
    private static String wordForm(List<Tok> toks) {
        StringBuilder b = new StringBuilder();
        int letters = 0;
        for (Tok t : toks) {
            if (t.is(Kind.LETTER)) {
                b.append(Character.toLowerCase(t.text().charAt(0)));
                letters++;
            } else if (t.is(Kind.SPACE)) {
                b.append(' ');
            } else {
                return null;
            }
        }
        return letters == 0 ? null : b.toString().trim();
    }

    private static void dropEmptyGroups(List<Tok> toks) {
        for (int i = toks.size() - 2; i >= 0; i--) {
            if (i + 1 >= toks.size()) continue; // after a removal near the end
            if (toks.get(i).is(Kind.LBRACE) && toks.get(i + 1).is(Kind.RBRACE)) {
                boolean argument = i > 0 && (toks.get(i - 1).is(Kind.CMD) || toks.get(i - 1).is(Kind.RBRACE));
                if (!argument) toks.subList(i, i + 2).clear();
            }
        }
    }

    static int skipSpaces(List<Tok> toks, int i) {
        while (i < toks.size() && toks.get(i).is(Kind.SPACE)) i++;
        return i;
    }

    /** Index of the RBRACE matching the LBRACE at {@code open}, or -1. */
    static int matchBrace(List<Tok> toks, int open) {
        int depth = 0;
        for (int i = open; i < toks.size(); i++) {
            if (toks.get(i).is(Kind.LBRACE)) depth++;
            else if (toks.get(i).is(Kind.RBRACE) && --depth == 0) return i;
        }
        return -1;
    }
}
