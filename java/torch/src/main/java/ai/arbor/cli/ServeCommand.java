package ai.arbor.cli;

import ai.arbor.chat.ChatTemplate;
import ai.arbor.rollout.CharTokenizer;
import ai.arbor.rollout.HuggingFaceTokenizer;
import ai.arbor.rollout.Tokenizer;
import ai.arbor.torch.model.CpuThreads;
import ai.arbor.torch.model.ReferencePolicy;
import ai.arbor.generate.CompletionServer;
import ai.arbor.generate.LocalGenerator;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;

/**
 * {@code arbor serve}: a policy checkpoint over vLLM's OpenAI-compatible API (completions, chat completions)
 * and SGLang's weight updates ({@link CompletionServer}; docs/serving.md).
 */
@Command(name = "serve", mixinStandardHelpOptions = true,
        description = "Serve a policy checkpoint over vLLM's OpenAI-compatible API (/v1/completions, /v1/chat/completions) "
                + "and SGLang's /update_weights_from_disk (see docs/serving.md).")
public final class ServeCommand implements Runnable {
    @Option(names = {"--checkpoint", "--model"}, required = true,
            description = "Policy checkpoint (.safetensors) written by arbor train, or a Hugging Face model directory (config.json + safetensors; docs/models.md).")
    Path checkpoint;

    @Option(names = "--host", defaultValue = "127.0.0.1", description = "Address to bind (default ${DEFAULT-VALUE}).")
    String host;

    @Option(names = "--port", defaultValue = "8000", description = "TCP port (0: any free port; default ${DEFAULT-VALUE}).")
    int port;

    @Option(names = "--device", defaultValue = "auto", description = "cpu, cuda, cuda:N or auto (default ${DEFAULT-VALUE}).")
    String device;

    @Option(names = "--tokenizer", description = "A Hugging Face tokenizer.json (default: the model directory's tokenizer.json if it has one, else the reference policy's character tokenizer).")
    Path tokenizerJson;

    @Option(names = "--served-model-name", defaultValue = "arbor", description = "Model name reported and accepted (vLLM's flag; default ${DEFAULT-VALUE}).")
    String model;

    @Option(names = "--max-batch", defaultValue = "256", description = "Sequences decoded together (default ${DEFAULT-VALUE}).")
    int maxBatch;

    @Option(names = "--weight-version", defaultValue = "0",
            description = "Weight version reported until the first /update_weights_from_disk (SGLang's flag; default ${DEFAULT-VALUE}).")
    String weightVersion;

    @Option(names = "--no-thinking", description = "Render chat prompts with enable_thinking=false (requests' chat_template_kwargs override it).")
    boolean noThinking;

    @Option(names = "--threads", defaultValue = "1", description = "libtorch's intra-op threads of the model's math (default ${DEFAULT-VALUE}; 1 suits small models).")
    int threads;

    @Option(names = "--blas-threads", defaultValue = "1", description = "OpenBLAS's threads (default ${DEFAULT-VALUE}; the two pools spin, so keep one of them at 1).")
    int blasThreads;

    @Override
    public void run() {
        try {
            CpuThreads.set(threads, blasThreads);
            java.nio.file.Path dirTokenizer = checkpoint.resolve("tokenizer.json");
            Tokenizer tok = tokenizerJson != null ? HuggingFaceTokenizer.load(tokenizerJson)
                    : java.nio.file.Files.isRegularFile(dirTokenizer) ? HuggingFaceTokenizer.load(dirTokenizer) : CharTokenizer.ascii();
            ReferencePolicy policy = ReferencePolicy.load(checkpoint, device, ScalarType.Float);
            LocalGenerator gen = new LocalGenerator(policy, tok,
                    new LocalGenerator.Options(maxBatch, 2 * maxBatch, 16, 1024));
            gen.setWeightVersion(weightVersion);
            // the chat template of a model directory (tokenizer_config.json's chat_template, or chat_template.jinja)
            ChatTemplate template = null;
            if (java.nio.file.Files.isDirectory(checkpoint) && (java.nio.file.Files.isRegularFile(checkpoint.resolve("chat_template.jinja"))
                    || java.nio.file.Files.isRegularFile(checkpoint.resolve("tokenizer_config.json"))
                    && java.nio.file.Files.readString(checkpoint.resolve("tokenizer_config.json")).contains("\"chat_template\"")))
                template = ChatTemplate.load(checkpoint);
            CompletionServer.Options opts = new CompletionServer.Options(model, checkpoint.toString(), policy.config().maxSeq(), template,
                    noThinking ? java.util.Map.of("enable_thinking", false) : null,
                    CompletionServer.weightLoader(policy, tok, policy.device().str().getString()), Math.max(8, maxBatch), maxBatch,
                    Duration.ofMinutes(10));
            CompletionServer server = CompletionServer.start(gen, tok, opts, host, port);
            CountDownLatch stopped = new CountDownLatch(1);
            Runtime.getRuntime().addShutdownHook(new Thread(() -> {
                server.close();
                gen.close();
                policy.close();
                stopped.countDown();
            }, "arbor-serve-shutdown"));
            System.out.println("arbor serve: " + server.baseUrl() + "/v1/completions" + (template != null ? ", /v1/chat/completions" : "")
                    + " (model '" + model + "', " + policy.config().parameterCount() + " parameters, max_model_len "
                    + policy.config().maxSeq() + ", device " + device + ", weight version " + weightVersion + ")");
            System.out.flush();
            stopped.await();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (Exception e) {
            throw new IllegalStateException("arbor serve: " + e.getMessage(), e);
        }
    }
}
