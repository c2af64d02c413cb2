package ai.arbor.rollout;

import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;

/**
 * How to sample one generation.
 *
 * @param temperature   softmax temperature τ ≥ 0 (0 = greedy)
 * @param topP          nucleus mass in (0, 1]
 * @param topK          keep the k most likely tokens; 0 = off
 * @param maxNewTokens  most tokens to generate (≥ 1)
 * @param stopStrings   stop when the decoded output contains one of these; the tokens that complete it
 *                      are part of the output (vLLM's {@code include_stop_str_in_output=true})
 * @param stopTokenIds  stop after sampling one of these ids (the EOS id is always a stop)
 * @param topLogprobs   number of top-k logprobs per position to request (0..20); when &gt; 0 and the
 *                      backend has no exact entropy, per-token entropy is approximated from them
 *                      (ARPO's estimate)
 */
public record SamplingParams(double temperature, double topP, int topK, int maxNewTokens, List<String> stopStrings,
                             List<Integer> stopTokenIds, int topLogprobs) {
    public static final int MAX_TOP_LOGPROBS = 20;

    public SamplingParams {
        if (!(temperature >= 0) || Double.isInfinite(temperature)) throw new IllegalArgumentException("temperature must be finite and >= 0, got " + temperature);
        if (!(topP > 0 && topP <= 1)) throw new IllegalArgumentException("topP must be in (0, 1], got " + topP);
        if (topK < 0) throw new IllegalArgumentException("topK must be >= 0 (0 = off), got " + topK);
        if (maxNewTokens < 1) throw new IllegalArgumentException("maxNewTokens must be >= 1, got " + maxNewTokens);
        if (topLogprobs < 0 || topLogprobs > MAX_TOP_LOGPROBS)
            throw new IllegalArgumentException("topLogprobs must be in [0, " + MAX_TOP_LOGPROBS + "], got " + topLogprobs);
        stopStrings = stopStrings == null ? List.of() : List.copyOf(stopStrings);
        for (String s : stopStrings) if (s.isEmpty()) throw new IllegalArgumentException("stop strings must not be empty");
        stopTokenIds = stopTokenIds == null ? List.of() : List.copyOf(stopTokenIds);
        for (int id : stopTokenIds) if (id < 0) throw new IllegalArgumentException("stop token id must be >= 0, got " + id);
    }

    /** τ = 1, top-p = 1, no top-k, 1024 new tokens, no stops, no top logprobs. */
    public static SamplingParams defaults() {
        return new SamplingParams(1.0, 1.0, 0, 1024, List.of(), List.of(), 0);
    }

    /**
     * These limits with the distribution {@code s} (temperature, top-p, top-k): the one sampling value a recipe
     * decides feeds the rollouts this way. Generation requests carry no min-p.
     */
    public SamplingParams withDistribution(ai.arbor.kernels.SamplingParams s) {
        if (s == null) throw new IllegalArgumentException("the sampling distribution must not be null");
        if (s.minP() > 0) throw new IllegalArgumentException("generation requests carry no min-p, got minP = " + s.minP());
        return new SamplingParams(s.temperature(), s.topP(), s.topK(), maxNewTokens, stopStrings, stopTokenIds, topLogprobs);
    }

    public SamplingParams withTemperature(double t) {
        return new SamplingParams(t, topP, topK, maxNewTokens, stopStrings, stopTokenIds, topLogprobs);
    }

    public SamplingParams withTopP(double p) {
        return new SamplingParams(temperature, p, topK, maxNewTokens, stopStrings, stopTokenIds, topLogprobs);
    }

    public SamplingParams withTopK(int k) {
        return new SamplingParams(temperature, topP, k, maxNewTokens, stopStrings, stopTokenIds, topLogprobs);
    }

    public SamplingParams withMaxNewTokens(int n) {
        return new SamplingParams(temperature, topP, topK, n, stopStrings, stopTokenIds, topLogprobs);
    }

    public SamplingParams withTopLogprobs(int k) {
        return new SamplingParams(temperature, topP, topK, maxNewTokens, stopStrings, stopTokenIds, k);
    }

    public SamplingParams withStopStrings(List<String> stops) {
        return new SamplingParams(temperature, topP, topK, maxNewTokens, stops, stopTokenIds, topLogprobs);
    }

    public SamplingParams withStopTokenIds(List<Integer> ids) {
        return new SamplingParams(temperature, topP, topK, maxNewTokens, stopStrings, ids, topLogprobs);
    }

    /** These stop strings followed by {@code more}, without duplicates. */
    public SamplingParams plusStopStrings(List<String> more) {
        LinkedHashSet<String> all = new LinkedHashSet<>(stopStrings);
        all.addAll(more);
        return withStopStrings(new ArrayList<>(all));
    }
}
