package ai.arbor.reward;

import ai.arbor.reward.Tok.Kind;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.function.Predicate;

/**
 * The structural reading of an answer (the structural stage of {@link MathGrader}): a scalar, a
 * sequence (tuple, interval, set or bare comma list), a matrix, a union, or an equation.
 */
sealed interface Shape {

    /** A single expression, still as tokens (parsed later by {@link ExprParser}). */
    record Scalar(List<Tok> toks) implements Shape {
    }

    /**
     * {@code open}/{@code close}: {@code ( ) [ ]} for tuples and intervals, <code>{ }</code> for a set
     * ({@code \{…\}}), 0 for a bare comma list.
     */
    record Seq(char open, char close, List<Shape> items) implements Shape {
        boolean bare() {
            return open == 0;
        }

        boolean set() {
            return open == '{';
        }

        String kind() {
            return bare() ? "list" : set() ? "set" : (open == '(' && close == ')') ? "tuple" : "interval";
        }
    }

    record Matrix(List<List<Shape>> rows) implements Shape {
        int cols() {
            return rows.isEmpty() ? 0 : rows.get(0).size();
        }
    }

    record Union(List<Shape> parts) implements Shape {
    }

    /** {@code lhs = rhs}; {@code namedLhs}: the left side is a name ({@code x}, {@code y_1}, {@code f(x)}). */
    record Equation(List<Tok> lhs, List<Tok> rhs, boolean namedLhs) implements Shape {
    }

    int MAX_DEPTH = 6;
    Set<String> GREEK_NAMES = Set.of("alpha", "beta", "gamma", "delta", "theta", "lambda", "mu", "phi", "psi", "rho",
            "sigma", "tau", "omega");
    Set<String> MATRIX_ENVS = Set.of("pmatrix", "bmatrix", "Bmatrix", "vmatrix", "Vmatrix", "matrix", "smallmatrix", "array");

    static Shape of(List<Tok> toks) {
        return parse(toks, 0);
    }

    private static Shape parse(List<Tok> toks, int depth) {
        if (depth > MAX_DEPTH || toks.isEmpty()) return new Scalar(toks);
        // x \in [a, b]
        if (toks.size() > 2 && toks.get(0).is(Kind.LETTER) && toks.get(1).isCmd("in")) toks = toks.subList(2, toks.size());
        List<List<Tok>> parts = splitTop(toks, t -> t.isCmd("cup"));
        if (parts.size() > 1) {
            List<Shape> ps = new ArrayList<>();
            for (List<Tok> p : parts) ps.add(parse(p, depth + 1));
            return new Union(ps);
        }
        Matrix m = matrix(toks, depth);
        if (m != null) return m;
        if (enclosed(toks)) {
            List<List<Tok>> items = splitTop(toks.subList(1, toks.size() - 1), t -> t.isSym(','));
            if (items.size() >= 2) {
                List<Shape> xs = new ArrayList<>();
                for (List<Tok> it : items) xs.add(parse(it, depth + 1));
                return new Seq(toks.get(0).text().charAt(0), toks.get(toks.size() - 1).text().charAt(0), xs);
            }
        }
        if (toks.get(0).isEsc('{') && closes(toks, 0) == toks.size() - 1) {
            return new Seq('{', '}', items(toks.subList(1, toks.size() - 1), depth));
        }
        List<List<Tok>> items = splitTop(toks, t -> t.isSym(','));
        if (items.size() >= 2) {
            List<Tok> number = thousands(items);
            if (number != null) return new Scalar(number);
            return new Seq((char) 0, (char) 0, items(toks, depth));
        }
        List<List<Tok>> pm = plusMinus(toks);
        if (pm != null) {
            List<Shape> xs = new ArrayList<>();
            for (List<Tok> it : pm) xs.add(parse(it, depth + 1));
            return new Seq((char) 0, (char) 0, xs);
        }
        int eq = -1;
        int d = 0;
        for (int i = 0; i < toks.size(); i++) {
            d += delta(toks.get(i));
            if (d == 0 && toks.get(i).isSym('=')) eq = i;
        }
        if (eq > 0 && eq < toks.size() - 1) {
            List<Tok> lhs = toks.subList(0, eq);
            List<Tok> rhs = toks.subList(eq + 1, toks.size());
            // a = b = c: the last side is the value
            for (int i = lhs.size() - 1; i >= 0; i--) if (lhs.get(i).isSym('=')) { lhs = lhs.subList(i + 1, lhs.size()); break; }
            return new Equation(lhs, rhs, isName(lhs));
        }
        return new Scalar(toks);
    }

