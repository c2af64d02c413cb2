package example;

import ai.arbor.torch.TorchTensors;
import ai.arbor.torch.TorchTokenStats;
import java.util.Arrays;
import org.bytedeco.pytorch.Tensor;

/** arbor-torch from another build: the token-statistics kernels on PyTorch-preset tensors (no copy). */
public final class TorchEmbedExample {
    public static void main(String[] args) {
        Tensor logits = Tensor.create(new float[] {2f, 1f, 0.1f,    0f, 0f, 0f}, 2, 3);
        Tensor labels = Tensor.create(new long[] {0, 2}, 2);
        TorchTokenStats.Stats s = TorchTokenStats.forward(logits, labels, 1.0f, null, 0);
        System.out.println("logprob " + Arrays.toString(TorchTensors.hostFloats(s.logprob())));
        System.out.println("entropy " + Arrays.toString(TorchTensors.hostFloats(s.entropy())));
    }
}
