package ai.arbor.sandbox;

import com.fasterxml.jackson.annotation.JsonIgnoreProperties;
import com.fasterxml.jackson.annotation.JsonProperty;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The SandboxFusion HTTP API (github.com/bytedance/SandboxFusion, {@code sandbox/server/sandbox_api.py}
 * and {@code sandbox/runners/types.py}): request and response bodies of {@code POST /run_code} and
 * {@code POST /run_jupyter}, shared by {@link SandboxServer} and {@link RemoteSandbox}, and the mapping
 * between their statuses and {@link ExecStatus}. Arbor's server adds an {@code arbor} object with the
 * exact {@link ExecStatus}; other servers' clients ignore it (pydantic drops unknown fields) and
 * Arbor's client falls back to the SandboxFusion fields when it is absent.
 */
final class SandboxFusion {
    private SandboxFusion() {}

    static final ObjectMapper JSON = new ObjectMapper().configure(DeserializationFeature.FAIL_ON_UNKNOWN_PROPERTIES, false);

    /** {@code RunStatus}: the request as a whole. */
    static final String SUCCESS = "Success", FAILED = "Failed", SANDBOX_ERROR = "SandboxError";
    /** {@code CommandRunStatus}: one command (the run, or the Jupyter driver). */
    static final String FINISHED = "Finished", ERROR = "Error", TIME_LIMIT_EXCEEDED = "TimeLimitExceeded";

    @JsonIgnoreProperties(ignoreUnknown = true)
    record RunCodeRequest(String code, String language,
                          @JsonProperty("compile_timeout") Double compileTimeout,
                          @JsonProperty("run_timeout") Double runTimeout,
                          @JsonProperty("memory_limit_MB") Integer memoryLimitMb,
                          String stdin,
                          Map<String, String> files,
                          @JsonProperty("fetch_files") List<String> fetchFiles) {}

    @JsonIgnoreProperties(ignoreUnknown = true)
    record CommandRunResult(String status,
                            @JsonProperty("execution_time") Double executionTime,
                            @JsonProperty("return_code") Integer returnCode,
                            String stdout, String stderr) {}

    /** Arbor's extension: the exact outcome, which SandboxFusion's fields can only approximate. */
    @JsonIgnoreProperties(ignoreUnknown = true)
    record Extra(String status, @JsonProperty("state_lost") boolean stateLost, boolean truncated,
                 @JsonProperty("duration_ms") long durationMillis) {}

    @JsonIgnoreProperties(ignoreUnknown = true)
    record RunCodeResponse(String status, String message,
                           @JsonProperty("compile_result") CommandRunResult compileResult,
                           @JsonProperty("run_result") CommandRunResult runResult,
                           @JsonProperty("executor_pod_name") String executorPodName,
                           Map<String, String> files,
                           Extra arbor) {}

    @JsonIgnoreProperties(ignoreUnknown = true)
    record RunJupyterRequest(List<String> cells,
                             @JsonProperty("cell_timeout") Double cellTimeout,
                             @JsonProperty("total_timeout") Double totalTimeout,
                             @JsonProperty("memory_limit_MB") Integer memoryLimitMb,
                             String kernel,
                             Map<String, String> files,
                             @JsonProperty("fetch_files") List<String> fetchFiles) {}

    @JsonIgnoreProperties(ignoreUnknown = true)
    record CellRunResult(String stdout, String stderr, List<Map<String, Object>> display,
                         List<Map<String, Object>> error, Extra arbor) {}

    @JsonIgnoreProperties(ignoreUnknown = true)
    record RunJupyterResponse(String status, String message, CommandRunResult driver, List<CellRunResult> cells,
                              @JsonProperty("executor_pod_name") String executorPodName,
                              Map<String, String> files) {}

    static Extra extra(ExecResult r) {
        return new Extra(r.status().name(), r.stateLost(), r.truncated(), r.durationMillis());
    }

    private static final java.util.regex.Pattern SYSTEM_EXIT = java.util.regex.Pattern.compile("(?:^|\n)SystemExit: (-?\\d{1,10})\n?$");
    private static final java.util.regex.Pattern EXITED = java.util.regex.Pattern.compile("exited with code (\\d{1,3});");
    private static final java.util.regex.Pattern SIGNALLED = java.util.regex.Pattern.compile("was killed by signal (\\d{1,2})");