    /** Items of a set or bare list; an item {@code a \pm b} counts as two. */
    private static List<Shape> items(List<Tok> toks, int depth) {
        List<Shape> xs = new ArrayList<>();
        for (List<Tok> it : splitTop(toks, t -> t.isSym(','))) {
            List<List<Tok>> pm = plusMinus(it);
            if (pm != null) for (List<Tok> p : pm) xs.add(parse(p, depth + 1));
            else xs.add(parse(it, depth + 1));
        }
        return xs;
    }

    /** {@code a \pm b} → [a+(b), a-(b)]; {@code \pm b} → [b, -(b)]; null without exactly one top-level ±. */
    private static List<List<Tok>> plusMinus(List<Tok> toks) {
        int at = -1;
        int d = 0;
        for (int i = 0; i < toks.size(); i++) {
            d += delta(toks.get(i));
            if (d == 0 && (toks.get(i).isCmd("pm") || toks.get(i).isCmd("mp"))) {
                if (at >= 0) return null;
                at = i;
            }
        }
        if (at < 0 || at == toks.size() - 1) return null;
        boolean mp = toks.get(at).isCmd("mp");
        List<Tok> a = toks.subList(0, at);
        List<Tok> b = toks.subList(at + 1, toks.size());
        List<Tok> plus = new ArrayList<>(a);
        List<Tok> minus = new ArrayList<>(a);
        if (!a.isEmpty()) plus.add(Tok.sym('+'));
        minus.add(Tok.sym('-'));
        plus.add(Tok.sym('('));
        plus.addAll(b);
        plus.add(Tok.sym(')'));
        minus.add(Tok.sym('('));
        minus.addAll(b);
        minus.add(Tok.sym(')'));
        return mp ? List.of(minus, plus) : List.of(plus, minus);
    }

    /** {@code 10,080} and {@code 11,111,111,100}: comma-grouped digits read as one number. */
    private static List<Tok> thousands(List<List<Tok>> items) {
        StringBuilder digits = new StringBuilder();
        boolean negative = false;
        for (int k = 0; k < items.size(); k++) {
            List<Tok> it = items.get(k);
            if (k == 0 && it.size() == 2 && it.get(0).isSym('-')) {
                negative = true;
                it = it.subList(1, 2);
            }
            if (it.size() != 1 || !it.get(0).is(Kind.NUM)) return null;
            String s = it.get(0).text();
            boolean last = k == items.size() - 1;
            if (k == 0) {
                if (s.contains(".") || s.length() > 3 || s.startsWith("0")) return null;
            } else {
                int dot = s.indexOf('.');
                int intLen = dot < 0 ? s.length() : dot;
                if (intLen != 3 || (dot >= 0 && !last)) return null;
            }
            digits.append(s);
        }
        List<Tok> out = new ArrayList<>();
        if (negative) out.add(Tok.sym('-'));
        out.add(new Tok(Kind.NUM, digits.toString()));
        return out;
    }

