package ai.arbor.sandbox;

/**
 * The sandbox infrastructure cannot do what was asked: no free worker within the lease timeout, the
 * jail was required but is unavailable, a worker cannot be started, the sandbox is closed. Never thrown
 * for anything the executed code does (that is an {@link ExecResult} status).
 */
public class SandboxException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public SandboxException(String message) {
        super(message);
    }

    public SandboxException(String message, Throwable cause) {
        super(message, cause);
    }
}
