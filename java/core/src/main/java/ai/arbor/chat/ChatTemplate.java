package ai.arbor.chat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.hubspot.jinjava.Jinjava;
import com.hubspot.jinjava.JinjavaConfig;
import com.hubspot.jinjava.LegacyOverrides;
import com.hubspot.jinjava.el.JinjavaInterpreterResolver;
import com.hubspot.jinjava.interpret.Context;
import com.hubspot.jinjava.interpret.InterpreterFactory;
import com.hubspot.jinjava.interpret.JinjavaInterpreter;
import com.hubspot.jinjava.interpret.RenderResult;
import com.hubspot.jinjava.interpret.TemplateError;
import com.hubspot.jinjava.lib.filter.Filter;
import com.hubspot.jinjava.lib.fn.ELFunctionDefinition;
import com.hubspot.jinjava.objects.date.StrftimeFormatter;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.ZonedDateTime;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import jinjava.javax.el.CompositeELResolver;

/**
 * A checkpoint's Jinja chat template ({@code chat_template} of {@code tokenizer_config.json}, or
 * {@code chat_template.jinja} beside it), rendered the way Hugging Face transformers'
 * {@code apply_chat_template} does: {@code trim_blocks} and {@code lstrip_blocks} on, loop controls,
 * {@code raise_exception(msg)}, {@code strftime_now(fmt)}, a {@code tojson} that writes Python's
 * {@code json.dumps(x, ensure_ascii=False)} (optional {@code indent}), the tokenizer's special tokens
 * ({@code bos_token}, {@code eos_token}, {@code pad_token}, {@code unk_token}) as variables, and the
 * call's {@code messages}, {@code tools}, {@code add_generation_prompt} plus any keyword arguments
 * ({@code enable_thinking}, …).
 *
 * <p>The engine is Jinjava (values printed the Python way: {@code True}, {@code ['a']}); what the templates
 * take from Python that Jinjava lacks is supplied here: the string and dict methods of {@link PyMethods}, the
 * {@code tojson} above, {@code lstrip_blocks} as Jinja2 defines it, and the one slice with a step the templates
 * use, {@code name[::-1]}, which is rewritten to {@code (name|reverse)} before parsing (any other stepped
 * slice is refused when the template is loaded). A test renders conversations with this class
 * and with Python's jinja2 configured as transformers configures it and compares the strings and their token
 * ids (docs/chat.md).
 *
 * <p>Messages and tools are the JSON-shaped values of the Hugging Face API: maps with {@code role},
 * {@code content}, optionally {@code reasoning_content}, {@code tool_calls}
 * ({@code [{"type": "function", "function": {"name": …, "arguments": {…}}}]}), and lists of function
 * schemas. Thread-safe.
 */
public final class ChatTemplate {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Pattern TAG = Pattern.compile("\\{[{%].*?[}%]}", Pattern.DOTALL);
    private static final Pattern REVERSED = Pattern.compile("([A-Za-z_][A-Za-z0-9_]*(?:\\.[A-Za-z_][A-Za-z0-9_]*)*)\\[\\s*:\\s*:\\s*-1\\s*]");
    /** Jinja2's lstrip_blocks: spaces and tabs from a line's start up to a block tag or comment ({@code {%+} opts out). */
    private static final Pattern LSTRIP = Pattern.compile("(?m)^[ \\t]+(?=\\{%(?!\\+)|\\{#)");
    private static final Pattern STEPPED = Pattern.compile("\\[[^\\[\\]]*:[^\\[\\]]*:[^\\[\\]]*]");
    private static final List<String> SPECIALS = List.of("bos_token", "eos_token", "pad_token", "unk_token");

    private final String source;
    private final String jinjavaSource;
    private final Map<String, Object> specials;
    private final Jinjava jinjava;

    private ChatTemplate(String source, Map<String, Object> specials) {
        this.source = source;
        this.jinjavaSource = rewrite(source);
        this.specials = Map.copyOf(specials);
        CompositeELResolver resolver = new CompositeELResolver();
        resolver.add(new PyMethods());
        resolver.add(JinjavaInterpreterResolver.DEFAULT_RESOLVER_READ_ONLY);
        JinjavaConfig config = JinjavaConfig.newBuilder().withTrimBlocks(true).withElResolver(resolver)
                .withLegacyOverrides(LegacyOverrides.newBuilder().withUsePyishObjectMapper(true).withUseTrimmingForNotesAndExpressions(true).build()).withInterperterFactory(new PyOutput()).build();
        this.jinjava = new Jinjava(config);
        jinjava.getGlobalContext().registerFilter(new ToJson());
        jinjava.getGlobalContext().registerFunction(new ELFunctionDefinition("", "raise_exception", ChatTemplate.class, "raiseException", String.class));
        jinjava.getGlobalContext().registerFunction(new ELFunctionDefinition("", "strftime_now", ChatTemplate.class, "strftimeNow", String.class));
        // The tree (tags, their nesting) is checked now; an expression's syntax only when it is evaluated.
        JinjavaInterpreter parser = jinjava.newInterpreter();
        parser.parse(jinjavaSource);
        for (TemplateError e : parser.getErrors())
            if (e.getSeverity() == TemplateError.ErrorType.FATAL)
                throw new IllegalArgumentException("the chat template does not parse: " + e.getMessage() + " (line " + e.getLineno() + ")");
    }

