package ai.arbor.reward;

import ai.arbor.reward.Tok.Kind;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Recursive-descent parser from normalized tokens ({@link LatexNormalizer}) to an {@link Expr}. Grammar:
 * <pre>
 * sum     := term (('+' | '-') term)*
 * term    := unary (('*' | \cdot | \times | '/' | \div) unary | implicit-factor)*
 * unary   := ('-' | '+') unary | power
 * power   := postfix ('^' script)*
 * postfix := primary '!'*
 * primary := number | mixed-number | letter[_sub] | \pi | \infty | greek | \frac{}{} | \sqrt[n]{}
 *          | \binom{}{} | function arg | (sum) | [sum] | {sum} | |sum| | \lfloor sum \rfloor | \lceil sum \rceil
 * </pre>
 * Conventions (documented in docs/rewards.md): juxtaposition multiplies ({@code 2x}, {@code 3\sqrt{13}},
 * {@code (a+5)(b+2)}); an integer directly followed by {@code \frac{p}{q}} of integers is a mixed number
 * ({@code 1\frac{4}{5} = 9/5}); {@code e} and {@code i} are Euler's number and the imaginary unit; a
 * function's argument without parentheses extends over a product but stops at the next function
 * ({@code \sin 2x \cos x = sin(2x)·cos(x)}); {@code \sin^2 x = (sin x)^2} and {@code \sin^{-1} x = arcsin x};
 * {@code \log} is natural, {@code \log_b} has base b; {@code 1.5e3} is scientific notation; letter runs
 * naming a function ({@code sqrt(2)}, {@code 2pi}) read as that function. Anything else (relations,
 * commas, {@code \pm}, unknown commands, base subscripts such as {@code 52_8}) fails with a reason.
 */
final class ExprParser {
    static final int MAX_TOKENS = 600;
    static final int MAX_DEPTH = 60;

