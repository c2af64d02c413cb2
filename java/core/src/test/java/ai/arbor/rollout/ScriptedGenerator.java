package ai.arbor.rollout;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A seeded programmatic generator for tests: a {@link Script} decides the text of each turn from the
 * decoded context and a {@link Random} seeded by the request's seed; the text is encoded with the
 * tokenizer and then treated exactly as a real backend would: cut after the first stop string (the
 * token completing it kept), at EOS, or at {@code maxNewTokens}. Logprobs are pseudo-random in
 * [−3, −0.01]; per-token entropies come from the script. Counts every token it returns.
 */
public final class ScriptedGenerator implements Generator {

    /** What the model "writes" for a request. */
    public interface Script {
        /** The text of this turn (EOS follows when {@link Turn#eos}). */
        Turn next(String context, Random rnd);
    }

    /** A turn: text; whether EOS follows it (else filler until the length cap); the per-token entropy (NaN = none). */
    public record Turn(String text, boolean eos, double entropy) {
        public static Turn of(String text) {
            return new Turn(text, true, 1.0);
        }
    }

    private final Tokenizer tok;
    private final Script script;
    private final AtomicLong tokens = new AtomicLong(), calls = new AtomicLong();
    private final List<GenerationRequest> requests = Collections.synchronizedList(new ArrayList<>());
    private volatile boolean record = true;

    public ScriptedGenerator(Tokenizer tok, Script script) {
        this.tok = tok;
        this.script = script;
    }

    public ScriptedGenerator recordRequests(boolean on) {
        this.record = on;
        return this;
    }

    @Override
    public CompletableFuture<Generation> generate(GenerationRequest r) {
        try {
            return CompletableFuture.completedFuture(generateNow(r));
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    Generation generateNow(GenerationRequest r) {
        if (record) requests.add(r);
        calls.incrementAndGet();
        Random rnd = new Random(r.seed());
        String context = tok.decode(r.context().toArray());
        Turn t = script.next(context, rnd);
        int[] body = tok.encode(t.text());
        int eos = tok.eosId();
        GenerationLimits p = r.limits();
        // The token stream: the text, then EOS — or, without EOS, filler 'x' forever (cut by the length cap).
        int filler = tok.encode("x")[0];
        int max = p.maxNewTokens();
        int[] all = new int[Math.max(max, body.length + 1)];
        System.arraycopy(body, 0, all, 0, body.length);
        for (int i = body.length; i < all.length; i++) all[i] = t.eos() && i == body.length ? eos : filler;
        // Emit token by token as a backend does: stop string, stop token / EOS, or length.
        int len = 0;
        FinishReason fr = FinishReason.LENGTH;
        String stop = null;
        int stopId = -1;
        StringBuilder text = new StringBuilder();
        for (int i = 0; i < max; i++) {
            int id = all[i];
            len++;
            if (id == eos || p.stopTokenIds().contains(id)) {
                fr = FinishReason.STOP_TOKEN;
                stopId = id;
                break;
            }
            text.append(tok.decode(new int[] {id}));
            String s = StopStrings.earliest(text.toString(), p.stopStrings(), Math.max(0, text.length() - 64));
            if (s != null) {
                fr = FinishReason.STOP_STRING;
                stop = s;
                break;
            }
        }
        int[] ids = java.util.Arrays.copyOf(all, len);
        float[] lp = new float[len];
        float[] ent = Double.isNaN(t.entropy()) ? null : new float[len];
        for (int i = 0; i < len; i++) {
            lp[i] = (float) (-0.01 - 2.99 * rnd.nextDouble());
            if (ent != null) ent[i] = (float) t.entropy();
        }
        tokens.addAndGet(len);
        return new Generation(ids, lp, ent, fr, stop, stopId);
    }

    /** Tokens returned so far. */
    public long tokensGenerated() {
        return tokens.get();
    }

    /** Requests served so far. */
    public long calls() {
        return calls.get();
    }

    public List<GenerationRequest> requests() {
        synchronized (requests) {
            return new ArrayList<>(requests);
        }
    }

    /** Seed of a randomized test: -Darbor.seed or the clock. */
    public static long seed() {
        return ai.arbor.testing.Seeds.seed();
    }
}