    /**
     * The template of a tokenizer directory (or of a {@code tokenizer_config.json} given as a file): its
     * {@code chat_template} — a string, or the entry named {@code default} of a list of named templates —
     * else {@code chat_template.jinja} in the directory. The config's special tokens become variables.
     *
     * @throws IllegalArgumentException when neither exists or the template's tags do not parse (unclosed or unknown tags)
     */
    public static ChatTemplate load(Path path) throws IOException {
        if (path == null) throw new IllegalArgumentException("path must not be null");
        Path config = Files.isDirectory(path) ? path.resolve("tokenizer_config.json") : path;
        Path dir = config.toAbsolutePath().getParent();
        Map<String, Object> specials = new HashMap<>();
        String template = null;
        if (Files.isRegularFile(config)) {
            JsonNode root;
            try {
                root = JSON.readTree(config.toFile());
            } catch (IOException e) {
                throw new IllegalArgumentException(config + " is not valid JSON: " + e.getMessage(), e);
            }
            for (String s : SPECIALS) {
                JsonNode t = root.path(s);
                if (t.isTextual()) specials.put(s, t.asText());
                else if (t.isObject() && t.path("content").isTextual()) specials.put(s, t.path("content").asText());
            }
            JsonNode t = root.path("chat_template");
            if (t.isTextual()) template = t.asText();
            else if (t.isArray()) {
                for (JsonNode named : t) if ("default".equals(named.path("name").asText())) template = named.path("template").asText(null);
                if (template == null) throw new IllegalArgumentException(config + " lists chat templates but none is named \"default\"");
            }
        }
        Path jinja = dir.resolve("chat_template.jinja");
        if (template == null && Files.isRegularFile(jinja)) template = Files.readString(jinja, StandardCharsets.UTF_8);
        if (template == null)
            throw new IllegalArgumentException("no chat template: " + config + " has no \"chat_template\" and there is no " + jinja);
        return new ChatTemplate(template, specials);
    }

    /** A template from its source; {@code variables} (e.g. {@code eos_token}) are visible to every render. */
    public static ChatTemplate of(String source, Map<String, ?> variables) {
        if (source == null || source.isBlank()) throw new IllegalArgumentException("the chat template source is empty");
        return new ChatTemplate(source, variables == null ? Map.of() : new HashMap<>(variables));
    }

    /** The template as written (before the {@code [::-1]} rewrite). */
    public String source() {
        return source;
    }

    /**
     * Renders a conversation.
     *
     * @param messages            the conversation (maps with {@code role}, {@code content}, …)
     * @param tools               function schemas, or null / empty for none (the template then sees {@code tools} as none)
     * @param addGenerationPrompt open an assistant turn at the end
     * @param kwargs              further template variables (e.g. {@code enable_thinking}); may be null
     * @throws IllegalArgumentException when the template fails (its {@code raise_exception} message, or the
     *                                  engine's error naming the expression)
     */
    public String render(List<? extends Map<String, ?>> messages, List<? extends Map<String, ?>> tools, boolean addGenerationPrompt,
                         Map<String, ?> kwargs) {
        if (messages == null) throw new IllegalArgumentException("messages must not be null");
        Map<String, Object> context = new LinkedHashMap<>(specials);
        if (kwargs != null) context.putAll(kwargs);
        context.put("messages", messages);
        context.put("tools", tools == null || tools.isEmpty() ? null : tools);
        context.put("add_generation_prompt", addGenerationPrompt);
        RenderResult r = jinjava.renderForResult(jinjavaSource, context);
        StringBuilder errors = new StringBuilder();
        for (TemplateError e : r.getErrors()) {
            if (e.getSeverity() != TemplateError.ErrorType.FATAL) continue;
            if (errors.length() > 0) errors.append("; ");
            errors.append(e.getMessage());
            for (Throwable c = e.getException(); c != null; c = c.getCause())
                if (c instanceof TemplateFailure f) errors.append(": ").append(f.getMessage());
            if (e.getLineno() > 0) errors.append(" (line ").append(e.getLineno()).append(')');
        }
        if (errors.length() > 0) throw new IllegalArgumentException("the chat template failed: " + errors);
        return r.getOutput();
    }

    /**
     * The source Jinjava parses: Jinja2's {@code lstrip_blocks} applied here (Jinjava's own also strips the
     * spaces before a tag in the middle of a line, which Jinja2 keeps), and {@code x[::-1]} →
     * {@code (x|reverse)} inside tags and expressions; other stepped slices are refused.
     */
    static String rewrite(String source) {
        Matcher tags = TAG.matcher(LSTRIP.matcher(source).replaceAll(""));
        StringBuilder out = new StringBuilder();
        while (tags.find()) {
            String tag = keywordArguments(REVERSED.matcher(tags.group()).replaceAll("($1|reverse)"));
            Matcher step = STEPPED.matcher(tag);
            if (step.find())
                throw new IllegalArgumentException("the chat template uses a slice with a step, " + step.group() + " in " + tags.group()
                        + ": only name[::-1] is supported");
            tags.appendReplacement(out, Matcher.quoteReplacement(tag));
        }
        tags.appendTail(out);
        return out.toString();
    }

