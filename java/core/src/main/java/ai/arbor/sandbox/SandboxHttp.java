package ai.arbor.sandbox;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CancellationException;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * A small HTTP/1.1 server for {@link SandboxServer}: keep-alive, {@code Content-Length} and chunked
 * bodies, {@code Expect: 100-continue}, bounded everything. It exists because the JDK's server cannot tell
 * that a client has gone away: here the connection's thread keeps reading the socket while the request
 * runs on another thread, and end-of-stream (the client gave up or was killed) cancels the request,
 * interrupting its wait for a worker or its execution (docs/sandbox.md, "Server and client").
 */
final class SandboxHttp implements AutoCloseable {

    record Request(String method, String path, Map<String, String> headers, byte[] body) {}

    record Response(int code, Map<String, String> headers, byte[] body) {}

    interface Handler {
        /** Handles a request; {@code slow} ones run on a separate thread and are cancelled when the client leaves. */
        Response handle(Request r) throws InterruptedException;

        boolean slow(Request r);

        /** The response to a request that could not be parsed (code 400, 413, 431 …). */
        Response error(int code, String message);
    }

    private static final int MAX_HEADER_BYTES = 32 << 10;
    private static final int IDLE_MILLIS = 60_000;   // keep-alive: a quiet connection is closed after this
    private static final int READ_MILLIS = 20_000;   // a request must arrive within this once it started
    private static final int WATCH_MILLIS = 50;      // how often a waiting connection checks its client
    private static final int PROBE_MILLIS = 1;       // how long it then reads the socket for end of stream

    private final ServerSocket server;
    private final Handler handler;
    private final long maxBody;
    private final int maxConnections;
    private final ExecutorService connections;
    private final ExecutorService work;
    private final Set<Socket> open = ConcurrentHashMap.newKeySet();
    private final AtomicInteger connectionCount = new AtomicInteger();
    private final Thread acceptor;
    private volatile boolean closed;

    SandboxHttp(InetSocketAddress address, int maxConnections, long maxBody, Handler handler) throws IOException {
        this.server = new ServerSocket();
        server.setReuseAddress(true);
        server.bind(address, 256);
        this.handler = handler;
        this.maxBody = maxBody;
        this.maxConnections = maxConnections;
        AtomicInteger n = new AtomicInteger();
        this.connections = Executors.newCachedThreadPool(r -> daemon(r, "arbor-sandbox-http-conn-" + n.incrementAndGet()));
        this.work = Executors.newCachedThreadPool(r -> daemon(r, "arbor-sandbox-http-work-" + n.incrementAndGet()));
        this.acceptor = daemon(this::acceptLoop, "arbor-sandbox-http-accept");
        acceptor.start();
    }

    private static Thread daemon(Runnable r, String name) {
        Thread t = new Thread(r, name);
        t.setDaemon(true);
        return t;
    }

    int port() {
        return server.getLocalPort();
    }

    java.net.InetAddress address() {
        return server.getInetAddress();
    }

    int openConnections() {
        return connectionCount.get();
    }

    @Override
    public void close() {
        closed = true;
        try {
            server.close();
        } catch (IOException ignored) {
            // closing anyway
        }
        for (Socket s : open) closeQuietly(s);
        work.shutdownNow();
        connections.shutdownNow();
    }

    private void acceptLoop() {
        while (!closed) {
            Socket s;
            try {
                s = server.accept();
            } catch (IOException e) {
                if (closed) return;
                continue;
            }
            if (connectionCount.incrementAndGet() > maxConnections) {
                // over the connection limit: answer at once (a standard client retries 503/504) instead of queueing
                connectionCount.decrementAndGet();
                try {
                    s.setSoTimeout(1000);
                    Response r = handler.error(503, "too many open connections (limit " + maxConnections + "); retry later");
                    Map<String, String> h = new LinkedHashMap<>(r.headers());
                    h.put("Retry-After", "1");
                    write(s.getOutputStream(), new Response(503, h, r.body()), false);
                } catch (IOException ignored) {
                    // the client is gone already
                }
                closeQuietly(s);
                continue;
            }
            open.add(s);
            try {
                connections.execute(() -> serve(s));
            } catch (RuntimeException e) { // shut down concurrently
                open.remove(s);
                connectionCount.decrementAndGet();
                closeQuietly(s);
            }
        }
    }

