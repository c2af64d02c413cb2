package ai.arbor.chat;

import java.math.BigDecimal;
import java.util.Collection;
import java.util.Iterator;
import java.util.Map;

/**
 * {@code json.dumps(x, ensure_ascii=False)} as Python writes it — the {@code tojson} filter Hugging Face
 * transformers gives chat templates ({@code chat_template_utils.py}): separators {@code ", "} and
 * {@code ": "} (with {@code indent}: {@code ","} and {@code ": "}, one item a line), keys in insertion
 * order, only {@code "}, {@code \}, and control characters below U+0020 escaped, floats as Python's
 * {@code repr}. Tool schemas and tool-call arguments are rendered with it, so a byte of difference here
 * is a token of difference in every prompt. Package-private.
 */
final class PyJson {
    private PyJson() {}

    /** {@code json.dumps(value, ensure_ascii=False, indent=indent)}; {@code indent} null: one line. */
    static String dumps(Object value, Integer indent) {
        StringBuilder sb = new StringBuilder();
        write(sb, value, indent, 0);
        return sb.toString();
    }

    private static void write(StringBuilder sb, Object v, Integer indent, int depth) {
        if (v == null) sb.append("null");
        else if (v instanceof CharSequence s) string(sb, s.toString());
        else if (v instanceof Boolean b) sb.append(b ? "true" : "false");
        else if (v instanceof Double || v instanceof Float) sb.append(floatRepr(((Number) v).doubleValue()));
        else if (v instanceof BigDecimal d) sb.append(floatRepr(d.doubleValue()));
        else if (v instanceof Number n) sb.append(n.toString());   // Integer, Long, BigInteger: Python ints
        else if (v instanceof Map<?, ?> m) {
            if (m.isEmpty()) {
                sb.append("{}");
                return;
            }
            sb.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : m.entrySet()) {
                if (!first) sb.append(indent == null ? ", " : ",");
                first = false;
                newline(sb, indent, depth + 1);
                Object k = e.getKey();
                if (!(k instanceof CharSequence) && !(k instanceof Number) && !(k instanceof Boolean) && k != null)
                    throw new IllegalArgumentException("tojson: a key of type " + k.getClass().getName() + " is not JSON (" + k + ")");
                string(sb, k == null ? "null" : k instanceof Boolean b ? (b ? "true" : "false") : k.toString());
                sb.append(": ");
                write(sb, e.getValue(), indent, depth + 1);
            }
            newline(sb, indent, depth);
            sb.append('}');
        } else if (v instanceof Collection<?> || v instanceof Object[]) {
            Iterator<?> it = v instanceof Collection<?> c ? c.iterator() : java.util.Arrays.asList((Object[]) v).iterator();
            if (!it.hasNext()) {
                sb.append("[]");
                return;
            }
            sb.append('[');
            boolean first = true;
            while (it.hasNext()) {
                if (!first) sb.append(indent == null ? ", " : ",");
                first = false;
                newline(sb, indent, depth + 1);
                write(sb, it.next(), indent, depth + 1);
            }
            newline(sb, indent, depth);
            sb.append(']');
        } else throw new IllegalArgumentException("tojson: a value of type " + v.getClass().getName() + " is not JSON (" + v + ")");
    }

    private static void newline(StringBuilder sb, Integer indent, int depth) {
        if (indent == null) return;
        sb.append('\n');
        sb.append(" ".repeat(indent * depth));
    }

    private static void string(StringBuilder sb, String s) {
        sb.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> sb.append("\\\"");
                case '\\' -> sb.append("\\\\");
                case '\n' -> sb.append("\\n");
                case '\r' -> sb.append("\\r");
                case '\t' -> sb.append("\\t");
                case '\b' -> sb.append("\\b");
                case '\f' -> sb.append("\\f");
                default -> {
                    if (c < 0x20) sb.append(String.format("\\u%04x", (int) c));
                    else sb.append(c);
                }
            }
        }
        sb.append('"');
    }

    /**
     * Python's {@code repr(float)}: the shortest digits that read back to the same double, positional for
     * decimal exponents in [-4, 16), else {@code d.ddde±XX}; {@code NaN}, {@code Infinity}, {@code -Infinity}
     * as {@code json.dumps} writes them.
     */
    static String floatRepr(double d) {
        if (Double.isNaN(d)) return "NaN";
        if (Double.isInfinite(d)) return d > 0 ? "Infinity" : "-Infinity";
        if (d == 0) return (1 / d < 0) ? "-0.0" : "0.0";
        // Double.toString's digits are the shortest round-trip ones (JDK 19+; on 17 they can carry one more
        // digit for a few values, which round-trip all the same); the layout is Python's.
        BigDecimal b = new BigDecimal(Double.toString(d)).stripTrailingZeros();
        String digits = b.unscaledValue().abs().toString();
        int exp = digits.length() - 1 - b.scale();           // decimal exponent of the first digit
        String sign = d < 0 ? "-" : "";
        if (exp >= -5 && exp < 16) {
            // Python: repr uses positional notation when -4 <= exp < 16 (exp = -5 is 1e-05 → exponent form)
            if (exp < -4) return sign + sci(digits, exp);
            if (exp >= digits.length() - 1) return sign + digits + "0".repeat(exp - digits.length() + 1) + ".0";
            if (exp >= 0) return sign + digits.substring(0, exp + 1) + "." + digits.substring(exp + 1);
            return sign + "0." + "0".repeat(-exp - 1) + digits;
        }
        return sign + sci(digits, exp);
    }

    private static String sci(String digits, int exp) {
        String mant = digits.length() == 1 ? digits : digits.charAt(0) + "." + digits.substring(1);
        return mant + "e" + (exp < 0 ? "-" : "+") + (Math.abs(exp) < 10 ? "0" : "") + Math.abs(exp);
    }
}
