/**
 * Advantages and trajectory filters (docs/algorithms.md §3; docs/advantages.md).
 *
 * <ul>
 *   <li>{@link ai.arbor.advantage.Advantages}: sequence-level GRPO, Dr.GRPO, Tree-GRPO (by name:
 *       {@link ai.arbor.advantage.AdvantageEstimator}).</li>
 *   <li>{@link ai.arbor.kernels.TokenAdvantages}: broadcast to tokens, AEPO entropy-aware advantage,
 *       TAO-RL post-tool shaping ({@link ai.arbor.kernels.TokenShaping}) — native CPU/CUDA kernels.</li>
 *   <li>Filters over {@link ai.arbor.advantage.ScoredTrajectory}: {@link ai.arbor.advantage.ToolAwareFilter}
 *       (TAO-RL), {@link ai.arbor.advantage.DegenerateGroupFilter}, {@link ai.arbor.advantage.VoidTurnFilter}
 *       (SimpleTIR), {@link ai.arbor.advantage.OverlongFilter} (DAPO), each returning a
 *       {@link ai.arbor.advantage.FilterResult} (what to keep and why); {@link ai.arbor.advantage.DynamicSampling}
 *       (DAPO over-sampling).</li>
 * </ul>
 * Reward shaping (DAPO overlong penalty, CoRT's −0.1, GRPO-TCR's tool-count term) is in
 * {@link ai.arbor.reward}.
 */
package ai.arbor.advantage;

import ai.arbor.kernels.TokenAdvantages;
import ai.arbor.kernels.TokenShaping;
