package ai.arbor.tools;

import ai.arbor.sandbox.ExecResult;
import ai.arbor.sandbox.ExecStatus;
import ai.arbor.sandbox.SandboxSession;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;

/**
 * The code interpreter tool: runs the model's Python in a {@link SandboxSession} (local jailed pool or
 * remote SandboxFusion client), so variables persist across the calls of one trajectory. The
 * observation text is the cell's stdout followed by its stderr (the traceback on an error, the
 * sandbox's note on a timeout or crash), already capped by the sandbox (head + tail). {@code success}
 * is {@code status == OK}; {@link ExecStatus#SANDBOX_ERROR} is reported as an infrastructure failure so
 * the trainer can mask the trajectory. {@code raw} is the {@link ExecResult}.
 *
 * <p>Accepts the code itself (a surrounding Markdown fence is removed) or a JSON object
 * {@code {"code": "..."}} (JSON tool calls). Text that parses as a JSON object without a string
 * {@code code} field is run as code (it may be a dict literal).
 */
public final class PythonTool implements Tool {

    /** The tool's JSON-schema parameters: {@code {"code": string}} (or the code itself as the argument). */
    public static final String PARAMETERS_SCHEMA = "{\"type\":\"object\",\"properties\":{\"code\":{\"type\":\"string\",\"description\":\"Python code to run\"}},\"required\":[\"code\"]}";

    /** What the tool tells the model it does (JSON tool-call prompts). */
    public static final String DESCRIPTION = "Runs Python 3 code in a stateful sandbox (like a notebook: variables persist between calls; the "
            + "value of a final expression is printed). numpy and sympy are available; no network, no files outside /tmp "
            + "and the working directory. Returns stdout and stderr.";

    private static final ObjectMapper JSON = new ObjectMapper();
    private final SandboxSession session;

    public PythonTool(SandboxSession session) {
        if (session == null) throw new IllegalArgumentException("session must not be null");
        this.session = session;
    }

    public SandboxSession session() {
        return session;
    }

    @Override
    public String name() {
        return "python";
    }

    @Override
    public String description() {
        return DESCRIPTION;
    }

    @Override
    public String parametersSchema() {
        return PARAMETERS_SCHEMA;
    }

    @Override
    public Observation call(String arguments) {
        String code = extractCode(arguments == null ? "" : arguments);
        ExecResult r = session.execute(code);
        String text = text(r);
        if (r.status() == ExecStatus.SANDBOX_ERROR) return Observation.infrastructureFailure(text, r);
        return r.ok() ? Observation.ok(text, r) : Observation.failure(text, r);
    }

    /** stdout, then stderr on a new line when both are present. */
    static String text(ExecResult r) {
        String out = r.stdout(), err = r.stderr();
        if (err.isEmpty()) return out;
        if (out.isEmpty()) return err;
        return out + (out.endsWith("\n") ? "" : "\n") + err;
    }

    static String extractCode(String arguments) {
        String s = arguments.strip();
        if (s.startsWith("{")) {
            try {
                JsonNode n = JSON.readTree(s);
                if (n != null && n.isObject() && n.get("code") != null && n.get("code").isTextual()) return n.get("code").asText();
            } catch (IOException ignored) {
                // Python, not JSON (e.g. a set or dict literal)
            }
        }
        if (s.startsWith("```")) { // ```python\n...\n```
            int nl = s.indexOf('\n');
            String body = nl < 0 ? "" : s.substring(nl + 1);
            if (body.stripTrailing().endsWith("```")) body = body.stripTrailing();
            if (body.endsWith("```")) body = body.substring(0, body.length() - 3);
            return body;
        }
        return arguments;
    }
}