    /**
     * {@code f(a, k=v)} → {@code f(a, k=(v))}: Jinjava binds {@code k=v} tighter than arithmetic, so
     * {@code namespace(i=messages|length - 1)} would subtract 1 from the named parameter; Jinja2 reads the
     * whole expression as the value. Strings are skipped; {@code ==}, {@code !=}, {@code <=}, {@code >=} are
     * not assignments.
     */
    static String keywordArguments(String tag) {
        StringBuilder out = new StringBuilder(tag.length() + 8);
        java.util.ArrayDeque<int[]> open = new java.util.ArrayDeque<>();   // per open paren: {is a call, value open}
        int n = tag.length();
        for (int i = 0; i < n; i++) {
            char c = tag.charAt(i);
            if (c == '\'' || c == '"') {                 // copy a string literal as it is
                int j = i + 1;
                while (j < n && tag.charAt(j) != c) j += tag.charAt(j) == '\\' ? 2 : 1;
                out.append(tag, i, Math.min(n, j + 1));
                i = j;
                continue;
            }
            if (c == '(' || c == '[' || c == '{') {
                boolean call = c == '(' && i > 0 && (Character.isLetterOrDigit(tag.charAt(i - 1)) || tag.charAt(i - 1) == '_');
                open.push(new int[] {call ? 1 : 0, 0});
                out.append(c);
                continue;
            }
            boolean closes = c == ')' || c == ']' || c == '}';
            if ((closes || c == ',') && !open.isEmpty() && open.peek()[1] == 1) {
                out.append(')');
                open.peek()[1] = 0;
            }
            if (closes) {
                if (!open.isEmpty()) open.pop();
                out.append(c);
                continue;
            }
            if (c == '=' && !open.isEmpty() && open.peek()[0] == 1 && open.peek()[1] == 0 && i + 1 < n && tag.charAt(i + 1) != '='
                    && "=!<>".indexOf(tag.charAt(i - 1)) < 0) {
                out.append("=(");
                open.peek()[1] = 1;
                continue;
            }
            out.append(c);
        }
        return out.toString();
    }

    /** Prints values as Jinja2 does where Jinjava differs: booleans {@code True} / {@code False}. */
    static final class PyOutput implements InterpreterFactory {
        @Override
        public JinjavaInterpreter newInstance(JinjavaInterpreter orig) {
            return new Interpreter(orig);
        }

        @Override
        public JinjavaInterpreter newInstance(Jinjava application, Context context, JinjavaConfig renderConfig) {
            return new Interpreter(application, context, renderConfig);
        }

        static final class Interpreter extends JinjavaInterpreter {
            Interpreter(JinjavaInterpreter orig) {
                super(orig);
            }

            Interpreter(Jinjava application, Context context, JinjavaConfig config) {
                super(application, context, config);
            }

            @Override
            public String getAsString(Object object) {
                if (object instanceof Boolean b) return b ? "True" : "False";
                return super.getAsString(object);
            }
        }
    }

    /** The template's {@code raise_exception(message)}: fails the render with the template's message. */
    public static String raiseException(String message) {
        throw new TemplateFailure(message);
    }

    /** The template's {@code strftime_now(format)} (transformers: the local time now). */
    public static String strftimeNow(String format) {
        return StrftimeFormatter.format(ZonedDateTime.now(), format);
    }

    /** A template's own error ({@code raise_exception}); Jinjava records it as a fatal render error. */
    static final class TemplateFailure extends RuntimeException {
        TemplateFailure(String message) {
            super(message);
        }
    }

    /** transformers' {@code tojson}: {@code json.dumps(x, ensure_ascii=False[, indent=n])}. */
    static final class ToJson implements Filter {
        @Override
        public String getName() {
            return "tojson";
        }

        @Override
        public Object filter(Object var, JinjavaInterpreter interpreter, String... args) {
            return filter(var, interpreter, args, Map.of());
        }

        @Override
        public Object filter(Object var, JinjavaInterpreter interpreter, Object[] args, Map<String, Object> kwargs) {
            Object indent = kwargs.containsKey("indent") ? kwargs.get("indent") : args.length > 0 ? args[0] : null;
            for (String k : kwargs.keySet())
                if (!k.equals("indent") && !(k.equals("ensure_ascii") && Boolean.FALSE.equals(kwargs.get(k))))
                    throw new TemplateFailure("tojson: unsupported argument " + k + "=" + kwargs.get(k));
            Integer n = indent == null ? null : indent instanceof Number num ? num.intValue() : Integer.valueOf(indent.toString());
            return PyJson.dumps(var, n);
        }
    }
}