    /** Bytes read from the socket but not consumed yet (pipelined requests, read-ahead while watching). */
    private static final class Input {
        final InputStream in;
        byte[] buf = new byte[8192];
        int start, end;
        boolean eof;

        Input(InputStream in) {
            this.in = in;
        }

        int available() {
            return end - start;
        }

        /** Reads more from the socket; false at end of stream. */
        boolean fill() throws IOException {
            if (start == end) {
                start = end = 0;
            } else if (end == buf.length) {
                if (start > 0) {
                    System.arraycopy(buf, start, buf, 0, end - start);
                    end -= start;
                    start = 0;
                } else {
                    byte[] b = new byte[Math.min(Integer.MAX_VALUE - 16, buf.length * 2)];
                    System.arraycopy(buf, 0, b, 0, end);
                    buf = b;
                }
            }
            int n = in.read(buf, end, buf.length - end);
            if (n < 0) {
                eof = true;
                return false;
            }
            end += n;
            return true;
        }

        int read() throws IOException {
            if (start == end && !fill()) return -1;
            return buf[start++] & 0xff;
        }

        byte[] readN(long n) throws IOException {
            byte[] out = new byte[(int) n];
            int got = 0;
            while (got < n) {
                if (start == end && !fill()) throw new IOException("the client closed the connection inside a request body");
                int k = (int) Math.min(n - got, end - start);
                System.arraycopy(buf, start, out, got, k);
                start += k;
                got += k;
            }
            return out;
        }
    }

    private static final class BadRequest extends Exception {
        final int code;

        BadRequest(int code, String message) {
            super(message);
            this.code = code;
        }
    }

    private void serve(Socket s) {
        try (s) {
            s.setTcpNoDelay(true);
            Input in = new Input(s.getInputStream());
            OutputStream out = s.getOutputStream();
            while (!closed) {
                s.setSoTimeout(IDLE_MILLIS);
                Request r;
                boolean keepAlive;
                try {
                    if (in.available() == 0 && !in.fill()) return; // the client closed an idle connection
                    s.setSoTimeout(READ_MILLIS);
                    r = readRequest(in, out);
                    keepAlive = keepAlive(r);
                } catch (BadRequest e) {
                    write(out, handler.error(e.code, e.getMessage()), false);
                    return;
                } catch (SocketTimeoutException e) {
                    return;
                }
                if (!handler.slow(r)) {
                    Response resp;
                    try {
                        resp = handler.handle(r);
                    } catch (InterruptedException e) {
                        return;
                    }
                    write(out, resp, keepAlive);
                    if (!keepAlive) return;
                    continue;
                }
                if (!runWatched(s, in, out, r, keepAlive) || !keepAlive) return;
            }
        } catch (IOException e) {
            // the client went away
        } finally {
            open.remove(s);
            connectionCount.decrementAndGet();
        }
    }