    private static Matrix matrix(List<Tok> toks, int depth) {
        if (toks.size() < 8 || !toks.get(0).isCmd("begin") || !toks.get(1).is(Kind.LBRACE)) return null;
        int envEnd = LatexNormalizer.matchBrace(toks, 1);
        if (envEnd < 0) return null;
        StringBuilder env = new StringBuilder();
        for (int i = 2; i < envEnd; i++) env.append(toks.get(i).text());
        if (!MATRIX_ENVS.contains(env.toString())) return null;
        int end = -1;
        for (int i = toks.size() - 1; i > envEnd; i--) if (toks.get(i).isCmd("end")) { end = i; break; }
        if (end < 0 || end + 1 >= toks.size() || LatexNormalizer.matchBrace(toks, end + 1) != toks.size() - 1) return null;
        int start = envEnd + 1;
        if (env.toString().equals("array") && start < end && toks.get(start).is(Kind.LBRACE)) { // column spec
            int specEnd = LatexNormalizer.matchBrace(toks, start);
            if (specEnd < 0) return null;
            start = specEnd + 1;
        }
        List<List<Shape>> rows = new ArrayList<>();
        for (List<Tok> row : splitTop(toks.subList(start, end), t -> t.isEsc('\\'))) {
            if (row.isEmpty()) continue; // a trailing \\
            List<Shape> cells = new ArrayList<>();
            for (List<Tok> c : splitTop(row, t -> t.isSym('&'))) cells.add(parse(c, depth + 1));
            rows.add(cells);
        }
        if (rows.isEmpty()) return null;
        for (List<Shape> r : rows) if (r.size() != rows.get(0).size()) return null;
        return new Matrix(rows);
    }

    /** The name on the left of {@code x = 3}: a letter or Greek letter, optionally subscripted, or {@code f(x)}. */
    private static boolean isName(List<Tok> lhs) {
        if (lhs.isEmpty()) return false;
        Tok first = lhs.get(0);
        boolean letter = first.is(Kind.LETTER) || (first.is(Kind.CMD) && isGreek(first.text()));
        if (!letter) return false;
        if (lhs.size() == 1) return true;
        if (lhs.get(1).isSym('_')) {
            if (lhs.size() == 3) return true;
            return lhs.size() >= 4 && lhs.get(2).is(Kind.LBRACE) && LatexNormalizer.matchBrace(lhs, 2) == lhs.size() - 1;
        }
        if (lhs.get(1).isSym('(') && lhs.get(lhs.size() - 1).isSym(')')) {
            for (int i = 2; i < lhs.size() - 1; i++) {
                Tok t = lhs.get(i);
                if (!(t.is(Kind.LETTER) || t.isSym(','))) return false;
            }
            return lhs.size() > 3;
        }
        return false;
    }

    private static boolean isGreek(String s) {
        return GREEK_NAMES.contains(s);
    }

    /** Whether the first token is ( or [ and its partner (any of ) ]) is the last token. */
    private static boolean enclosed(List<Tok> toks) {
        if (toks.size() < 2) return false;
        Tok a = toks.get(0);
        Tok z = toks.get(toks.size() - 1);
        if (!(a.isSym('(') || a.isSym('[')) || !(z.isSym(')') || z.isSym(']'))) return false;
        int d = 0;
        for (int i = 0; i < toks.size(); i++) {
            d += delta(toks.get(i));
            if (d == 0) return i == toks.size() - 1;
        }
        return false;
    }

    /** Index of the token closing the bracket opened at {@code open}, or -1. */
    private static int closes(List<Tok> toks, int open) {
        int d = 0;
        for (int i = open; i < toks.size(); i++) {
            d += delta(toks.get(i));
            if (d == 0) return i;
        }
        return -1;
    }

    /** Bracket depth change: ( [ { \{ \begin open; ) ] } \} \end close. */
    private static int delta(Tok t) {
        if (t.isSym('(') || t.isSym('[') || t.is(Kind.LBRACE) || t.isEsc('{') || t.isCmd("begin") || t.isCmd("lfloor") || t.isCmd("lceil")) return 1;
        if (t.isSym(')') || t.isSym(']') || t.is(Kind.RBRACE) || t.isEsc('}') || t.isCmd("end") || t.isCmd("rfloor") || t.isCmd("rceil")) return -1;
        return 0;
    }

    /** Splits at top-level tokens matching {@code sep}. */
    private static List<List<Tok>> splitTop(List<Tok> toks, Predicate<Tok> sep) {
        List<List<Tok>> out = new ArrayList<>();
        int d = 0;
        int from = 0;
        for (int i = 0; i < toks.size(); i++) {
            Tok t = toks.get(i);
            if (d == 0 && sep.test(t)) {
                out.add(toks.subList(from, i));
                from = i + 1;
            } else {
                d += delta(t);
            }
        }
        out.add(toks.subList(from, toks.size()));
        return out;
    }
}
