package ai.arbor.chat;

import java.beans.FeatureDescriptor;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import jinjava.javax.el.ELContext;
import jinjava.javax.el.ELResolver;

/**
 * The Python methods Hugging Face chat templates call on strings and dicts, which Jinjava (Java
 * objects underneath) lacks or gives Java semantics: on a string {@code startswith}, {@code endswith},
 * {@code strip}/{@code lstrip}/{@code rstrip} (optional characters), {@code split} (Python's: a literal
 * separator that keeps empty parts, or runs of whitespace), {@code upper}, {@code lower},
 * {@code replace}; on a dict {@code items}, {@code keys}, {@code values}, {@code get}. Java's own
 * {@code String.split} would take a regex and drop trailing empty parts, so
 * {@code "a</think>".split("</think>")[-1]} would be {@code "a"} instead of {@code ""}. Anything else is
 * left to Jinjava's resolvers. Package-private.
 */
final class PyMethods extends ELResolver {

    @Override
    public Object invoke(ELContext context, Object base, Object method, Class<?>[] paramTypes, Object[] params) {
        if (!(method instanceof String name)) return null;
        Object[] p = params == null ? new Object[0] : params;
        Object out;
        if (base instanceof String s) out = string(s, name, p);
        else if (base instanceof Map<?, ?> m) out = dict(m, name, p);
        else return null;
        if (out == NOT_MINE) return null;
        context.setPropertyResolved(true);
        return out;
    }

    private static final Object NOT_MINE = new Object();

    private static Object string(String s, String name, Object[] p) {
        return switch (name) {
            case "startswith" -> affix(s, p, name, true);
            case "endswith" -> affix(s, p, name, false);
            case "strip" -> strip(s, chars(p, name), true, true);
            case "lstrip" -> strip(s, chars(p, name), true, false);
            case "rstrip" -> strip(s, chars(p, name), false, true);
            case "split" -> split(s, p);
            case "upper" -> s.toUpperCase(Locale.ROOT);
            case "lower" -> s.toLowerCase(Locale.ROOT);
            case "replace" -> {
                if (p.length != 2 || !(p[0] instanceof String a) || !(p[1] instanceof String b))
                    throw new IllegalArgumentException("str.replace(old, new) wants two strings, got " + java.util.Arrays.toString(p));
                yield s.replace(a, b);
            }
            default -> NOT_MINE;
        };
    }

    private static Object dict(Map<?, ?> m, String name, Object[] p) {
        return switch (name) {
            case "items" -> {
                List<List<Object>> items = new ArrayList<>(m.size());
                for (Map.Entry<?, ?> e : m.entrySet()) items.add(java.util.Arrays.asList(e.getKey(), e.getValue()));
                yield items;
            }
            case "keys" -> new ArrayList<>(m.keySet());
            case "values" -> new ArrayList<>(m.values());
            case "get" -> {
                if (p.length < 1 || p.length > 2) throw new IllegalArgumentException("dict.get(key[, default]) wants 1 or 2 arguments, got " + p.length);
                yield m.containsKey(p[0]) ? m.get(p[0]) : p.length == 2 ? p[1] : null;
            }
            default -> NOT_MINE;
        };
    }

    private static boolean affix(String s, Object[] p, String name, boolean prefix) {
        if (p.length != 1) throw new IllegalArgumentException("str." + name + " wants one argument, got " + p.length);
        List<String> options = new ArrayList<>();
        if (p[0] instanceof String a) options.add(a);
        else if (p[0] instanceof Iterable<?> it) for (Object o : it) options.add(String.valueOf(o));   // a tuple of affixes
        else throw new IllegalArgumentException("str." + name + " wants a string or a tuple of strings, got " + p[0]);
        for (String a : options) if (prefix ? s.startsWith(a) : s.endsWith(a)) return true;
        return false;
    }

    private static String chars(Object[] p, String name) {
        if (p.length == 0 || p[0] == null) return null;
        if (p.length > 1 || !(p[0] instanceof String c)) throw new IllegalArgumentException("str." + name + " wants at most one string, got "
                + java.util.Arrays.toString(p));
        return c;
    }

    /** Python's {@code str.isspace} for one character (Java's {@code isWhitespace} misses U+00A0 and friends). */
    static boolean pySpace(char c) {
        return Character.isWhitespace(c) || Character.isSpaceChar(c) || (c >= 0x1c && c <= 0x1f) || c == 0x85;
    }

    static String strip(String s, String chars, boolean left, boolean right) {
        int a = 0, b = s.length();
        if (left) while (a < b && strippable(s.charAt(a), chars)) a++;
        if (right) while (b > a && strippable(s.charAt(b - 1), chars)) b--;
        return s.substring(a, b);
    }

    private static boolean strippable(char c, String chars) {
        return chars == null ? pySpace(c) : chars.indexOf(c) >= 0;
    }

    /** Python's {@code str.split(sep=None, maxsplit=-1)}. */
    static List<String> split(String s, Object[] p) {
        if (p.length > 2) throw new IllegalArgumentException("str.split wants at most 2 arguments, got " + p.length);
        String sep = p.length > 0 && p[0] != null ? requireString(p[0]) : null;
        int max = p.length > 1 ? ((Number) p[1]).intValue() : -1;
        List<String> out = new ArrayList<>();
        if (sep == null) {
            int i = 0, n = s.length();
            while (true) {
                while (i < n && pySpace(s.charAt(i))) i++;
                if (i == n) break;
                if (max >= 0 && out.size() == max) {
                    int end = n;
                    while (end > i && pySpace(s.charAt(end - 1))) end--;
                    out.add(s.substring(i, end));
                    break;
                }
                int j = i;
                while (j < n && !pySpace(s.charAt(j))) j++;
                out.add(s.substring(i, j));
                i = j;
            }
            return out;
        }
        if (sep.isEmpty()) throw new IllegalArgumentException("str.split: empty separator");
        int from = 0;
        while (max < 0 || out.size() < max) {
            int at = s.indexOf(sep, from);
            if (at < 0) break;
            out.add(s.substring(from, at));
            from = at + sep.length();
        }
        out.add(s.substring(from));
        return out;
    }

    private static String requireString(Object o) {
        if (o instanceof String s) return s;
        throw new IllegalArgumentException("str.split wants a string separator, got " + o);
    }

    // Not a property resolver: everything below declines.
    @Override
    public Object getValue(ELContext context, Object base, Object property) {
        return null;
    }

    @Override
    public Class<?> getType(ELContext context, Object base, Object property) {
        return null;
    }

    @Override
    public void setValue(ELContext context, Object base, Object property, Object value) {}

    @Override
    public boolean isReadOnly(ELContext context, Object base, Object property) {
        return true;
    }

    @Override
    public Iterator<FeatureDescriptor> getFeatureDescriptors(ELContext context, Object base) {
        return null;
    }

    @Override
    public Class<?> getCommonPropertyType(ELContext context, Object base) {
        return null;
    }
}