    /**
     * Runs a slow request on a work thread and reads the socket meanwhile: end of stream cancels the
     * request (its thread is interrupted) and nothing is written. False when the connection is finished.
     */
    private boolean runWatched(Socket s, Input in, OutputStream out, Request r, boolean keepAlive) throws IOException {
        AtomicBoolean abandoned = new AtomicBoolean();
        Future<?> f;
        try {
            f = work.submit(() -> {
                Response resp;
                try {
                    resp = handler.handle(r);
                } catch (InterruptedException e) {
                    return;
                }
                if (abandoned.get() || Thread.currentThread().isInterrupted()) return;
                try {
                    synchronized (out) {
                        write(out, resp, keepAlive);
                    }
                } catch (IOException e) {
                    abandoned.set(true);
                }
            });
        } catch (RuntimeException e) { // shutting down
            return false;
        }
        // Wait on the work itself, so that its end is seen at once (a client that sends its next
        // request before this one's work has returned must not wait for a socket timeout), and
        // between waits look at the socket for a moment: end of stream there cancels the work.
        s.setSoTimeout(PROBE_MILLIS);
        while (true) {
            try {
                f.get(WATCH_MILLIS, TimeUnit.MILLISECONDS);
                return !abandoned.get();
            } catch (TimeoutException e) {
                // still running: is the client still there?
            } catch (ExecutionException | CancellationException e) {
                return !abandoned.get();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                f.cancel(true);
                return false;
            }
            try {
                // read ahead (a pipelined request) so that end of stream is seen; bounded
                if (in.available() <= maxBody + MAX_HEADER_BYTES && !in.fill()) {
                    abandoned.set(true);
                    f.cancel(true);
                    return false;
                }
            } catch (SocketTimeoutException e) {
                // nothing from the client: keep waiting
            } catch (IOException e) { // reset by the client
                abandoned.set(true);
                f.cancel(true);
                return false;
            }
        }
    }

    private static boolean keepAlive(Request r) {
        String c = r.headers().getOrDefault("connection", "").toLowerCase(Locale.ROOT);
        boolean http10 = "HTTP/1.0".equals(r.headers().get(":version"));
        return http10 ? c.contains("keep-alive") : !c.contains("close");
    }

    private Request readRequest(Input in, OutputStream out) throws IOException, BadRequest {
        String requestLine = readLine(in, MAX_HEADER_BYTES);
        while (requestLine.isEmpty()) requestLine = readLine(in, MAX_HEADER_BYTES); // tolerated between requests
        String[] parts = requestLine.split(" ");
        if (parts.length != 3 || !parts[2].startsWith("HTTP/1.")) {
            throw new BadRequest(400, "malformed request line: " + printable(requestLine));
        }
        Map<String, String> headers = new LinkedHashMap<>();
        headers.put(":version", parts[2]);
        int total = requestLine.length();
        while (true) {
            String line = readLine(in, MAX_HEADER_BYTES);
            total += line.length() + 2;
            if (total > MAX_HEADER_BYTES) throw new BadRequest(431, "request headers larger than " + MAX_HEADER_BYTES + " bytes");
            if (line.isEmpty()) break;
            int colon = line.indexOf(':');
            if (colon <= 0) throw new BadRequest(400, "malformed header line: " + printable(line));
            String name = line.substring(0, colon).trim().toLowerCase(Locale.ROOT);
            String value = line.substring(colon + 1).trim();
            headers.merge(name, value, (a, b) -> a + "," + b);
        }
        String path = parts[1];
        int q = path.indexOf('?');
        if (q >= 0) path = path.substring(0, q);
        byte[] body;
        String te = headers.getOrDefault("transfer-encoding", "").toLowerCase(Locale.ROOT);
        String cl = headers.get("content-length");
        if (!te.isEmpty() && !te.equals("identity")) {
            if (!te.equals("chunked")) throw new BadRequest(501, "transfer encoding '" + printable(te) + "' is not supported");
            continueIfExpected(headers, out);
            body = readChunked(in);
        } else if (cl != null) {
            long n;
            try {
                n = Long.parseLong(cl.trim());
            } catch (NumberFormatException e) {
                throw new BadRequest(400, "invalid Content-Length '" + printable(cl) + "'");
            }
            if (n < 0) throw new BadRequest(400, "invalid Content-Length '" + printable(cl) + "'");
            if (n > maxBody) throw new BadRequest(413, "request body of " + n + " bytes is larger than the limit of " + maxBody + " bytes");
            continueIfExpected(headers, out);
            body = in.readN(n);
        } else {
            body = new byte[0];
        }
        return new Request(parts[0], path, headers, body);
    }

