package ai.arbor.sandbox;

import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.function.Function;

/**
 * Everything needed to start one worker and to read its output: the launch command (jailed or not),
 * the configuration line sent to it, and the output caps.
 *
 * @param command             argv of the launcher ({@code env -i … bwrap … python3 -I -c <worker>})
 * @param launcherEnvironment variables added to the launcher's environment (cleared by {@code env -i};
 *                            tests set a marker here to prove nothing reaches the worker)
 * @param directory           working directory of the launcher (the scratch dir in fallback mode), or null
 * @param config              renders the worker's configuration line for a start nonce
 * @param spawnTimeout        how long to wait for the ready frame
 * @param headChars           characters kept from the start of each stream
 * @param tailChars           characters kept from the end of each stream
 * @param hardOutputBytes     bytes on one stream after which the worker is killed
 * @param stopStrays          jail mode with stray killing: from the soft deadline of a cell on, Java itself
 *                            kills every process of the jail but the interpreter and its ancestors, so a
 *                            process swarm cannot starve the interrupted interpreter of the CPU it needs
 *                            to stop the cell and keep its state
 * @param forkServer          the worker is a fork server's template (worker.py {@code fork_server}): each
 *                            session runs in a child forked from it; the stray stopper spares that child
 */
record WorkerSpec(List<String> command, Map<String, String> launcherEnvironment, Path directory,
                  Function<String, String> config, Duration spawnTimeout, int headChars, int tailChars,
                  long hardOutputBytes, boolean stopStrays, boolean forkServer) {

    String configJson(String nonce) {
        return config.apply(nonce);
    }
}
