package ai.arbor.task;

/**
 * The policy's side of one demonstration, turn by turn. The agent loop runs the real tools between the
 * turns, so a turn is written knowing the observations so far (e.g. the answer copies the program's
 * output; the second search names what the first one found).
 */
@FunctionalInterface
public interface DemoScript {

    /**
     * The text of turn {@code turn}, given the response so far (generated text and observations, decoded).
     * A turn that calls a tool ends with the call's closing tag; the last turn (the answer) ends the
     * demonstration. Returns null when the observations do not support the demonstration (then it is dropped).
     */
    String turn(int turn, String responseSoFar);
}