    private static final Set<String> GREEK = Set.of("alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta",
            "theta", "iota", "kappa", "lambda", "mu", "nu", "xi", "rho", "sigma", "tau", "upsilon", "phi", "chi",
            "psi", "omega", "Gamma", "Delta", "Theta", "Lambda", "Xi", "Sigma", "Upsilon", "Phi", "Psi", "Omega");
    private static final Map<String, String> FUNCTIONS = Map.ofEntries(Map.entry("sin", "sin"),
            Map.entry("cos", "cos"), Map.entry("tan", "tan"), Map.entry("cot", "cot"), Map.entry("sec", "sec"),
            Map.entry("csc", "csc"), Map.entry("arcsin", "asin"), Map.entry("arccos", "acos"),
            Map.entry("arctan", "atan"), Map.entry("sinh", "sinh"), Map.entry("cosh", "cosh"),
            Map.entry("tanh", "tanh"), Map.entry("ln", "log"), Map.entry("log", "log"), Map.entry("exp", "exp"));
    private static final Map<String, String> INVERSE = Map.of("sin", "asin", "cos", "acos", "tan", "atan");
    /** Letter runs read as commands when a model writes them without a backslash. */
    private static final Set<String> BARE_NAMES = Set.of("sqrt", "sin", "cos", "tan", "cot", "sec", "csc", "log",
            "ln", "exp", "pi", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh");

    /** Result: the expression, or null with the reason. */
    record Result(Expr expr, String error) {
        boolean ok() {
            return expr != null;
        }
    }

    private static final class Fail extends RuntimeException {
        Fail(String m) {
            super(m, null, false, false);
        }
    }

    private final List<Tok> t;
    private int p;
    private int depth;
    private int absDepth;

    private ExprParser(List<Tok> toks) {
        this.t = toks;
    }

    static Result parse(List<Tok> toks) {
        if (toks.isEmpty()) return new Result(null, "empty");
        if (toks.size() > MAX_TOKENS) return new Result(null, "more than " + MAX_TOKENS + " tokens");
        ExprParser ps = new ExprParser(expandBareNames(toks));
        try {
            Expr e = ps.sum();
            if (ps.p != ps.t.size()) throw new Fail("unexpected '" + ps.t.get(ps.p).source() + "'");
            return new Result(e, null);
        } catch (Fail f) {
            return new Result(null, f.getMessage());
        } catch (ArithmeticException | IllegalArgumentException e) {
            return new Result(null, "bad number: " + e.getMessage());
        }
    }

    /**
     * Maximal runs of letters that name a function or pi become that command ({@code sqrt(2)}, {@code 2pi});
     * an unknown command that starts with a known one is split ({@code \\cotx → \\cot x}).
     */
    private static List<Tok> expandBareNames(List<Tok> toks) {
        List<Tok> out = new ArrayList<>(toks.size());
        boolean changed = false;
        for (int i = 0; i < toks.size(); i++) {
            if (toks.get(i).is(Kind.LETTER) && (i == 0 || !toks.get(i - 1).is(Kind.LETTER))) {
                int j = i;
                while (j < toks.size() && toks.get(j).is(Kind.LETTER)) j++;
                if (j - i >= 2) {
                    StringBuilder w = new StringBuilder();
                    for (int k = i; k < j; k++) w.append(toks.get(k).text());
                    if (BARE_NAMES.contains(w.toString())) {
                        out.add(Tok.cmd(w.toString()));
                        changed = true;
                        i = j - 1;
                        continue;
                    }
                }
            }
            Tok t = toks.get(i);
            if (t.is(Kind.CMD) && !known(t.text())) {
                // \cotx, \pix: a known command run into a variable name
                for (int cut = t.text().length() - 1; cut >= 2; cut--) {
                    String head = t.text().substring(0, cut);
                    if (FUNCTIONS.containsKey(head) || GREEK.contains(head) || head.equals("pi")) {
                        out.add(Tok.cmd(head));
                        for (char c : t.text().substring(cut).toCharArray()) out.add(new Tok(Kind.LETTER, String.valueOf(c)));
                        changed = true;
                        t = null;
                        break;
                    }
                }
                if (t == null) continue;
            }
            out.add(t);
        }
        return changed ? out : toks;
    }

    private static final Set<String> OTHER_KNOWN = Set.of("pi", "infty", "frac", "sqrt", "binom", "lfloor", "rfloor",
            "lceil", "rceil", "cdot", "times", "div", "pm", "mp");

    private static boolean known(String cmd) {
        return FUNCTIONS.containsKey(cmd) || GREEK.contains(cmd) || OTHER_KNOWN.contains(cmd);
    }

    private Tok peek() {
        return p < t.size() ? t.get(p) : null;
    }

    private boolean peekSym(char c) {
        Tok k = peek();
        return k != null && k.isSym(c);
    }

    private boolean peekCmd(String name) {
        Tok k = peek();
        return k != null && k.isCmd(name);
    }

    private void expectSym(char c) {
        if (!peekSym(c)) throw new Fail("expected '" + c + "'" + (peek() == null ? " at end" : " before '" + peek().source() + "'"));
        p++;
    }

    private void enter() {
        if (++depth > MAX_DEPTH) throw new Fail("nested deeper than " + MAX_DEPTH);
    }

    private Expr sum() {
        enter();
        List<Expr> terms = new ArrayList<>();
        terms.add(term());
        while (peekSym('+') || peekSym('-')) {
            boolean minus = peekSym('-');
            p++;
            Expr e = term();
            terms.add(minus ? new Expr.Neg(e) : e);
        }
        depth--;
        return terms.size() == 1 ? terms.get(0) : new Expr.Nary(false, terms);
    }

    private Expr term() {
        List<Expr> factors = new ArrayList<>();
        Expr acc = unary();
        while (true) {
            Tok k = peek();
            if (k == null) break;
            if (k.isSym('*') || k.isCmd("cdot") || k.isCmd("times")) {
                p++;
                factors.add(acc);
                acc = unary();
            } else if (k.isSym('/') || k.isCmd("div")) {
                p++;
                acc = new Expr.Div(acc, unary());
            } else if (startsFactor(k)) {
                factors.add(acc);
                acc = power();
            } else {
                break;
            }
        }
        factors.add(acc);
        return factors.size() == 1 ? factors.get(0) : new Expr.Nary(true, factors);
    }

    private Expr unary() {
        if (peekSym('-')) {
            p++;
            return new Expr.Neg(unary());
        }
        if (peekSym('+')) {
            p++;
            return unary();
        }
        return power();
    }

    private Expr power() {
        Expr base = postfix();
        while (peekSym('^')) {
            p++;
            base = new Expr.Pow(base, script());
            while (peekSym('!')) {
                p++;
                base = new Expr.Fn("factorial", List.of(base));
            }
        }
        return base;
    }

    /** The argument of ^: a brace group, a sign and one token, or one primary. */
    private Expr script() {
        if (peekSym('-')) {
            p++;
            return new Expr.Neg(script());
        }
        if (peekSym('+')) {
            p++;
            return script();
        }
        if (peek() == null) throw new Fail("nothing after '^'");
        return primary();
    }

    private Expr postfix() {
        Expr e = primary();
        while (peekSym('!')) {
            p++;
            e = new Expr.Fn("factorial", List.of(e));
        }
        return e;
    }

    private boolean startsFactor(Tok k) {
        switch (k.kind()) {
            case NUM, LETTER, LBRACE:
                return true;
            case SYM:
                return k.isSym('(') || k.isSym('[') || (k.isSym('|') && absDepth == 0);
            case CMD:
                String n = k.text();
                return n.equals("pi") || n.equals("infty") || n.equals("frac") || n.equals("sqrt") || n.equals("binom")
                        || n.equals("lfloor") || n.equals("lceil") || GREEK.contains(n) || FUNCTIONS.containsKey(n);
            default:
                return false;
        }
    }

    private Expr primary() {
        enter();
        Tok k = peek();
        if (k == null) throw new Fail("unexpected end");
        Expr e;
        switch (k.kind()) {
            case NUM -> e = number();
            case LETTER -> e = letter();
            case LBRACE -> {
                p++;
                e = sum();
                if (peek() == null || !peek().is(Kind.RBRACE)) throw new Fail("unbalanced '{'");
                p++;
            }
            case SYM -> {
                if (k.isSym('(') || k.isSym('[')) {
                    p++;
                    e = sum();
                    expectSym(k.isSym('(') ? ')' : ']');
                } else if (k.isSym('|') && absDepth == 0) {
                    p++;
                    absDepth++;
                    e = new Expr.Fn("abs", List.of(sum()));
                    absDepth--;
                    expectSym('|');
                } else {
                    throw new Fail("unexpected '" + k.source() + "'");
                }
            }
            case CMD -> e = command(k.text());
            default -> throw new Fail("unexpected '" + k.source() + "'");
        }
        depth--;
        return e;
    }

    private Expr number() {
        Tok k = t.get(p++);
        String lit = k.text();
        if (peekSym('_')) throw new Fail("base subscript on " + lit);
        // scientific notation: 1.5e3, 2E-4 (only when an integer follows e)
        Tok e = peek();
        if (e != null && e.is(Kind.LETTER) && (e.text().equals("e") || e.text().equals("E"))) {
            int q = p + 1;
            boolean neg = false;
            if (q < t.size() && (t.get(q).isSym('-') || t.get(q).isSym('+'))) {
                neg = t.get(q).isSym('-');
                q++;
            }
            if (q < t.size() && t.get(q).is(Kind.NUM) && !t.get(q).text().contains(".")) {
                p = q + 1;
                BigRational v = BigRational.parseDecimal(lit + "e" + (neg ? "-" : "") + t.get(q).text());
                if (v == null) throw new Fail("number too large: " + lit);
                return new Expr.Num(v, lit, true);
            }
        }
        BigRational v = BigRational.parseDecimal(lit);
        if (v == null) throw new Fail("number too large: " + lit);
        Expr.Num n = new Expr.Num(v, lit, lit.contains("."));
        // mixed number: 1\frac{4}{5}
        if (v.isInteger() && !n.decimal() && peekCmd("frac")) {
            int save = p;
            p++;
            Expr.Num a = integerGroup();
            Expr.Num b = a == null ? null : integerGroup();
            if (a != null && b != null) return new Expr.Nary(false, List.of(n, new Expr.Div(a, b)));
            p = save;
        }
        return n;
    }

    /** {NUM} with an integer, else null (position then undefined; callers restore it). */
    private Expr.Num integerGroup() {
        if (p + 2 < t.size() && t.get(p).is(Kind.LBRACE) && t.get(p + 1).is(Kind.NUM) && t.get(p + 2).is(Kind.RBRACE)
                && !t.get(p + 1).text().contains(".")) {
            String lit = t.get(p + 1).text();
            p += 3;
            return new Expr.Num(BigRational.parseDecimal(lit), lit, false);
        }
        return null;
    }

    private Expr letter() {
        String name = t.get(p++).text();
        if (peekSym('_')) return new Expr.Var(name + subscript());
        if (name.equals("e")) return new Expr.Const("e");
        if (name.equals("i")) return new Expr.Const("i");
        return new Expr.Var(name);
    }

    /** Consumes {@code _x} or {@code _{…}} and returns "_…" for a variable name. */
    private String subscript() {
        p++; // '_'
        Tok k = peek();
        if (k == null) throw new Fail("nothing after '_'");
        StringBuilder b = new StringBuilder("_");
        if (k.is(Kind.LBRACE)) {
            int end = LatexNormalizer.matchBrace(t, p);
            if (end < 0) throw new Fail("unbalanced '{'");
            for (int i = p + 1; i < end; i++) {
                Tok s = t.get(i);
                if (!(s.is(Kind.NUM) || s.is(Kind.LETTER) || (s.is(Kind.CMD) && GREEK.contains(s.text())))) throw new Fail("unsupported subscript");
                b.append(s.text());
            }
            p = end + 1;
        } else if (k.is(Kind.NUM) || k.is(Kind.LETTER)) {
            b.append(k.text());
            p++;
        } else {
            throw new Fail("unsupported subscript");
        }
        return b.toString();
    }

    private Expr group(String what) {
        Tok k = peek();
        if (k == null || !k.is(Kind.LBRACE)) throw new Fail(what + " needs a {group}");
        p++;
        Expr e = sum();
        if (peek() == null || !peek().is(Kind.RBRACE)) throw new Fail("unbalanced '{' in " + what);
        p++;
        return e;
    }

    private Expr command(String name) {
        p++;
        switch (name) {
            case "pi":
                return new Expr.Const("pi");
            case "infty":
                return new Expr.Const("infty");
            case "frac":
                return new Expr.Div(group("\\frac"), group("\\frac"));
            case "binom":
                return new Expr.Fn("binom", List.of(group("\\binom"), group("\\binom")));
            case "sqrt": {
                if (peekSym('[')) {
                    p++;
                    Expr n = sum();
                    expectSym(']');
                    return new Expr.Fn("root", List.of(peek() != null && peek().is(Kind.LBRACE) ? group("\\sqrt") : primary(), n));
                }
                return new Expr.Fn("sqrt", List.of(peek() != null && peek().is(Kind.LBRACE) ? group("\\sqrt") : primary()));
            }
            case "lfloor":
            case "lceil": {
                Expr e = sum();
                String close = name.equals("lfloor") ? "rfloor" : "rceil";
                if (!peekCmd(close)) throw new Fail("missing \\" + close);
                p++;
                return new Expr.Fn(name.equals("lfloor") ? "floor" : "ceil", List.of(e));
            }
            default:
                break;
        }
        if (GREEK.contains(name)) return new Expr.Var(peekSym('_') ? name + subscript() : name);
        String fn = FUNCTIONS.get(name);
        if (fn != null) return function(fn);
        throw new Fail("unsupported \\" + name);
    }

    private Expr function(String fn) {
        Expr power = null;
        Expr base = null;
        if (fn.equals("log") && peekSym('_')) {
            p++;
            base = script();
        }
        if (peekSym('^')) {
            p++;
            power = script();
        }
        if (fn.equals("log") && base == null && peekSym('_')) {
            p++;
            base = script();
        }
        if (power instanceof Expr.Neg neg && neg.e() instanceof Expr.Num one && one.value().equals(BigRational.ONE)
                && INVERSE.containsKey(fn)) {
            fn = INVERSE.get(fn);
            power = null;
        }
        Expr arg;
        if (peekSym('(')) {
            p++;
            arg = sum();
            expectSym(')');
        } else if (peek() != null && peek().is(Kind.LBRACE)) {
            arg = group("\\" + fn);
        } else {
            arg = implicitProduct();
        }
        Expr call = base == null ? new Expr.Fn(fn, List.of(arg)) : new Expr.Fn("log", List.of(arg, base));
        return power == null ? call : new Expr.Pow(call, power);
    }

    /** A function argument without parentheses: powers multiplied by juxtaposition, up to the next function. */
    private Expr implicitProduct() {
        List<Expr> f = new ArrayList<>();
        f.add(power());
        while (peek() != null && startsFactor(peek()) && !(peek().is(Kind.CMD) && FUNCTIONS.containsKey(peek().text()))) {
            f.add(power());
        }
        return f.size() == 1 ? f.get(0) : new Expr.Nary(true, f);
    }
}
