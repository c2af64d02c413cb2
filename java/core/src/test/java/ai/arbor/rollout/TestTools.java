package ai.arbor.rollout;

import ai.arbor.tools.Observation;
import ai.arbor.tools.Tool;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;

/** Small tools for agent-loop tests. */
final class TestTools {
    private TestTools() {}

    /** A tool computing its observation with {@code f}. */
    static Tool tool(String name, Function<String, Observation> f) {
        return new Tool() {
            @Override
            public String name() {
                return name;
            }

            @Override
            public String description() {
                return "test tool " + name;
            }

            @Override
            public String parametersSchema() {
                return "{\"type\":\"object\"}";
            }

            @Override
            public Observation call(String arguments) {
                return f.apply(arguments);
            }
        };
    }

    /** {@code out:<arguments>}. */
    static Tool echo(String name) {
        return tool(name, a -> Observation.ok("out:" + a, null));
    }

    /**
     * A stateful "interpreter": each session counts its calls; a call returns the count so far. The
     * argument {@code sleep} blocks for 2 s. Counts sessions opened and closed.
     */
    static final class CounterProvider implements ToolProvider {
        final AtomicInteger opened = new AtomicInteger(), closed = new AtomicInteger(), calls = new AtomicInteger();

        @Override
        public ToolSession open() {
            opened.incrementAndGet();
            AtomicInteger count = new AtomicInteger();
            Tool t = tool("python", a -> {
                calls.incrementAndGet();
                int c = count.incrementAndGet();
                if (a.equals("sleep")) {
                    try {
                        Thread.sleep(2000);
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                }
                return Observation.ok(String.valueOf(c), null);
            });
            return ToolSession.of(List.of(t), true, closed::incrementAndGet);
        }
    }
}
