package ai.arbor.rollout;

import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;

/**
 * Where one generation stops and what it reports besides its tokens — everything a request carries but the
 * distribution, which is the sampler's {@link ai.arbor.kernels.SamplingParams} (so a temperature is written in
 * one place, whichever backend samples).
 *
 * @param maxNewTokens most tokens to generate (≥ 1)
 * @param stopStrings  stop when the decoded output contains one of these; the tokens that complete it are part
 *                     of the output (vLLM's {@code include_stop_str_in_output=true})
 * @param stopTokenIds stop after sampling one of these ids (the EOS id is always a stop)
 * @param topLogprobs  number of top log-probs per position to request (0..20); when &gt; 0 and the backend has no
 *                     exact entropy, per-token entropy is approximated from them (ARPO's estimate)
 */
public record GenerationLimits(int maxNewTokens, List<String> stopStrings, List<Integer> stopTokenIds, int topLogprobs) {
    public static final int MAX_TOP_LOGPROBS = 20;

    public GenerationLimits {
        if (maxNewTokens < 1) throw new IllegalArgumentException("maxNewTokens must be >= 1, got " + maxNewTokens);
        if (topLogprobs < 0 || topLogprobs > MAX_TOP_LOGPROBS)
            throw new IllegalArgumentException("topLogprobs must be in [0, " + MAX_TOP_LOGPROBS + "], got " + topLogprobs);
        stopStrings = stopStrings == null ? List.of() : List.copyOf(stopStrings);
        for (String s : stopStrings) if (s.isEmpty()) throw new IllegalArgumentException("stop strings must not be empty");
        stopTokenIds = stopTokenIds == null ? List.of() : List.copyOf(stopTokenIds);
        for (int id : stopTokenIds) if (id < 0) throw new IllegalArgumentException("stop token id must be >= 0, got " + id);
    }

    /** 1024 new tokens, no stops but EOS, no top log-probs. */
    public static GenerationLimits defaults() {
        return new GenerationLimits(1024, List.of(), List.of(), 0);
    }

    public GenerationLimits withMaxNewTokens(int n) {
        return new GenerationLimits(n, stopStrings, stopTokenIds, topLogprobs);
    }

    public GenerationLimits withStopStrings(List<String> stops) {
        return new GenerationLimits(maxNewTokens, stops, stopTokenIds, topLogprobs);
    }

    public GenerationLimits withStopTokenIds(List<Integer> ids) {
        return new GenerationLimits(maxNewTokens, stopStrings, ids, topLogprobs);
    }

    public GenerationLimits withTopLogprobs(int k) {
        return new GenerationLimits(maxNewTokens, stopStrings, stopTokenIds, k);
    }

    /** These stop strings followed by {@code more}, without duplicates. */
    public GenerationLimits plusStopStrings(List<String> more) {
        LinkedHashSet<String> all = new LinkedHashSet<>(stopStrings);
        all.addAll(more);
        return withStopStrings(new ArrayList<>(all));
    }
}
