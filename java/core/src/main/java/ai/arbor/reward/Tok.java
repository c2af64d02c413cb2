package ai.arbor.reward;

import java.util.ArrayList;
import java.util.List;

/**
 * One LaTeX token of an answer. The grader works on tokens rather than on regular expressions over the
 * raw string, so that {@code \cot x} stays a command followed by a variable once spaces are gone and
 * {@code \frac12} can be braced the way TeX reads it.
 *
 * @param kind kind
 * @param text NUM: the digits (with at most one '.'); LETTER: one ASCII letter; CMD: the command name
 *             without the backslash; ESC: the one character after a backslash ({@code \{ \, \% \\});
 *             SYM: one character; braces and SPACE: the character
 */
record Tok(Kind kind, String text) {

    enum Kind { NUM, LETTER, CMD, ESC, LBRACE, RBRACE, SYM, SPACE }

    static final Tok SPACE = new Tok(Kind.SPACE, " ");
    static final Tok LBRACE = new Tok(Kind.LBRACE, "{");
    static final Tok RBRACE = new Tok(Kind.RBRACE, "}");

    static Tok sym(char c) {
        return new Tok(Kind.SYM, String.valueOf(c));
    }

    static Tok cmd(String name) {
        return new Tok(Kind.CMD, name);
    }

    boolean is(Kind k) {
        return kind == k;
    }

    boolean isSym(char c) {
        return kind == Kind.SYM && text.length() == 1 && text.charAt(0) == c;
    }

    boolean isCmd(String name) {
        return kind == Kind.CMD && text.equals(name);
    }

    boolean isEsc(char c) {
        return kind == Kind.ESC && text.charAt(0) == c;
    }

    /** The token as LaTeX source. */
    String source() {
        return switch (kind) {
            case CMD -> "\\" + text;
            case ESC -> "\\" + text;
            default -> text;
        };
    }

    /**
     * Splits LaTeX into tokens. Never throws: any character becomes some token. A few Unicode symbols
     * models emit are mapped to their LaTeX commands ({@code − × · π ∞ ≤ ≥ ± √}); the degree sign
     * becomes {@code \circ} after a {@code ^} so that the degree rule sees one form.
     */
    static List<Tok> tokenize(String s) {
        List<Tok> out = new ArrayList<>(s.length());
        int n = s.length();
        int i = 0;
        while (i < n) {
            char c = s.charAt(i);
            if (Character.isWhitespace(c)) {
                if (out.isEmpty() || !out.get(out.size() - 1).is(Kind.SPACE)) out.add(SPACE);
                i++;
            } else if (c == '\\') {
                if (i + 1 >= n) {
                    out.add(sym('\\'));
                    i++;
                } else if (isAsciiLetter(s.charAt(i + 1))) {
                    int j = i + 1;
                    while (j < n && isAsciiLetter(s.charAt(j))) j++;
                    out.add(cmd(s.substring(i + 1, j)));
                    i = j;
                } else {
                    out.add(new Tok(Kind.ESC, String.valueOf(s.charAt(i + 1))));
                    i += 2;
                }
            } else if (isDigit(c) || (c == '.' && i + 1 < n && isDigit(s.charAt(i + 1))
                    && (out.isEmpty() || !out.get(out.size() - 1).is(Kind.NUM)))) {
                int j = i;
                while (j < n && isDigit(s.charAt(j))) j++;
                if (j + 1 < n && s.charAt(j) == '.' && isDigit(s.charAt(j + 1))) {
                    j++;
                    while (j < n && isDigit(s.charAt(j))) j++;
                }
                out.add(new Tok(Kind.NUM, s.substring(i, j)));
                i = j;
            } else if (isAsciiLetter(c)) {
                out.add(new Tok(Kind.LETTER, String.valueOf(c)));
                i++;
            } else if (c == '{') {
                out.add(LBRACE);
                i++;
            } else if (c == '}') {
                out.add(RBRACE);
                i++;
            } else {
                switch (c) {
                    case '\u2212', '\u2013' -> out.add(sym('-'));
                    case '\u00d7' -> out.add(cmd("times"));
                    case '\u00b7', '\u22c5' -> out.add(cmd("cdot"));
                    case '\u00f7' -> out.add(cmd("div"));
                    case '\u03c0' -> out.add(cmd("pi"));
                    case '\u221e' -> out.add(cmd("infty"));
                    case '\u2264' -> out.add(cmd("leq"));
                    case '\u2265' -> out.add(cmd("geq"));
                    case '\u2260' -> out.add(cmd("neq"));
                    case '\u00b1' -> out.add(cmd("pm"));
                    case '\u221a' -> out.add(cmd("sqrt"));
                    case '\u00b0' -> {
                        out.add(sym('^'));
                        out.add(cmd("circ"));
                    }
                    default -> out.add(sym(c));
                }
                i++;
            }
        }
        return out;
    }

    static boolean isAsciiLetter(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    }

    static boolean isDigit(char c) {
        return c >= '0' && c <= '9';
    }

    /** Renders tokens back to LaTeX, with a space only where it separates a command from a letter. */
    static String render(List<Tok> toks) {
        StringBuilder b = new StringBuilder();
        Tok prev = null;
        for (Tok t : toks) {
            if (t.is(Kind.SPACE)) continue;
            if (prev != null && prev.is(Kind.CMD) && t.is(Kind.LETTER)) b.append(' ');
            b.append(t.source());
            prev = t;
        }
        return b.toString();
    }
}