    private static void continueIfExpected(Map<String, String> headers, OutputStream out) throws IOException {
        if ("100-continue".equalsIgnoreCase(headers.getOrDefault("expect", ""))) {
            synchronized (out) {
                out.write("HTTP/1.1 100 Continue\r\n\r\n".getBytes(StandardCharsets.US_ASCII));
                out.flush();
            }
        }
    }

    private byte[] readChunked(Input in) throws IOException, BadRequest {
        java.io.ByteArrayOutputStream body = new java.io.ByteArrayOutputStream();
        while (true) {
            String line = readLine(in, 1024);
            int semi = line.indexOf(';');
            String hex = (semi >= 0 ? line.substring(0, semi) : line).trim();
            long n;
            try {
                n = Long.parseLong(hex, 16);
            } catch (NumberFormatException e) {
                throw new BadRequest(400, "invalid chunk size '" + printable(hex) + "'");
            }
            if (n < 0 || body.size() + n > maxBody) {
                throw new BadRequest(413, "request body larger than the limit of " + maxBody + " bytes");
            }
            if (n == 0) {
                while (!readLine(in, MAX_HEADER_BYTES).isEmpty()) { } // trailers
                return body.toByteArray();
            }
            body.write(in.readN(n));
            if (!readLine(in, 2).isEmpty()) throw new BadRequest(400, "chunk not followed by CRLF");
        }
    }

    private static String readLine(Input in, int limit) throws IOException, BadRequest {
        StringBuilder sb = new StringBuilder();
        while (true) {
            int c = in.read();
            if (c < 0) throw new IOException("the client closed the connection inside a request");
            if (c == '\n') {
                int n = sb.length();
                if (n > 0 && sb.charAt(n - 1) == '\r') sb.setLength(n - 1);
                return sb.toString();
            }
            if (sb.length() >= limit) throw new BadRequest(431, "request line or header longer than " + limit + " bytes");
            sb.append((char) c);
        }
    }

    private static String printable(String s) {
        String t = s.length() > 100 ? s.substring(0, 100) + "…" : s;
        return t.replaceAll("[^\\x20-\\x7e…]", "?");
    }

    private static void write(OutputStream out, Response r, boolean keepAlive) throws IOException {
        StringBuilder h = new StringBuilder("HTTP/1.1 ").append(r.code()).append(' ').append(reason(r.code())).append("\r\n");
        h.append("Content-Type: application/json\r\n");
        h.append("Content-Length: ").append(r.body().length).append("\r\n");
        for (Map.Entry<String, String> e : r.headers().entrySet()) h.append(e.getKey()).append(": ").append(e.getValue()).append("\r\n");
        if (!keepAlive) h.append("Connection: close\r\n");
        h.append("\r\n");
        // one write: with TCP_NODELAY, header and body as two writes would go out as two segments
        byte[] head = h.toString().getBytes(StandardCharsets.US_ASCII);
        byte[] all = java.util.Arrays.copyOf(head, head.length + r.body().length);
        System.arraycopy(r.body(), 0, all, head.length, r.body().length);
        out.write(all);
        out.flush();
    }

    private static String reason(int code) {
        return switch (code) {
            case 200 -> "OK";
            case 400 -> "Bad Request";
            case 404 -> "Not Found";
            case 405 -> "Method Not Allowed";
            case 413 -> "Content Too Large";
            case 422 -> "Unprocessable Entity";
            case 431 -> "Request Header Fields Too Large";
            case 501 -> "Not Implemented";
            case 503 -> "Service Unavailable";
            case 504 -> "Gateway Timeout";
            default -> "Status";
        };
    }

    private static void closeQuietly(Socket s) {
        try {
            s.close();
        } catch (IOException ignored) {
            // closing anyway
        }
    }
}