    /**
     * One execution as SandboxFusion reports a run: Finished with the return code the program would have
     * had as a process (0; {@code sys.exit(n)} → n mod 256; an uncaught exception, MemoryError or the output
     * limit → 1; {@code os._exit(n)} → n; death by signal N → −N, as Python's subprocess reports it),
     * TimeLimitExceeded (no return code), or Error (the sandbox failed).
     */
    static CommandRunResult commandResult(ExecResult r) {
        double seconds = r.durationMillis() / 1000.0;
        return switch (r.status()) {
            case OK -> new CommandRunResult(FINISHED, seconds, 0, r.stdout(), r.stderr());
            case TIMEOUT -> new CommandRunResult(TIME_LIMIT_EXCEEDED, seconds, null, r.stdout(), r.stderr());
            case SANDBOX_ERROR -> new CommandRunResult(ERROR, seconds, null, r.stdout(), r.stderr());
            default -> new CommandRunResult(FINISHED, seconds, returnCode(r), r.stdout(), r.stderr());
        };
    }

    private static int returnCode(ExecResult r) {
        String err = r.stderr();
        java.util.regex.Matcher m;
        if (r.status() == ExecStatus.ERROR && (m = SYSTEM_EXIT.matcher(err)).find()) {
            try {
                return (int) (Long.parseLong(m.group(1)) & 0xff);
            } catch (NumberFormatException e) {
                return 1;
            }
        }
        if (r.status() == ExecStatus.CRASHED) {
            if ((m = EXITED.matcher(err)).find()) return Integer.parseInt(m.group(1));
            if ((m = SIGNALLED.matcher(err)).find()) return -Integer.parseInt(m.group(1));
        }
        return 1;
    }

    /** SandboxFusion's {@code parse_run_status}: Error → SandboxError; time limit or non-zero code → Failed. */
    static String runStatus(CommandRunResult c) {
        if (ERROR.equals(c.status())) return SANDBOX_ERROR;
        if (TIME_LIMIT_EXCEEDED.equals(c.status())) return FAILED;
        return c.returnCode() != null && c.returnCode() != 0 ? FAILED : SUCCESS;
    }

    /** A Jupyter {@code error} output from a traceback: ename and evalue from its last line. */
    static List<Map<String, Object>> jupyterError(ExecResult r) {
        if (r.status() == ExecStatus.OK) return List.of();
        List<String> lines = r.stderr().lines().toList();
        String last = "";
        for (int i = lines.size() - 1; i >= 0; i--) {
            if (!lines.get(i).isBlank() && !lines.get(i).startsWith(" ")) {
                last = lines.get(i);
                break;
            }
        }
        int colon = last.indexOf(": ");
        String ename = colon > 0 && last.substring(0, colon).matches("[A-Za-z_][A-Za-z0-9_.]*") ? last.substring(0, colon) : r.status().name();
        String evalue = colon > 0 ? last.substring(colon + 2) : last;
        Map<String, Object> e = new LinkedHashMap<>();
        e.put("ename", ename);
        e.put("evalue", evalue);
        e.put("traceback", new ArrayList<>(lines));
        return List.of(e);
    }

    /**
     * The {@link ExecStatus} of a remote result: Arbor's exact status when the server sent one, else
     * SandboxFusion's fields (a MemoryError at the end of stderr counts as MEMORY).
     */
    static ExecStatus status(String requestStatus, CommandRunResult run, Extra extra) {
        if (extra != null && extra.status() != null) {
            try {
                return ExecStatus.valueOf(extra.status());
            } catch (IllegalArgumentException ignored) {
                // a newer server: fall through to the portable fields
            }
        }
        if (SANDBOX_ERROR.equals(requestStatus) || run == null || ERROR.equals(run.status())) return ExecStatus.SANDBOX_ERROR;
        if (TIME_LIMIT_EXCEEDED.equals(run.status())) return ExecStatus.TIMEOUT;
        if (run.returnCode() != null && run.returnCode() == 0) return ExecStatus.OK;
        String err = run.stderr() == null ? "" : run.stderr().strip();
        if (err.endsWith("MemoryError") || err.contains("\nMemoryError")) return ExecStatus.MEMORY;
        return ExecStatus.ERROR;
    }
}
