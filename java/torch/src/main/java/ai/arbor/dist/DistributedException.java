package ai.arbor.dist;

/** A data-parallel job failed: rendezvous (port, master, world size) or a collective (a peer died, a timeout). */
public final class DistributedException extends RuntimeException {
    public DistributedException(String message) {
        super(message);
    }

    public DistributedException(String message, Throwable cause) {
        super(message, cause);
    }
}
